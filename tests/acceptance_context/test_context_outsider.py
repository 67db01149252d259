"""Outsider acceptance tests for context management (docs/context.md, reference 1.12, 1.13, 3.2).

Written against the public API only, the way a user would: an ``Agent`` with a ``Compaction``
policy and a ``FileResultStore``, driven by ``lovia.testing.ScriptedProvider``, with tools that
return large outputs, ``SQLiteSession`` and ``SQLiteCheckpointer``.

What a user expects: the prompts shrink below the window while the run's records (``RunResult``,
the session, the checkpoint) keep every byte; decisions are sticky, so consecutive prompts share a
byte-identical prefix; archived outputs come back through ``recall_tool_result`` without re-running
the tool, even after ``session.trim_tool_results``; the state survives resume and the next run of
a session; the overflow path retries once; a failing summarizer never fails the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, CheckpointOptions, Runner, tool
from lovia.context import (
    ClearToolResults,
    Compaction,
    FileResultStore,
    InMemoryResultStore,
    NoopContextPolicy,
    OffloadToolResults,
    ResultStore,
    calibrate,
)
from lovia.events import ContextCompacted
from lovia.exceptions import ContextOverflowError
from lovia.stores import InMemorySession, SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, ScriptedTurn, call, fail, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry, entry_to_dict

WINDOW = 8_000
"""A small window: 8,000 tokens, so half of it (4,000) is usable next to the default reserve."""
PAGE_CHARS = 12_000
"""One page is ~3,000 tokens: three of them overflow the usable window."""

RECALL_RE = re.compile(r'recall_tool_result\(ref="([^"]+)"\)')


def page(n: int) -> str:
    head = f"page {n}: "
    return (head + f"word{n} " * PAGE_CHARS)[:PAGE_CHARS]


def digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _key_of(file: Path) -> str:
    """The key a FileResultStore file holds: its name is ``<key>-<16 hex>.txt``."""
    return file.name.rsplit("-", 1)[0]


def as_bytes(entries: list[TranscriptEntry]) -> list[str]:
    """Each entry as the exact JSON a provider adapter would start from."""
    return [json.dumps(entry_to_dict(e), sort_keys=True) for e in entries]


def prompt_tokens(entries: list[TranscriptEntry]) -> int:
    """An outsider's estimate of a prompt's size: characters of the text the model reads / 4."""
    chars = 0
    for e in entries:
        if isinstance(e, ToolResultEntry):
            chars += len(e.output)
        elif isinstance(e, ToolCallEntry):
            chars += len(e.name) + len(e.arguments)
        else:
            chars += len(str(getattr(e, "content", "")))
    return chars // 4


def results_in(entries: list[TranscriptEntry]) -> dict[str, str]:
    return {e.call_id: e.output for e in entries if isinstance(e, ToolResultEntry)}


class Pages:
    """A ``fetch`` tool that counts its executions; pages numbered 100+ are short (300 chars)."""

    def __init__(self) -> None:
        self.fetched: list[int] = []

        @tool
        def fetch(n: int) -> str:
            """Fetch page ``n``."""
            self.fetched.append(n)
            return page(n)[:300] if n >= 100 else page(n)

        self.tool = fetch


def is_summary_request(tools: list[Any]) -> bool:
    """The summarizer calls the run's provider without tools; the agent always has some."""
    return not tools


class Model:
    """A scripted model: agent turns from a list, plus an optional reaction to the prompt.

    ``then(entries)`` may return a turn for the agent (e.g. a recall of a ref it saw), consulted
    after the list runs out. Summary requests (no tools) are answered by ``summary`` and counted.
    """

    def __init__(self, turns: list[ScriptedTurn], *, then=None, summary: str | None = None) -> None:
        self.turns = list(turns)
        self.then = then
        self.summary = summary
        self.summary_calls = 0
        self.provider = ScriptedProvider(self._respond)

    def _respond(self, entries: list[TranscriptEntry], tools: list[Any]) -> ScriptedTurn:
        if is_summary_request(tools):
            self.summary_calls += 1
            return text(self.summary if self.summary is not None else "no headings here")
        if self.turns:
            return self.turns.pop(0)
        if self.then is not None:
            return self.then(entries)
        return text("done")

    @property
    def agent_requests(self):
        return [r for r in self.provider.requests if not is_summary_request(r.tools)]


