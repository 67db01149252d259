"""Property-based fuzzing: hostile text through the real provider parsers and into every store.

Arbitrary Unicode, lone surrogates (as JSON escapes, the way a model sends them), control
characters and invalid UTF-8 bytes are streamed

* through :class:`~lovia.providers.OpenAIChatProvider` and :class:`~lovia.providers.AnthropicProvider`
  from a local HTTP server speaking each vendor's SSE format, and
* through :class:`~lovia.testing.ScriptedProvider`,

as answer text, tool-call arguments, call ids, tool results, tool errors, provider error
messages and user input, into the in-memory, SQLite and PostgreSQL stores. Properties:

* nothing but a :class:`~lovia.LoviaError` ever leaves ``Runner.run``;
* every run ends ``completed`` or ``failed`` in its checkpoint;
* no tool runs twice: re-issuing the run id after a failure never re-executes a stored call;
* what is stored reads back equal to what the run produced (and holds no lone surrogate);
* the streamed text equals the final answer.

A short run is always on (``max_examples`` small); ``LOVIA_SOAK=1`` runs many more examples.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lovia import Agent, CheckpointOptions, LoviaError, Runner, events, tool
from lovia._text import clean_text
from lovia.exceptions import ToolError
from lovia.providers import AnthropicProvider, OpenAIChatProvider
from lovia.stores._codec import decode_entries, encode_entries
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.transcript import entry_to_dict
from tests.hostile.conftest import open_stores
from tests.providers.servers import (
    FakeServer,
    Reply,
    anthropic_stream,
    anthropic_text_stream,
    openai_chunk,
    openai_text_stream,
)

SOAK = os.environ.get("LOVIA_SOAK") == "1"
EXAMPLES = 150 if SOAK else 6
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=not SOAK,  # CI runs are reproducible; soaks explore
)

SPECIAL = [
    "\ud800",
    "\udfff",
    "\ud83d",
    "\ude00",
    "\ud83d\ude00",
    "\x00",
    "\x01",
    "\x1b[31m",
    "\x7f",
    "\r\n",
    "\r",
    "\u2028",
    "\ufeff",
    "\ufffd",
    '"',
    "\\",
    "\\ud800",  # a literal backslash-u sequence in the text itself
    "é",
    "😀",
    "data: [DONE]\n\n",
    "\n\nevent: error\ndata: {}\n\n",
]
# Raw bytes that are not UTF-8, spliced into the wire at a marker (HTTP providers only).
BAD_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80\x80"]
MARK = "@@bad{}@@"

hostile = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(SPECIAL)), max_size=6).map("".join)
wire = st.lists(
    st.one_of(st.text(max_size=6), st.sampled_from(SPECIAL), st.integers(0, len(BAD_BYTES) - 1).map(MARK.format)),
    max_size=6,
).map("".join)


@dataclass
class Case:
    user: str
    answer: str
    arg: str
    raw_args: bool  # send arguments that are not JSON at all
    call_id: str
    tool_raises: str | None  # "tool_error" / "bug" / None
    fails: str | None  # the error message of a failing second turn, or None to answer


def cases(text_strategy: st.SearchStrategy[str]) -> st.SearchStrategy[Case]:
    return st.builds(
        Case,
        user=hostile,
        answer=text_strategy,
        arg=text_strategy,
        raw_args=st.booleans(),
        call_id=st.one_of(st.just("call_1"), hostile.map(lambda s: "c" + s)),
        tool_raises=st.sampled_from([None, None, "tool_error", "bug"]),
        fails=st.one_of(st.none(), text_strategy),
    )


def make_agent(provider: Any, ran: list[str], case: Case) -> Agent:
    @tool
    def echo(s: str = "") -> str:
        """Echo the text back."""
        ran.append(s)
        if case.tool_raises == "tool_error":
            raise ToolError(f"cannot echo {s}", hint=f"try {s}")
        if case.tool_raises == "bug":
            raise ValueError(f"bug on {s}")
        return f"echo: {s}\x00{case.answer}"

    return Agent(name="fuzz", model=provider, tools=[echo], retry=None)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_pair(
    request: pytest.FixtureRequest, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> Iterator[tuple[Any, Any]]:
    session, cp, cleanup = loop.run_until_complete(open_stores(request.param, tmp_path))
    yield session, cp
    loop.run_until_complete(cleanup())


def _no_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def check_run(store_pair: tuple[Any, Any], make_provider: Any, case: Case, *, expect_answer: str | None) -> None:
    """Run the case, then check every property; re-issue the run id and check no tool re-ran."""
    provider = make_provider()
    try:
        await _check_run(store_pair, provider, case, expect_answer=expect_answer)
    finally:
        close = getattr(provider, "aclose", None)
        if close is not None:
            await close()


async def _check_run(store_pair: tuple[Any, Any], provider: Any, case: Case, *, expect_answer: str | None) -> None:
    session, cp = store_pair
    rid, sid = f"fuzz-{uuid.uuid4().hex}", f"s-{uuid.uuid4().hex}"
    ran: list[str] = []
    agent = make_agent(provider, ran, case)
    options = CheckpointOptions(cp, rid)
    deltas: list[str] = []
    completed_results: list[str] = []
    result: Any = None
    error: BaseException | None = None
    try:
        handle = Runner.stream(agent, case.user, session=session, session_id=sid, checkpoint=options)
        async for ev in handle:
            if isinstance(ev, events.TextDelta):
                deltas.append(ev.delta)
            elif isinstance(ev, events.ToolCallCompleted):
                completed_results.append(ev.output)
        result = await handle.result()
    except BaseException as exc:
        error = exc
    assert error is None or isinstance(error, LoviaError), f"non-LoviaError escaped: {error!r}"
    if error is not None:
        assert error.hint, f"no hint on {error!r}"

    snap = await cp.load(rid)
    assert snap is not None
    assert snap.status in ("completed", "failed"), snap.status
    stored = [entry_to_dict(e) for e in snap.entries]
    assert _no_surrogate(stored) and _no_surrogate(snap.error)
    assert [
        entry_to_dict(e) for e in decode_entries(encode_entries(snap.entries), session_id=None, run_id=rid)
    ] == stored
    assert [d["output"] for d in stored if d["type"] == "tool_result"] == completed_results
    assert len(ran) <= 1
    if result is not None:
        assert snap.status == "completed"
        assert stored == [entry_to_dict(e) for e in result.entries]
        assert [entry_to_dict(e) for e in await session.load(sid)] == stored
        assert "".join(deltas) == result.output
        if expect_answer is not None:
            assert result.output == expect_answer
    else:
        assert snap.status == "failed" and error is not None

    # Re-issue the same run id: a completed run replays, a failed one resumes; no tool runs again.
    before = len(ran)
    again_agent = make_agent(ScriptedProvider([text("recovered")] * 3), ran, case)
    try:
        await Runner.run(again_agent, case.user, session=session, session_id=sid, checkpoint=options)
    except BaseException as exc:
        assert isinstance(exc, LoviaError), f"non-LoviaError escaped a re-issue: {exc!r}"
    assert len(ran) == before, "a stored tool call ran again after a re-issue"
    final = await cp.load(rid)
    assert final is not None and final.status in ("completed", "failed")
    assert _no_surrogate([entry_to_dict(e) for e in final.entries])


# --------------------------------------------------------------------------- scripted provider


@FUZZ
@given(case=cases(hostile))
def test_scripted_provider_into_every_store(
    case: Case, store_pair: tuple[Any, Any], loop: asyncio.AbstractEventLoop
) -> None:
    args: Any = case.arg if case.raw_args else {"s": case.arg}

    def provider() -> ScriptedProvider:
        second = fail(LoviaError(case.fails, hint="fuzz")) if case.fails is not None else text(case.answer)
        return ScriptedProvider([call("echo", args, call_id=case.call_id), second])

    # ScriptedProvider's text() streams one character per delta: each is cleaned on its own.
    expected = "".join(clean_text(ch) for ch in case.answer)
    loop.run_until_complete(check_run(store_pair, provider, case, expect_answer=expected))


# --------------------------------------------------------------------------- HTTP providers


def _wire(body: str) -> bytes:
    """JSON text -> bytes, with every marker replaced by raw invalid UTF-8."""
    data = body.encode("utf-8", "surrogatepass")
    for i, raw in enumerate(BAD_BYTES):
        data = data.replace(MARK.format(i).encode(), raw)
    return data


def _openai_tool_turn(call_id: str, arguments: str) -> bytes:
    chunks = [
        openai_chunk({"role": "assistant", "content": None}),
        openai_chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": "echo"}}]}),
    ]
    for i in range(0, len(arguments), 5):
        chunks.append(openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[i : i + 5]}}]}))
    chunks.append(openai_chunk({}, finish_reason="tool_calls"))
    # ensure_ascii: lone surrogates travel as \\udXXX escapes, exactly as a model's JSON sends them.
    return _wire("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")


def _anthropic_tool_turn(call_id: str, arguments: str) -> bytes:
    events_: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "m",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": call_id, "name": "echo", "input": {}},
        },
    ]
    for i in range(0, len(arguments), 5):
        events_.append(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": arguments[i : i + 5]},
            }
        )
    events_ += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    return _wire("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events_))


def _openai_text_turn(answer: str) -> bytes:
    body = openai_text_stream("x")  # the framing of a real answer ...
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({"content": answer[i : i + 3]}) for i in range(0, len(answer), 3)]
    chunks += [openai_chunk({}, finish_reason="stop"), openai_chunk(usage={"prompt_tokens": 1, "completion_tokens": 1})]
    assert body.startswith(b"data: ")  # ... with hostile content in place of "x"
    return _wire("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")


def _anthropic_text_turn(answer: str) -> bytes:
    events_ = anthropic_text_stream("")
    start, stop = events_[:3], events_[3:]
    deltas = [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": answer[i : i + 3]}}
        for i in range(0, len(answer), 3)
    ]
    assert anthropic_stream(start)  # the helper frames the same events
    return _wire("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [*start, *deltas, *stop]))


def _error_reply(vendor: str, message: str) -> Reply:
    if vendor == "openai":
        payload = {"error": {"message": message, "type": "invalid_request_error"}}
    else:
        payload = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return Reply(
        status=400, chunks=[_wire(json.dumps(payload))], headers={"Content-Type": "application/json"}, mode="length"
    )


@pytest.fixture(scope="module")
def vendor_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
@FUZZ
@given(case=cases(wire))
def test_real_provider_parsers_over_http_into_every_store(
    vendor: str,
    case: Case,
    store_pair: tuple[Any, Any],
    vendor_server: FakeServer,
    loop: asyncio.AbstractEventLoop,
) -> None:
    arguments = case.arg if case.raw_args else json.dumps({"s": case.arg})
    call_id = case.call_id.replace("@", "")  # ids stay printable on the wire; their content is hostile
    tool_turn = _openai_tool_turn if vendor == "openai" else _anthropic_tool_turn
    text_turn = _openai_text_turn if vendor == "openai" else _anthropic_text_turn
    second = _error_reply(vendor, case.fails) if case.fails is not None else Reply.sse(text_turn(case.answer))
    vendor_server.replies.clear()
    vendor_server.enqueue(Reply.sse(tool_turn(call_id, arguments)), second)

    def provider() -> Any:
        if vendor == "openai":
            return OpenAIChatProvider("m", base_url=vendor_server.base_url, api_key="k")
        return AnthropicProvider("m", base_url=vendor_server.base_url, api_key="k")

    loop.run_until_complete(check_run(store_pair, provider, case, expect_answer=None))
