"""One lone surrogate must not make a run unfinishable (issue: hostile input, item 1)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, CheckpointOptions, LoviaError, Runner, SQLiteCheckpointer, events, tool
from lovia._guard import as_lovia_error, save_terminal
from lovia._text import clean_arguments, clean_entries, clean_text, clean_value, loads
from lovia.providers.scripted import ScriptedTurn
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.transcript import InputEntry, TextDelta, ToolCallEntry, ToolResultEntry, entry_to_dict

LONE = "\ud800"
FFFD = "\ufffd"


# --------------------------------------------------------------------------- the policy itself


def test_lone_surrogates_become_replacement_characters_and_pairs_join() -> None:
    assert clean_text(f"a{LONE}b") == f"a{FFFD}b"
    assert clean_text("\udfff") == FFFD
    assert clean_text("\ud83d\ude00") == "\U0001f600"  # a split pair is the character it encodes
    assert clean_text("\ude00\ud83d") == FFFD * 2  # the wrong order is two lone halves
    assert clean_text("plain \x00\x1b ctrl é") == "plain \x00\x1b ctrl é"  # control characters stay
    clean = "nothing to do: ü"
    assert clean_text(clean) is clean


def test_nested_values_are_cleaned_and_clean_ones_are_not_copied() -> None:
    value = {"k" + LONE: [LONE, ("x", LONE)], "n": 1}
    assert clean_value(value) == {"k" + FFFD: [FFFD, ("x", FFFD)], "n": 1}
    untouched = {"a": ["b", {"c": 1.5}]}
    assert clean_value(untouched) is untouched


def test_escaped_surrogates_in_json_payloads_and_tool_arguments() -> None:
    assert loads('{"t": "\\ud800"}') == {"t": FFFD}
    assert loads(b'{"t": "\\ud83d\\ude00"}') == {"t": "\U0001f600"}
    assert json.loads(clean_arguments('{"q": "\\ud800x"}')) == {"q": FFFD + "x"}
    assert clean_arguments('{"q": "\\ud83d\\ude00"}') == '{"q": "\\ud83d\\ude00"}'  # proper pair: untouched
    assert clean_arguments("not json \\ud800") == "not json \\ud800"  # not JSON: no lone surrogate in it


def test_entries_are_cleaned_field_by_field() -> None:
    entries = [
        InputEntry(role="user", content=LONE),
        ToolCallEntry(call_id="c1", name="echo", arguments='{"s": "\\udc00"}'),
        ToolResultEntry(call_id="c1", output=LONE, raw={"s": LONE}),
    ]
    cleaned = clean_entries(entries)
    assert cleaned[0].content == FFFD
    assert json.loads(cleaned[1].arguments) == {"s": FFFD}
    assert cleaned[2].output == FFFD and cleaned[2].raw == {"s": FFFD}
    fine = [InputEntry(role="user", content="ok")]
    assert clean_entries(fine)[0] is fine[0]


# --------------------------------------------------------------------------- through a real run


def echo_agent(provider: ScriptedProvider, counter: list[str]) -> Agent:
    @tool
    def echo(s: str) -> str:
        """Echo the text back."""
        counter.append(s)
        return f"you said {s}"

    return Agent(name="echo", model=provider, tools=[echo], retry=None)


async def test_surrogate_in_tool_arguments_text_and_result_completes_on_every_store(stores: Any) -> None:
    session, cp = stores
    ran: list[str] = []
    # call() encodes its args with json.dumps: the surrogate arrives as the ASCII escape \ud800.
    provider = ScriptedProvider([call("echo", {"s": f"x{LONE}y"}), text(f"done {LONE} \udfff")])
    options = CheckpointOptions(cp, "r-surrogate")
    result = await Runner.run(
        echo_agent(provider, ran), f"hi {LONE}", session=session, session_id="s1", checkpoint=options
    )
    assert ran == [f"x{FFFD}y"]  # the tool itself never sees a lone surrogate
    assert result.output == f"done {FFFD} {FFFD}"
    snap = await cp.load("r-surrogate")
    assert snap is not None and snap.status == "completed"
    stored = [entry_to_dict(e) for e in snap.entries]
    assert stored == [entry_to_dict(e) for e in result.entries]
    assert [entry_to_dict(e) for e in await session.load("s1")] == stored
    assert all(LONE not in json.dumps(d, ensure_ascii=False) for d in stored)
    # A re-issue replays: the tool does not run again.
    again = await Runner.run(echo_agent(ScriptedProvider([]), ran), "x", checkpoint=options)
    assert again.replayed and ran == [f"x{FFFD}y"]


async def test_streamed_deltas_match_what_is_stored(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn((TextDelta("a" + LONE), TextDelta("\ud83d"), TextDelta("b")))])
    async with SQLiteCheckpointer(tmp_path / "c.db") as cp:
        handle = Runner.stream(Agent(name="a", model=provider), "go", checkpoint=CheckpointOptions(cp, "r1"))
        deltas = [ev.delta async for ev in handle if isinstance(ev, events.TextDelta)]
        result = await handle.result()
        snap = await cp.load("r1")
    assert "".join(deltas) == result.output == f"a{FFFD}{FFFD}b"
    assert snap is not None and snap.entries[-1].content == result.output


async def test_failed_run_with_surrogates_saves_failed_and_a_reissue_does_not_rerun_the_tool(stores: Any) -> None:
    _session, cp = stores
    ran: list[str] = []
    boom = RuntimeError(f"model broke on {LONE}")
    provider = ScriptedProvider([call("echo", {"s": LONE}), fail(boom, after=text(f"partial {LONE}"), after_deltas=2)])
    options = CheckpointOptions(cp, "r-fail")
    with pytest.raises(LoviaError) as info:
        await Runner.run(echo_agent(provider, ran), "go", checkpoint=options)
    assert isinstance(info.value, RuntimeError) and info.value.__cause__ is boom and info.value.hint
    snap = await cp.load("r-fail")
    assert snap is not None and snap.status == "failed"
    assert FFFD in snap.error["message"] and LONE not in snap.error["message"]
    assert ran == [FFFD]
    # Re-issuing resumes from the checkpoint: the stored result means the tool is not re-run.
    await Runner.run(echo_agent(ScriptedProvider([text("ok")]), ran), "go", checkpoint=options)
    assert ran == [FFFD]


# --------------------------------------------------------------------------- the last line of defence


async def test_an_escaping_foreign_error_is_a_lovia_error_with_hint_and_keeps_its_class(tmp_path: Path) -> None:
    # A provider with a bug: its parser raises KeyError, which lovia did not raise on purpose.
    agent = Agent(name="a", model=ScriptedProvider([fail(KeyError("choices"))]), retry=None)
    async with SQLiteCheckpointer(tmp_path / "c.db") as cp:
        with pytest.raises(KeyError) as info:
            await Runner.run(agent, "go", checkpoint=CheckpointOptions(cp, "r1"))
        snap = await cp.load("r1")
    err = info.value
    assert isinstance(err, LoviaError) and err.hint and "__cause__" in err.hint
    assert isinstance(err.__cause__, KeyError) and not isinstance(err.__cause__, LoviaError)
    assert str(err) == str(err.__cause__)
    assert snap is not None and snap.status == "failed" and snap.error["type"] == "KeyError"


def test_as_lovia_error_leaves_lovia_errors_and_cancellation_alone() -> None:
    import asyncio

    own = LoviaError("x", hint="y")
    assert as_lovia_error(own) is own
    cancelled = asyncio.CancelledError()
    assert as_lovia_error(cancelled) is cancelled
    enc = UnicodeEncodeError("utf-8", LONE, 0, 1, "surrogates not allowed")
    wrapped = as_lovia_error(enc)
    assert isinstance(wrapped, UnicodeEncodeError) and isinstance(wrapped, LoviaError)
    assert wrapped.reason == "surrogates not allowed" and str(wrapped) == str(enc)


def test_disk_full_errors_of_every_store_get_the_free_space_hint() -> None:
    import errno

    for exc in (
        OSError(errno.ENOSPC, "No space left on device"),
        sqlite3.OperationalError("database or disk is full"),
    ):
        wrapped = as_lovia_error(exc)
        assert isinstance(wrapped, LoviaError) and "free space" in (wrapped.hint or "")


async def test_terminal_save_repairs_entries_the_store_refuses(tmp_path: Path) -> None:
    from lovia.checkpointer import RunHead

    async with SQLiteCheckpointer(tmp_path / "c.db") as cp:
        # Something that slipped past every check: a result whose call id is not even a string.
        own: list[Any] = [InputEntry(role="user", content="go"), ToolResultEntry(call_id=object(), output="x")]  # type: ignore[arg-type]

        async def save(error: dict[str, Any]) -> None:
            head = RunHead(agent_name="a")
            head.status, head.error = "failed", error
            await cp.append("r1", list(own), head)

        await save_terminal(save, own, {"type": "X", "message": LONE})
        snap = await cp.load("r1")
    assert snap is not None and snap.status == "failed" and snap.error == {"type": "X", "message": FFFD}
    assert [e.type for e in snap.entries] == ["input", "tool_result"] and snap.entries[1].is_error


async def test_an_unencodable_key_is_a_user_error_not_a_crash(stores: Any) -> None:
    from lovia import UserError
    from lovia.checkpointer import RunHead

    session, cp = stores
    if type(cp).__name__.startswith("InMemory"):  # nothing is encoded: any str is a fine key there
        await session.append(f"s{LONE}", [InputEntry(role="user", content="hi")], run_id="r")
        assert len(await session.load(f"s{LONE}")) == 1
        return
    with pytest.raises(UserError) as info:
        await session.append(f"s{LONE}", [InputEntry(role="user", content="hi")], run_id="r")
    assert "surrogate" in (info.value.hint or "")
    with pytest.raises(UserError):
        await cp.append(f"r{LONE}", [InputEntry(role="user", content="hi")], RunHead(agent_name="a"))
    assert await session.load("s-fine") == []  # the store still works