def fetches(n: int, start: int = 0) -> list[ScriptedTurn]:
    return [call("fetch", {"n": i}, call_id=f"c{i}") for i in range(start, start + n)]


def policy(store: ResultStore | None, *, window: int | None = WINDOW, summarize: bool = False) -> Compaction:
    """The configuration docs/context.md recommends for a first look (no summarizer unless asked)."""
    if summarize:
        return Compaction(context_window=window, store=store)
    return Compaction(context_window=window, store=store, stages=[OffloadToolResults(), ClearToolResults()])


def make_agent(model: Model, pages: Pages, pol: Any) -> Agent[Any]:
    return Agent(
        name="researcher",
        instructions="Research carefully.",
        model=model.provider,
        tools=[pages.tool],
        context_policy=pol,
    )


async def run_collecting(agent: Agent[Any], input: Any, **kw: Any):
    handle = Runner.stream(agent, input, **kw)
    events = [ev async for ev in handle]
    result = await handle
    return result, [ev for ev in events if isinstance(ev, ContextCompacted)]


# ---------------------------------------------------------------- the newcomer's first run


def test_docs_quickstart_shows_offloading(tmp_path: Path):
    """The runnable example in docs/context.md archives a result, exactly as printed there."""
    doc = (Path(__file__).parents[2] / "docs" / "context.md").read_text(encoding="utf-8")
    m = re.search(r"## See it work offline\n.*?```python\n(.*?)```", doc, re.S)
    assert m, "docs/context.md should carry a runnable offline example"
    code = m.group(1).replace('"./tool-results"', repr(str(tmp_path / "tool-results")))
    ns: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, "docs/context.md", "exec"), ns)  # the example calls asyncio.run itself
    archived = {_key_of(f) for f in (tmp_path / "tool-results").glob("*.txt")}
    assert archived, "the documented example archived nothing"
    assert ns["fetched"] == [0, 1, 2, 3]
    last = ns["provider"].requests[-1].entries
    assert {m for e in last if e.type == "tool_result" for m in RECALL_RE.findall(e.output)} <= archived
    assert sum(1 for e in last if e.type == "tool_result" and RECALL_RE.search(e.output)) == 2


# ---------------------------------------------------------------- shrinking views, full records


async def test_prompts_shrink_below_the_window_while_records_keep_every_byte(tmp_path: Path):
    pages, store_dir = Pages(), tmp_path / "results"
    model = Model(fetches(6))
    session, cp = SQLiteSession(tmp_path / "s.db"), SQLiteCheckpointer(tmp_path / "c.db")
    agent = make_agent(model, pages, policy(FileResultStore(store_dir)))
    result, compacted = await run_collecting(
        agent, "research", session=session, session_id="u1", checkpoint=CheckpointOptions(cp, "run-1")
    )
    assert result.output == "done" and pages.fetched == list(range(6))

    # Every prompt fits the window; the raw transcript would not (6 x ~3,000 tokens).
    sizes = [prompt_tokens(r.entries) for r in model.provider.requests]
    assert max(sizes) < WINDOW, sizes
    assert prompt_tokens(result.entries) > 2 * WINDOW
    last = model.provider.requests[-1].entries
    assert sum(1 for o in results_in(last).values() if o.startswith("page") and len(o) == PAGE_CHARS) <= 2

    # The records keep every byte: the run result, the session and the checkpoint.
    full = {f"c{i}": page(i) for i in range(6)}
    assert results_in(result.entries) == full
    stored = await session.load("u1")
    assert as_bytes(stored) == as_bytes(result.entries)
    snap = await cp.load("run-1")
    assert snap is not None and snap.status == "completed"
    assert as_bytes(snap.entries) == as_bytes(result.entries)

    # Archived outputs are files named by the sha256 of their content (``<digest>-<sha1 tail>.txt``,
    # lovia 0.9.119's naming), holding the whole output.
    files = sorted(store_dir.glob("*.txt"))
    assert files
    for f in files:
        content = f.read_text(encoding="utf-8")
        assert _key_of(f) == digest(content) and content in full.values()
    assert not [p for p in store_dir.iterdir() if p.suffix != ".txt"], "temp files left behind"

    # ContextCompacted carries sensible counts.
    assert compacted
    for ev in compacted:
        n = ev.notice
        assert n.reason == "threshold" and not n.reactive and n.summary is None
        assert n.tokens_before is not None and n.tokens_after is not None
        assert n.tokens_after < n.tokens_before
        assert n.tokens_before > 0.85 * (WINDOW // 2)  # it only acts above compact_at
        assert n.tokens_after < WINDOW
        assert ev.entries_before == ev.entries_after  # markers replace outputs; pairs stay intact
        assert ev.session_id == "u1" and n.detail
    assert any("offloaded" in d for ev in compacted for d in ev.notice.detail)

    # The persisted state names what was archived, in the checkpoint and in the segment meta.
    [segment] = await session.segments("u1")
    keys = {r["key"] for r in segment.meta["context_state"]["offloaded"]}
    assert keys == {_key_of(f) for f in files} or keys <= {_key_of(f) for f in files}
    assert snap.context_state["offloaded"] == segment.meta["context_state"]["offloaded"]


async def test_call_result_pairs_stay_valid_in_every_prompt(tmp_path: Path):
    model = Model(fetches(6))
    await Runner.run(make_agent(model, Pages(), policy(FileResultStore(tmp_path))), "research")
    for r in model.provider.requests:
        calls = [e.call_id for e in r.entries if isinstance(e, ToolCallEntry)]
        results = [e.call_id for e in r.entries if isinstance(e, ToolResultEntry)]
        assert calls == results  # every call keeps its (possibly shortened) result, in order


# ---------------------------------------------------------------- prefix stability


async def test_consecutive_prompts_share_a_byte_identical_prefix(tmp_path: Path):
    # Three big pages force compaction; the short pages after them let it settle below compact_at.
    model = Model(fetches(3) + [call("fetch", {"n": 100 + i}, call_id=f"s{i}") for i in range(8)])
    result, compacted = await run_collecting(make_agent(model, Pages(), policy(FileResultStore(tmp_path))), "research")
    prompts = [as_bytes(r.entries) for r in model.provider.requests]
    breaks = [i for i in range(1, len(prompts)) if prompts[i][: len(prompts[i - 1])] != prompts[i - 1]]
    # The prefix changes only on a call that took new decisions (one ContextCompacted each) ...
    assert compacted and len(breaks) == len(compacted)
    # ... and after the last one every prompt is the previous prompt, byte for byte, plus new entries.
    assert len(prompts) - breaks[-1] >= 5
    assert all(any("archived" in e for e in p) for p in prompts[breaks[0] :])
    assert results_in(result.entries)["c0"] == page(0)


# ---------------------------------------------------------------- recall


def recall_first_ref(entries: list[TranscriptEntry]) -> ScriptedTurn:
    """What a model does with a marker: read the ref it names and call the tool it names."""
    for e in entries:
        if isinstance(e, ToolResultEntry):
            m = RECALL_RE.search(e.output)
            if m:
                return call("recall_tool_result", {"ref": m.group(1)}, call_id="recall-1")
    raise AssertionError("no marker in the prompt mentions recall_tool_result")


def last_result(entries: list[TranscriptEntry]) -> str:
    return [e for e in entries if isinstance(e, ToolResultEntry)][-1].output


async def test_recall_is_offered_and_returns_archived_output_without_rerunning_the_tool(tmp_path: Path):
    pages = Pages()
    answered: list[str] = []

    def then(entries: list[TranscriptEntry]) -> ScriptedTurn:
        if answered:
            return text("done")
        answered.append(last_result(entries))
        return recall_first_ref(entries)

    model = Model(fetches(4), then=then)
    agent = make_agent(model, pages, policy(FileResultStore(tmp_path)))
    result, _ = await run_collecting(agent, "research")
    assert all("recall_tool_result" in [t.name for t in r.tools] for r in model.provider.requests)
    # The first marker is an archived page: its ref is the digest and recall returns the full page.
    assert pages.fetched == [0, 1, 2, 3]  # recall ran no fetch
    assert results_in(result.entries)["recall-1"] == page(0)
    assert "archived" in answered[0] or RECALL_RE.search(answered[0]) is None
    # The model saw the recalled page in full on its next call.
    assert last_result(model.agent_requests[-1].entries) == page(0)


async def test_recall_by_call_id_and_unknown_refs(tmp_path: Path):
    """A cleared marker's ref (a call id) reads the live transcript; a wrong ref says so, never raises."""
    pages = Pages()
    model = Model(
        fetches(2)
        + [
            call("recall_tool_result", {"ref": "c0"}, call_id="r1"),
            call("recall_tool_result", {"ref": "no-such-ref"}, call_id="r2"),
            call("recall_tool_result", {"ref": "../../etc/passwd"}, call_id="r3"),
        ]
    )
    result = await Runner.run(make_agent(model, pages, policy(InMemoryResultStore())), "research")
    out = results_in(result.entries)
    assert out["r1"] == page(0)
    assert "no-such-ref" in out["r2"] and "no stored tool output found" in out["r2"].lower()
    assert "no stored tool output found" in out["r3"].lower() and "root:" not in out["r3"]
    assert pages.fetched == [0, 1]


async def test_an_explicit_tool_named_recall_tool_result_wins(tmp_path: Path):
    @tool(name="recall_tool_result")
    def my_recall(ref: str) -> str:
        """My own recall."""
        return f"mine:{ref}"

    model = Model([call("recall_tool_result", {"ref": "x"}, call_id="r")])
    agent = Agent(name="a", model=model.provider, tools=[my_recall], context_policy=policy(InMemoryResultStore()))
    result = await Runner.run(agent, "go")
    assert results_in(result.entries)["r"] == "mine:x"
    assert [t.name for t in model.provider.requests[0].tools].count("recall_tool_result") == 1


# ---------------------------------------------------------------- sessions: trim, next run


async def test_archived_outputs_survive_trim_tool_results_and_stay_recallable(tmp_path: Path):
    store_dir = tmp_path / "results"
    session = SQLiteSession(tmp_path / "s.db")
    pages = Pages()

    first = Model(fetches(4))
    await Runner.run(
        make_agent(first, pages, policy(FileResultStore(store_dir))), "research", session=session, session_id="u1"
    )
    archived_keys = {_key_of(f) for f in store_dir.glob("*.txt")}
    assert archived_keys
    await Runner.run(
        make_agent(Model([text("hi")]), pages, policy(FileResultStore(store_dir))),
        "hello",
        session=session,
        session_id="u1",
    )

    trimmed = await session.trim_tool_results("u1")  # defaults: keep_chars=400, keep_runs=1
    assert trimmed == 4
    outputs = results_in(await session.load("u1"))
    assert all(len(o) < 1_000 for o in outputs.values())  # the session really lost the bytes

    # Next run, new process: fresh policy and store objects over the same directory.
    refs_seen: list[str] = []

    def then(entries: list[TranscriptEntry]) -> ScriptedTurn:
        if refs_seen:
            return text("done")
        turn = recall_first_ref(entries)
        refs_seen.append(
            RECALL_RE.search("".join(e.output for e in entries if isinstance(e, ToolResultEntry))).group(1)
        )
        return turn

    third = Model([], then=then)
    result = await Runner.run(
        make_agent(third, pages, policy(FileResultStore(store_dir))),
        "what did page 0 say?",
        session=session,
        session_id="u1",
    )
    assert refs_seen[0] in archived_keys
    assert results_in(result.entries)["recall-1"] == page(0)
    assert pages.fetched == [0, 1, 2, 3]

    # An output that was never archived is truncated for good: recall by call id gets the trimmed text.
    never_archived = [f"c{i}" for i in range(4) if digest(page(i)) not in archived_keys]
    assert never_archived
    fourth = Model([call("recall_tool_result", {"ref": never_archived[0]}, call_id="r")])
    result = await Runner.run(
        make_agent(fourth, pages, policy(FileResultStore(store_dir))), "and that one?", session=session, session_id="u1"
    )
    got = results_in(result.entries)["r"]
    assert got != page(int(never_archived[0][1:])) and "trimmed" in got


async def test_decisions_carry_over_to_the_next_run_of_a_session(tmp_path: Path):
    store_dir = tmp_path / "results"
    session = SQLiteSession(tmp_path / "s.db")
    first = Model(fetches(3) + [call("fetch", {"n": 100 + i}, call_id=f"s{i}") for i in range(3)])
    await Runner.run(
        make_agent(first, Pages(), policy(FileResultStore(store_dir))), "research", session=session, session_id="u1"
    )
    [segment] = await session.segments("u1")
    state = segment.meta["context_state"]
    assert state["offloaded"] and json.loads(json.dumps(state)) == state  # JSON-safe
    last_prompt = as_bytes(first.provider.requests[-1].entries)

    # A new Agent and a new policy object (no in-process cache) continue with the same decisions.
    second = Model([text("sure")])
    _, compacted = await run_collecting(
        make_agent(second, Pages(), policy(FileResultStore(store_dir))),
        "next question",
        session=session,
        session_id="u1",
    )
    first_prompt = as_bytes(second.provider.requests[0].entries)
    assert first_prompt[: len(last_prompt)] == last_prompt
    assert compacted == []  # nothing to re-plan: the carried decisions already fit
    assert session_state_keys(await session.segments("u1")) == {r["key"] for r in state["offloaded"]}

    # Control: the same history without the segment meta has to be planned again from scratch.
    bare = InMemorySession()
    await bare.append("u1", segment.entries, run_id=segment.run_id)
    third = Model([text("sure")])
    _, compacted = await run_collecting(
        make_agent(third, Pages(), policy(FileResultStore(store_dir))), "next question", session=bare, session_id="u1"
    )
    assert compacted


def session_state_keys(segments) -> set[str]:
    return {r["key"] for r in segments[-1].meta["context_state"]["offloaded"]}


# ---------------------------------------------------------------- checkpoints: crash and resume


async def test_resume_after_a_crash_sends_the_same_view(tmp_path: Path):
    cp = SQLiteCheckpointer(tmp_path / "c.db")
    store_dir = tmp_path / "results"
    pages = Pages()
    # Three pages, an overflow (the reactive pass takes aggressive decisions a normal pass would
    # not), one more page, then the worker dies on the next model call.
    crashing = Model(
        fetches(3)
        + [fail(ContextOverflowError("prompt is too long")), call("fetch", {"n": 3}, call_id="c3")]
        + [fail(RuntimeError("worker killed"))]
    )
    with pytest.raises(RuntimeError):
        await Runner.run(
            make_agent(crashing, pages, policy(FileResultStore(store_dir))),
            "research",
            checkpoint=CheckpointOptions(cp, "job-7"),
        )
    crashed_view = as_bytes(crashing.provider.requests[-1].entries)
    snap = await cp.load("job-7")
    assert snap is not None and snap.status != "completed" and snap.context_state.get("offloaded")
    assert results_in(snap.entries) == {f"c{i}": page(i) for i in range(4)}  # the checkpoint keeps every byte

    # Control: without the carried state the policy would plan afresh and send another view.
    bare = dataclasses.replace(snap, context_state={})
    control = Model([text("done")])
    await Runner.run(
        make_agent(control, Pages(), policy(FileResultStore(store_dir))),
        "x",
        checkpoint=CheckpointOptions(resume_from=bare),
    )
    assert as_bytes(control.provider.requests[0].entries) != crashed_view

    # New process: new provider, agent, policy and store objects; same run id.
    resumed = Model([text("done")])
    result = await Runner.run(
        make_agent(resumed, pages, policy(FileResultStore(store_dir))),
        "ignored on resume",
        checkpoint=CheckpointOptions(cp, "job-7"),
    )
    assert result.output == "done" and pages.fetched == [0, 1, 2, 3]
    assert as_bytes(resumed.provider.requests[0].entries) == crashed_view
    assert results_in(result.entries) == {f"c{i}": page(i) for i in range(4)}


# ---------------------------------------------------------------- the reactive path


async def test_overflow_error_retries_once_with_a_smaller_view(tmp_path: Path):
    # No window configured: only the reactive path can act.
    pages = Pages()
    model = Model(fetches(3) + [fail(ContextOverflowError("prompt is too long", reported_window=WINDOW))])
    result, compacted = await run_collecting(
        make_agent(model, pages, policy(FileResultStore(tmp_path), window=None)), "research"
    )
    assert result.output == "done" and pages.fetched == [0, 1, 2]
    sizes = [prompt_tokens(r.entries) for r in model.provider.requests]
    refused, retried = sizes[3], sizes[4]
    assert len(sizes) == 5 and retried < refused // 2 and retried < WINDOW // 2
    [ev] = compacted
    assert ev.notice.reactive and ev.notice.reason == "overflow"
    assert ev.notice.tokens_after < ev.notice.tokens_before
    assert results_in(result.entries) == {f"c{i}": page(i) for i in range(3)}
    # The window the vendor named is remembered: the next call plans against it without an error.


async def test_a_second_overflow_in_a_row_fails_the_run(tmp_path: Path):
    model = Model(fetches(3) + [fail(ContextOverflowError("too long")), fail(ContextOverflowError("still too long"))])
    with pytest.raises(ContextOverflowError):
        await Runner.run(make_agent(model, Pages(), policy(FileResultStore(tmp_path), window=None)), "research")
    assert len(model.provider.requests) == 5  # one retry, not a loop


async def test_overflow_with_nothing_to_free_is_not_retried():
    model = Model([fail(ContextOverflowError("too long"))])
    agent = Agent(name="a", model=model.provider, context_policy=policy(None, window=None))
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, "hi")
    assert len(model.provider.requests) == 1


# ---------------------------------------------------------------- summaries and the breaker


GOOD_SUMMARY = "\n".join(
    f"## {h}\n- {b}"
    for h, b in [
        ("Intent", "read pages"),
        ("Current state", "pages fetched"),
        ("Key facts", "page 0 is about word0"),
        ("Artifacts", "none"),
        ("Constraints", "none"),
        ("Next steps", "answer"),
    ]
)


async def test_a_failing_summarizer_trips_the_breaker_without_failing_the_run(tmp_path: Path):
    model = Model(fetches(8), summary="I will not follow the format.")
    session = SQLiteSession(tmp_path / "s.db")
    result, compacted = await run_collecting(
        make_agent(model, Pages(), policy(FileResultStore(tmp_path / "r"), summarize=True)),
        "research",
        session=session,
        session_id="u1",
    )
    assert result.output == "done"
    assert model.summary_calls == 3  # max_failures=3, then the stage stops trying for this run
    notes = [d for ev in compacted for d in ev.notice.detail]
    assert any("summary failed" in d for d in notes)
    assert any("disabled" in d for d in notes)
    assert all(ev.notice.summary is None for ev in compacted)
    # The summarizer's requests are plain: a system prompt, one user message, no tools.
    [req] = [r for r in model.provider.requests if not r.tools][:1]
    assert [type(e) for e in req.entries] == [InputEntry, InputEntry] and req.settings.temperature == 0
    # The breaker is per run: the session's next run tries again.
    again = Model(fetches(1, start=20), summary="still no headings")
    await Runner.run(
        make_agent(again, Pages(), policy(FileResultStore(tmp_path / "r"), summarize=True)),
        "more",
        session=session,
        session_id="u1",
    )
    assert again.summary_calls >= 1


async def test_a_good_summary_replaces_old_history_in_the_view_only(tmp_path: Path):
    model = Model(fetches(6), summary=GOOD_SUMMARY)
    result, compacted = await run_collecting(
        make_agent(model, Pages(), policy(FileResultStore(tmp_path), summarize=True)), "research"
    )
    summarized = [ev for ev in compacted if ev.notice.summary]
    assert summarized and "## Intent" in summarized[0].notice.summary
    last = model.agent_requests[-1].entries
    assert any(isinstance(e, InputEntry) and e.role == "user" and "## Key facts" in str(e.content) for e in last)
    assert len(last) < len(result.entries)
    assert results_in(result.entries) == {f"c{i}": page(i) for i in range(6)}


# ---------------------------------------------------------------- result stores


BAD_KEYS = [
    "../evil",
    "..",
    ".",
    "",
    "a/b",
    "/etc/passwd",
    "a\\b",
    "a.txt",
    "x" * 129,
    "é",
    "a\x00b",
    " lead",
    "C:evil",
]


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_file_result_store_keeps_path_escaping_keys_inside_its_folder(tmp_path: Path, key: str):
    # As lovia 0.9.119: any string is a key, and a key shaped like a path still names a file in the folder.
    store = FileResultStore(tmp_path / "store")
    await store.put(key, "secret")
    assert await store.get(key) == "secret"
    assert [p.parent for p in tmp_path.rglob("*") if p.is_file()] == [tmp_path / "store"]
    memory = InMemoryResultStore()
    await memory.put(key, "secret")
    assert await memory.get(key) == "secret"


async def test_file_result_store_round_trip_is_durable_and_atomic(tmp_path: Path):
    content = "line 1\r\nline 2 \u2603 " + "z" * 10_000
    key = digest(content)
    store = FileResultStore(tmp_path / "store")
    assert await store.get(key) is None
    await store.put(key, content)
    await store.put(key, content)  # storing again is harmless
    assert await FileResultStore(tmp_path / "store").get(key) == content  # another instance, same bytes
    assert [_key_of(p) for p in (tmp_path / "store").iterdir()] == [key]
    assert isinstance(store, ResultStore) and isinstance(InMemoryResultStore(), ResultStore)


async def test_in_memory_result_store_is_a_bounded_lru():
    store = InMemoryResultStore(max_entries=2)
    for k in ("a", "b"):
        await store.put(k, k)
    await store.get("a")
    await store.put("c", "c")
    assert (await store.get("a"), await store.get("b"), await store.get("c")) == ("a", None, "c")


# ---------------------------------------------------------------- no policy, default policy


async def test_noop_context_policy_sends_everything(tmp_path: Path):
    pages = Pages()
    model = Model(fetches(4))
    agent = make_agent(model, pages, NoopContextPolicy())
    result = await Runner.run(agent, "research")
    last = model.provider.requests[-1]
    assert results_in(last.entries) == {f"c{i}": page(i) for i in range(4)}
    assert prompt_tokens(last.entries) > WINDOW
    assert [t.name for t in last.tools] == ["fetch"]  # no recall tool without a compacting policy
    assert as_bytes([e for e in last.entries if not (isinstance(e, InputEntry) and e.role == "system")]) == as_bytes(
        result.entries[:-1]
    )


async def test_run_level_context_policy_overrides_the_agents(tmp_path: Path):
    model = Model(fetches(4))
    agent = make_agent(model, Pages(), NoopContextPolicy())
    await Runner.run(agent, "research", context_policy=policy(FileResultStore(tmp_path)))
    assert any("archived" in o for o in results_in(model.provider.requests[-1].entries).values())


def test_calibration_ignores_usage_that_cannot_cover_the_prompt():
    # ScriptedProvider reports 10 input tokens per call; a ratio learned from that would halve every
    # estimate and let prompts outgrow the window. Implausibly low observations are ignored.
    assert calibrate(1.0, 10 / 6_000) == 1.0
    assert calibrate(1.0, 0.8) == pytest.approx(0.96)
    assert calibrate(1.0, 2.0) == pytest.approx(1.2)


async def test_the_window_named_by_an_overflow_is_remembered(tmp_path: Path):
    model = Model(fetches(3) + [fail(ContextOverflowError("too long", reported_window=WINDOW))] + fetches(3, start=3))
    session = InMemorySession()
    _, compacted = await run_collecting(
        make_agent(model, Pages(), policy(FileResultStore(tmp_path), window=None)),
        "go",
        session=session,
        session_id="s",
    )
    assert [ev.notice.reason for ev in compacted][0] == "overflow"
    assert {ev.notice.reason for ev in compacted[1:]} == {"threshold"}  # proactive from then on
    assert len(model.provider.requests) == 8  # no second overflow
    assert max(prompt_tokens(r.entries) for r in model.provider.requests[4:]) < WINDOW
    assert (await session.segments("s"))[0].meta["context_state"]["window"] == WINDOW


async def test_one_policy_object_shared_by_concurrent_runs_keeps_their_views_apart(tmp_path: Path):
    shared = policy(FileResultStore(tmp_path))
    together = [Model(fetches(5, start=10 * k)) for k in range(3)]
    await asyncio.gather(*[Runner.run(make_agent(m, Pages(), shared), "go") for m in together])
    for k, m in enumerate(together):
        alone = Model(fetches(5, start=10 * k))
        await Runner.run(make_agent(alone, Pages(), policy(FileResultStore(tmp_path))), "go")
        assert [as_bytes(r.entries) for r in m.provider.requests] == [
            as_bytes(r.entries) for r in alone.provider.requests
        ]


async def test_trim_keeps_a_summary_and_rewind_drops_it(tmp_path: Path):
    session = SQLiteSession(tmp_path / "s.db")
    store = tmp_path / "r"
    first = Model(fetches(6), summary=GOOD_SUMMARY)
    await Runner.run(
        make_agent(first, Pages(), policy(FileResultStore(store), summarize=True)),
        "research",
        session=session,
        session_id="u1",
    )
    await Runner.run(
        make_agent(Model([text("ok")]), Pages(), policy(FileResultStore(store), summarize=True)),
        "hi",
        session=session,
        session_id="u1",
    )
    assert (await session.segments("u1"))[-1].meta["context_state"]["summary"]
    assert await session.trim_tool_results("u1") > 0

    after_trim = Model([text("ok")], summary=GOOD_SUMMARY)
    await Runner.run(
        make_agent(after_trim, Pages(), policy(FileResultStore(store), summarize=True)),
        "again",
        session=session,
        session_id="u1",
    )
    assert after_trim.summary_calls == 0  # the summary still applies: tool outputs are not in its fingerprint
    assert "## Intent" in str(after_trim.agent_requests[0].entries[1].content)

    await session.rewind("u1", keep_entries=3)  # back into the first run: its meta goes
    after_rewind = Model([text("ok")])
    await Runner.run(
        make_agent(after_rewind, Pages(), policy(FileResultStore(store), summarize=True)),
        "redo",
        session=session,
        session_id="u1",
    )
    shown = after_rewind.agent_requests[0].entries
    assert not any("Context summary" in str(getattr(e, "content", "")) for e in shown)
    assert list(results_in(shown)) == ["c0"] and results_in(shown)["c0"].startswith(page(0)[:400])
