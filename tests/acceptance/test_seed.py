"""Acceptance tests for the seed page "Sessions & checkpoints", written from the page alone.

Each test names the seed sentence(s) it checks. Only the public API is used: ``lovia``,
``lovia.transcript``, ``lovia.testing`` and the documented SQLite layout. Crash sentences are
checked with real child processes (``_crash_child.py``) that SIGKILL themselves.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lovia import (
    Agent,
    AgentHooks,
    CheckpointOptions,
    InMemoryCheckpointer,
    InMemorySession,
    RunCancelled,
    RunContext,
    RunHead,
    Runner,
    RunSnapshot,
    Segment,
    Session,
    SQLiteCheckpointer,
    SQLiteSession,
    UserError,
    tool,
)
from lovia.context import ContextResult
from lovia.events import HandoffOccurred, RunCompleted, RunStarted, TurnStarted
from lovia.exceptions import ProviderError
from lovia.testing import ScriptedProvider, batch, call, fail, text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    drop_dangling_tool_calls,
)

CHILD = Path(__file__).with_name("_crash_child.py")


# ============================================================================ helpers


def user(content: str) -> InputEntry:
    return InputEntry(role="user", content=content)


def tc(call_id: str, name: str = "lookup", args: str = "{}") -> ToolCallEntry:
    return ToolCallEntry(call_id=call_id, name=name, arguments=args)


def tr(call_id: str, output: str, *, is_error: bool = False) -> ToolResultEntry:
    return ToolResultEntry(call_id=call_id, output=output, is_error=is_error)


def said(content: str) -> AssistantTextEntry:
    return AssistantTextEntry(content=content)


def answered(entries: list[Any]) -> set[str]:
    return {e.call_id for e in entries if isinstance(e, ToolResultEntry)}


def body(prompt: list[Any]) -> list[Any]:
    """A model prompt without its system head (absent when the agent has no instructions)."""
    return [e for e in prompt if not (isinstance(e, InputEntry) and e.role == "system")]


def user_texts(entries: list[Any]) -> list[str]:
    return [e.content for e in entries if isinstance(e, InputEntry) and e.role == "user"]


def assert_tool_consistent(entries: list[Any]) -> None:
    calls = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
    results = [e.call_id for e in entries if isinstance(e, ToolResultEntry)]
    assert sorted(calls) == sorted(results), f"calls {calls} vs results {results}"
    for i, e in enumerate(entries):
        if isinstance(e, ToolResultEntry):
            assert any(isinstance(c, ToolCallEntry) and c.call_id == e.call_id for c in entries[:i]), (
                "result before its call"
            )


class Counter:
    """A function model that counts its calls and answers from the transcript."""

    def __init__(self, decide: Any) -> None:
        self.calls = 0
        self.prompts: list[list[Any]] = []
        self.decide = decide
        self.provider = ScriptedProvider(self._turn)

    def _turn(self, entries: list[Any], tools: list[Any]) -> Any:
        self.calls += 1
        self.prompts.append(list(entries))
        return self.decide(entries)


@pytest.fixture(params=["memory", "sqlite"])
async def session(request: Any, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield InMemorySession()
        return
    store = SQLiteSession(str(tmp_path / "chat.db"))
    yield store
    await store.close()


@pytest.fixture(params=["memory", "sqlite"])
async def cp(request: Any, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield InMemoryCheckpointer()
        return
    store = SQLiteCheckpointer(str(tmp_path / "runs.db"))
    yield store
    await store.close()


@pytest.fixture
async def sqlite_pair(tmp_path: Path) -> Any:
    s = SQLiteSession(str(tmp_path / "both.db"), wal=True)
    c = SQLiteCheckpointer(str(tmp_path / "both.db"), wal=True)
    yield s, c
    await s.close()
    await c.close()


def remembering_model() -> Counter:
    """Answers "what is my project called" from whatever history it is shown."""

    def decide(entries: list[Any]) -> Any:
        texts = user_texts(entries)
        named = [t.split("called ")[1].rstrip(".") for t in texts if "called " in t and not t.startswith("What")]
        if texts[-1].startswith("What"):
            return text(named[-1] if named else "I don't know.")
        return text("Noted.")

    return Counter(decide)


@tool
async def lookup(ctx: RunContext, key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def interrupted_run_agent(name: str = "worker") -> tuple[Agent, Counter]:
    """First model turn calls ``lookup``; the second model call fails with a retryable provider error."""
    state = {"failed": False}

    def decide(entries: list[Any]) -> Any:
        if "c1" not in answered(entries):
            return call("lookup", {"key": "k"}, call_id="c1")
        if not state["failed"]:
            state["failed"] = True
            return fail(ProviderError("endpoint down", retryable=True))
        return text("finished")

    model = Counter(decide)
    return Agent(name=name, model=model.provider, tools=[lookup], retry=None), model


# ============================================================================ sessions


async def test_session_lets_the_next_run_remember(session: Any) -> None:
    """Session example: the second run loaded the first run's transcript as history ("Atlas")."""
    model = remembering_model()
    agent = Agent(name="a", model=model.provider)
    first = await Runner.run(agent, "My project is called Atlas.", session=session, session_id="u1")
    result = await Runner.run(agent, "What is my project called?", session=session, session_id="u1")
    assert result.output == "Atlas"
    # "The runner loads prior history at run start": the prompt of run 2 holds run 1's entries.
    assert body(model.prompts[-1])[: len(first.entries)] == first.entries
    # "You control session_id": another id is another conversation.
    other = await Runner.run(agent, "What is my project called?", session=session, session_id="u2")
    assert other.output == "I don't know."


async def test_completed_run_is_appended_as_one_segment(session: Any) -> None:
    """When the run completes, it appends the run's own entries as one Segment (run id + entries + meta)."""
    agent = Agent(
        name="a",
        model=ScriptedProvider([call("lookup", {"key": "x"}, call_id="c1"), text("ok"), text("two")]),
        tools=[lookup],
    )
    r1 = await Runner.run(agent, "first", session=session, session_id="u1")
    r2 = await Runner.run(agent, "second", session=session, session_id="u1")
    segments = await session.segments("u1")
    assert [type(s) for s in segments] == [Segment, Segment]
    assert [s.run_id for s in segments] == [r1.run_id, r2.run_id]
    assert segments[0].entries == r1.entries and segments[1].entries == r2.entries
    assert all(isinstance(s.meta, dict) for s in segments)
    # Only the run's own entries: no system prompt, no copy of earlier history.
    assert not any(isinstance(e, InputEntry) and e.role == "system" for s in segments for e in s.entries)
    assert user_texts(segments[1].entries) == ["second"]
    # load() is the flat concatenation of segments.
    assert await session.load("u1") == [*r1.entries, *r2.entries]


async def test_store_constructors() -> None:
    """Two implementations ship: SQLiteSession(path, *, wal=False) and InMemorySession()."""
    import inspect

    params = inspect.signature(SQLiteSession).parameters
    assert params["wal"].kind is inspect.Parameter.KEYWORD_ONLY and params["wal"].default is False
    assert inspect.signature(SQLiteCheckpointer).parameters["wal"].default is False
    assert isinstance(InMemorySession(), Session)
    with pytest.raises(TypeError):
        SQLiteSession("x.db", True)  # type: ignore[misc]


# ---------------------------------------------------------------------------- the contract


async def test_session_protocol_four_methods(session: Any) -> None:
    """segments, load (flat concatenation), append(session_id, entries, *, run_id=None, meta=None), clear."""
    rid = await session.append("s", [user("a"), said("b")])
    assert isinstance(rid, str) and rid, "a run id is generated when none is given"
    await session.append("s", [user("c")], run_id="r2", meta={"k": [1, {"deep": True}]})
    segs = await session.segments("s")
    assert [s.run_id for s in segs] == [rid, "r2"]
    assert segs[1].meta == {"k": [1, {"deep": True}]}, "per-run meta is opaque and stored verbatim"
    assert await session.load("s") == [user("a"), said("b"), user("c")]
    assert await session.load("other") == [] and await session.segments("other") == []
    await session.clear("s")
    assert await session.segments("s") == [] and await session.load("s") == []


async def test_append_only_no_replace(session: Any) -> None:
    """Append-only. There is deliberately no replace: a stored run is immutable."""
    assert not hasattr(session, "replace")
    assert not hasattr(Session, "replace")
    entries = [user("original")]
    await session.append("s", entries, run_id="r1", meta={"v": 1})
    entries.append(user("mutated after append"))
    assert await session.load("s") == [user("original")], "mutating the caller's list does not touch the stored run"


async def test_append_is_idempotent_by_run_id(session: Any) -> None:
    """Appending again under an already-stored run_id is a no-op."""
    await session.append("s", [user("one")], run_id="r1", meta={"v": 1})
    await session.append("s", [user("two")], run_id="r2")
    again = await session.append("s", [user("one, but different"), said("extra")], run_id="r1", meta={"v": 2})
    assert again == "r1"
    segs = await session.segments("s")
    assert [s.run_id for s in segs] == ["r1", "r2"], "no duplicate and no reordering"
    assert segs[0].entries == [user("one")] and segs[0].meta == {"v": 1}, "the stored run is not overwritten"


async def test_segment_timing_meta(session: Any) -> None:
    """meta["timing"] is {"started_at", "finished_at"} in epoch seconds, from the run's start to the append."""
    before = time.time()
    agent = Agent(name="a", model=ScriptedProvider([text("one"), text("two")]))
    await Runner.run(agent, "1", session=session, session_id="s")
    middle = time.time()
    await Runner.run(agent, "2", session=session, session_id="s")
    after = time.time()
    first, second = await session.segments("s")
    for seg in (first, second):
        timing = seg.meta["timing"]
        assert set(timing) == {"started_at", "finished_at"}
        assert all(isinstance(v, float) for v in timing.values())
    assert before <= first.meta["timing"]["started_at"] <= first.meta["timing"]["finished_at"] <= middle
    assert middle <= second.meta["timing"]["started_at"] <= second.meta["timing"]["finished_at"] <= after


async def test_resumed_run_keeps_started_at_from_its_first_start(session: Any, cp: Any) -> None:
    """A resumed run keeps its first start, through the checkpoint's RunHead.started_at."""
    agent, _ = interrupted_run_agent()
    before = time.time()
    with pytest.raises(ProviderError):
        await Runner.run(agent, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    snap = await cp.load("r1")
    assert isinstance(snap.head, RunHead) and before <= snap.head.started_at <= time.time()
    # Rehydrate the same snapshot but with an old first start: the segment must carry it.
    old = dataclasses.replace(snap, started_at=1_000_000.0)
    resumed = await Runner.run(
        agent, [], session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1", resume_from=old)
    )
    assert resumed.output == "finished"
    (seg,) = await session.segments("s")
    assert seg.meta["timing"]["started_at"] == 1_000_000.0
    assert seg.meta["timing"]["finished_at"] >= before


async def test_resume_in_place_keeps_started_at(session: Any, cp: Any) -> None:
    """Same sentence, re-issuing with the plain default policy (no resume_from)."""
    agent, _ = interrupted_run_agent()
    with pytest.raises(ProviderError):
        await Runner.run(agent, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    first_start = (await cp.load("r1")).started_at
    between = time.time()
    while time.time() == between:  # make the resume strictly later than the first start
        pass
    await Runner.run(agent, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    (seg,) = await session.segments("s")
    assert seg.meta["timing"]["started_at"] == first_start <= between < seg.meta["timing"]["finished_at"]
    assert (await cp.load("r1")).started_at == first_start


async def test_segments_without_timing_still_load(session: Any) -> None:
    """Segments written before lovia recorded timing have none (and history still works)."""
    await session.append("s", [user("My project is called Vega."), said("Noted.")], run_id="old")
    model = remembering_model()
    result = await Runner.run(
        Agent(name="a", model=model.provider), "What is my project called?", session=session, session_id="s"
    )
    assert result.output == "Vega"
    old, new = await session.segments("s")
    assert not (old.meta or {}).get("timing")
    assert "timing" in new.meta


async def test_interrupted_runs_are_not_auto_appended(session: Any, cp: Any) -> None:
    """Interrupted runs are not auto-appended — they live in their checkpoint."""
    agent, _ = interrupted_run_agent()
    with pytest.raises(ProviderError):
        await Runner.run(agent, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    assert await session.segments("s") == []
    snap = await cp.load("r1")
    assert snap.status == "interrupted"
    assert [e.type for e in snap.entries] == ["input", "tool_call", "tool_result"]
    # A failed (non-resumable-by-nature) run is not appended either.
    broken = Agent(name="b", model=ScriptedProvider([fail(RuntimeError("bug"))]), retry=None)
    with pytest.raises(RuntimeError):
        await Runner.run(broken, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r2"))
    assert await session.segments("s") == []
    assert (await cp.load("r2")).status == "failed"

    @tool
    async def stop_here(ctx: RunContext) -> str:
        """Cancel the run from inside."""
        ctx.cancel_token.cancel("user pressed stop")
        return "stopping"

    stopper = Agent(
        name="c", model=ScriptedProvider([call("stop_here", {}, call_id="s1"), text("never")]), tools=[stop_here]
    )
    with pytest.raises(RunCancelled):
        await Runner.run(stopper, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r3"))
    assert await session.segments("s") == []
    assert (await cp.load("r3")).status == "interrupted"


async def test_finalizing_a_partial_with_drop_dangling_tool_calls(session: Any) -> None:
    """A finalized partial must stay tool-consistent — drop_dangling_tool_calls exists for that."""
    partial = [user("do two things"), tc("a"), tc("b"), tr("a", "A done"), said("thinking"), tc("c")]
    finalized = drop_dangling_tool_calls(partial)
    assert finalized == [user("do two things"), tc("a"), tr("a", "A done"), said("thinking")]
    assert drop_dangling_tool_calls(finalized) == finalized
    assert_tool_consistent(finalized)
    await session.append("s", finalized, run_id="stopped")
    # The recorded partial is usable history for the next run.
    agent = Agent(name="a", model=ScriptedProvider([text("continuing")]))
    result = await Runner.run(agent, "go on", session=session, session_id="s")
    assert result.output == "continuing"
    assert_tool_consistent(await session.load("s"))


# ============================================================================ maintenance


BIG = "x" * 5000


async def three_runs_with_big_outputs(store: Any) -> list[list[Any]]:
    runs = [
        [user("u" * 3000), tc("a1"), tc("a2"), tr("a2", "B" * 5000, is_error=True), tr("a1", BIG), said("first")],
        [user("second"), tc("b1"), tr("b1", "short"), tc("b2"), tr("b2", "C" * 4000), said("second")],
        [user("third"), tc("c1"), tr("c1", "D" * 6000), said("third")],
    ]
    for i, entries in enumerate(runs):
        await store.append("u1", entries, run_id=f"run{i}", meta={"n": i})
    return runs


async def test_trim_tool_results_truncates_older_runs(session: Any) -> None:
    """trim_tool_results truncates stored tool outputs older than the last keep_runs runs."""
    runs = await three_runs_with_big_outputs(session)
    trimmed = await session.trim_tool_results("u1", keep_chars=400, keep_runs=1)
    assert trimmed == 3, "a1, a2 and b2 are long and older than the last run; b1 is short"
    segs = await session.segments("u1")
    # Structure, order, run boundaries and call_id pairing preserved.
    assert [s.run_id for s in segs] == ["run0", "run1", "run2"]
    assert [s.meta for s in segs] == [{"n": 0}, {"n": 1}, {"n": 2}]
    for seg, original in zip(segs, runs, strict=True):
        assert [type(e) for e in seg.entries] == [type(e) for e in original]
        assert [getattr(e, "call_id", None) for e in seg.entries] == [getattr(e, "call_id", None) for e in original]
        assert [getattr(e, "is_error", None) for e in seg.entries] == [getattr(e, "is_error", None) for e in original]
        assert_tool_consistent(seg.entries)
    # Older long outputs are cut down, keeping their head; the newest run is whole.
    old_results = [e for s in segs[:2] for e in s.entries if isinstance(e, ToolResultEntry)]
    by_id = {e.call_id: e for e in old_results}
    for cid, original in (("a1", BIG), ("a2", "B" * 5000), ("b2", "C" * 4000)):
        assert by_id[cid].output.startswith(original[:400])
        assert len(by_id[cid].output) < 400 + 300 < len(original)
    assert by_id["b1"].output == "short"
    assert segs[2].entries == runs[2], "the last keep_runs runs are untouched"
    # Non-tool entries are never trimmed.
    assert segs[0].entries[0] == user("u" * 3000)
    assert segs[0].entries[-1] == said("first")


async def test_trim_is_idempotent(session: Any) -> None:
    """trim_tool_results is idempotent."""
    await three_runs_with_big_outputs(session)
    assert await session.trim_tool_results("u1", keep_chars=400, keep_runs=1) == 3
    after_first = await session.load("u1")
    assert await session.trim_tool_results("u1", keep_chars=400, keep_runs=1) == 0
    assert await session.load("u1") == after_first


async def test_trim_keep_runs_bounds(session: Any) -> None:
    """keep_runs counts runs from the end: 0 trims every run, >= the run count trims nothing."""
    runs = await three_runs_with_big_outputs(session)
    assert await session.trim_tool_results("u1", keep_chars=400, keep_runs=3) == 0
    assert await session.trim_tool_results("u1", keep_chars=400, keep_runs=10) == 0
    assert await session.load("u1") == [e for r in runs for e in r]
    assert await session.trim_tool_results("u1", keep_chars=100, keep_runs=0) == 4
    results = [e for e in await session.load("u1") if isinstance(e, ToolResultEntry)]
    assert all(len(e.output) < 100 + 300 for e in results)
    assert await session.trim_tool_results("nobody", keep_chars=10, keep_runs=0) == 0


async def test_trim_defaults_and_negative_arguments(session: Any) -> None:
    """Defaults keep_chars=400, keep_runs=1; negative arguments are a ValueError."""
    await three_runs_with_big_outputs(session)
    with pytest.raises(ValueError):
        await session.trim_tool_results("u1", keep_chars=-1, keep_runs=1)
    with pytest.raises(ValueError):
        await session.trim_tool_results("u1", keep_chars=400, keep_runs=-1)
    assert await session.trim_tool_results("u1") == 3
    a1 = next(e for e in await session.load("u1") if isinstance(e, ToolResultEntry) and e.call_id == "a1")
    assert a1.output.startswith("x" * 400) and not a1.output.startswith("x" * 401)


async def test_trimmed_session_still_drives_runs(tmp_path: Path) -> None:
    """Trimming is durable in the SQLite file and the trimmed history still feeds the next run."""
    path = str(tmp_path / "t.db")
    store = SQLiteSession(path)
    await three_runs_with_big_outputs(store)
    await store.trim_tool_results("u1", keep_chars=50, keep_runs=1)
    await store.close()
    reopened = SQLiteSession(path)
    try:
        a1 = next(e for e in await reopened.load("u1") if isinstance(e, ToolResultEntry) and e.call_id == "a1")
        assert len(a1.output) < 50 + 300
        model = Counter(lambda entries: text("ok"))
        await Runner.run(Agent(name="a", model=model.provider), "more", session=reopened, session_id="u1")
        assert_tool_consistent(body(model.prompts[0]))
    finally:
        await reopened.close()


# ---------------------------------------------------------------------------- rewind


def rewind_fixture() -> list[tuple[str, list[Any], dict[str, Any]]]:
    return [
        (
            "A",
            [user("q1"), tc("c1"), tr("c1", "r1"), said("a1")],
            {"context_state": {"from": "A"}, "timing": {"started_at": 1.0, "finished_at": 2.0}},
        ),
        ("B", [user("q2"), tc("c2"), tr("c2", "r2"), said("a2")], {"context_state": {"from": "B"}}),
        ("C", [user("q3"), said("a3")], {"context_state": {"from": "C"}}),
    ]


async def fill(store: Any) -> list[Any]:
    flat: list[Any] = []
    for rid, entries, meta in rewind_fixture():
        await store.append("u1", entries, run_id=rid, meta=meta)
        flat += entries
    return flat


async def test_rewind_cut_inside_a_run_drops_dangling_call_and_meta(session: Any) -> None:
    """keep_entries counts over load(); later runs deleted; the cut run truncated tool-consistently, loses its meta."""
    flat = await fill(session)
    removed = await session.rewind("u1", keep_entries=6)  # lands between B's call c2 and its result
    assert await session.load("u1") == flat[:5], "the dangling call at the cut is dropped too"
    assert removed == len(flat) - 5
    a, b = await session.segments("u1")
    assert (a.run_id, a.entries, a.meta) == ("A", flat[:4], rewind_fixture()[0][2]), "earlier runs are untouched"
    assert b.run_id == "B" and b.entries == [user("q2")]
    assert not b.meta, "the cut run loses its per-run meta"
    assert_tool_consistent(await session.load("u1"))


async def test_rewind_cut_inside_a_run_at_a_consistent_point(session: Any) -> None:
    flat = await fill(session)
    assert await session.rewind("u1", keep_entries=7) == 3
    segs = await session.segments("u1")
    assert [s.run_id for s in segs] == ["A", "B"]
    assert segs[1].entries == flat[4:7] and not segs[1].meta


async def test_rewind_on_a_run_boundary_deletes_whole_later_runs(session: Any) -> None:
    flat = await fill(session)
    assert await session.rewind("u1", keep_entries=4) == 6
    (a,) = await session.segments("u1")
    assert a.run_id == "A" and a.entries == flat[:4] and a.meta == rewind_fixture()[0][2]


async def test_rewind_zero_empties_and_past_end_is_a_noop(session: Any) -> None:
    """keep_entries=0 empties the session; a count at or past the end is a no-op."""
    flat = await fill(session)
    before = await session.segments("u1")
    assert await session.rewind("u1", keep_entries=len(flat)) == 0
    assert await session.rewind("u1", keep_entries=len(flat) + 5) == 0
    assert await session.segments("u1") == before, "no-op keeps entries and meta"
    assert await session.rewind("u1", keep_entries=0) == len(flat)
    assert await session.load("u1") == [] and await session.segments("u1") == []
    assert await session.rewind("u1", keep_entries=0) == 0


async def test_rewind_then_resend_sees_only_the_kept_history(session: Any) -> None:
    """Edit-and-resend: the next run sees the kept prefix; context state of the cut run does not leak back."""
    flat = await fill(session)
    seen_scratch: list[dict[str, Any]] = []

    class Spy:
        async def compact(self, req: Any) -> ContextResult:
            seen_scratch.append(dict(req.scratch))
            return ContextResult(entries=req.entries)

    model = Counter(lambda entries: text("regenerated"))
    agent = Agent(name="a", model=model.provider, context_policy=Spy())
    await Runner.run(agent, "probe", session=session, session_id="u1")
    assert seen_scratch[-1] == {"from": "C"}, "carried state normally comes from the last run's meta"
    await session.rewind("u1", keep_entries=len(flat))  # drop the probe run (no-op for earlier runs)
    await session.rewind("u1", keep_entries=5)
    await Runner.run(agent, "q2, edited", session=session, session_id="u1")
    assert body(model.prompts[-1]) == [*flat[:5], user("q2, edited")]
    assert seen_scratch[-1] == {}, "state computed after removed content must not reach the next run"


async def test_rewind_with_a_live_checkpoint(session: Any, cp: Any) -> None:
    """If the rewound run has a live checkpoint, delete it too — a later resume would replay the undone tail."""
    agent = Agent(name="a", model=ScriptedProvider([text("answer one"), text("answer two")]))
    await Runner.run(agent, "q", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    await session.rewind("s", keep_entries=0)
    # Not deleting the checkpoint: re-issuing replays the undone tail back into the session.
    await Runner.run(agent, "q", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    assert [e.content for e in await session.load("s") if isinstance(e, AssistantTextEntry)] == ["answer one"]
    # Deleting it too: the same id now starts fresh.
    await session.rewind("s", keep_entries=0)
    await cp.delete("r1")
    result = await Runner.run(agent, "q", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r1"))
    assert result.output == "answer two" and not result.replayed


async def test_custom_session_without_rewind_works_with_the_runner() -> None:
    """rewind is optional for a custom Session: the protocol is four methods."""

    class ListSession:
        def __init__(self) -> None:
            self.rows: dict[str, list[Segment]] = {}

        async def segments(self, session_id: str) -> list[Segment]:
            return list(self.rows.get(session_id, []))

        async def load(self, session_id: str) -> list[Any]:
            return [e for s in self.rows.get(session_id, []) for e in s.entries]

        async def append(self, session_id: str, entries: Any, *, run_id: str | None = None, meta: Any = None) -> str:
            rid = run_id or f"gen{len(self.rows.get(session_id, []))}"
            segs = self.rows.setdefault(session_id, [])
            if not any(s.run_id == rid for s in segs):
                segs.append(Segment(rid, list(entries), meta))
            return rid

        async def clear(self, session_id: str) -> None:
            self.rows.pop(session_id, None)

    store = ListSession()
    assert isinstance(store, Session) and not hasattr(store, "rewind")
    model = remembering_model()
    agent = Agent(name="a", model=model.provider)
    await Runner.run(agent, "My project is called Atlas.", session=store, session_id="u1")
    assert (await Runner.run(agent, "What is my project called?", session=store, session_id="u1")).output == "Atlas"
    assert len(store.rows["u1"]) == 2


# ============================================================================ checkpoints


async def test_checkpointed_run_and_its_snapshot(cp: Any) -> None:
    """Checkpoint example.

    RunSnapshot = own entries + head (agent name, usage, turns, status, context state, handoff).
    """
    agent = Agent(
        name="migrator",
        model=ScriptedProvider([call("lookup", {"key": "fmt"}, call_id="c1"), text("Migrated.")]),
        tools=[lookup],
    )
    result = await Runner.run(
        agent, "Migrate the report format.", checkpoint=CheckpointOptions(cp, "report-migration-1")
    )
    assert result.output == "Migrated."
    snap = await cp.load("report-migration-1")
    assert isinstance(snap, RunSnapshot) and snap.run_id == "report-migration-1"
    assert snap.entries == result.entries, "the run's own entries (no system prompt)"
    head = snap.head
    assert isinstance(head, RunHead)
    assert head.agent_name == "migrator" and head.status == "completed" and head.turns == result.turns == 2
    assert head.usage == result.usage
    assert isinstance(head.context_state, dict)
    assert head.pending_handoff is None


async def test_snapshot_after_model_turn_and_after_every_tool_result(cp: Any) -> None:
    """The loop snapshots after the model turn and after every tool result."""
    observed: dict[str, Any] = {}

    @tool(parallel=False)
    async def first(ctx: RunContext) -> str:
        """First."""
        snap = await cp.load(ctx.run_id)
        observed["first"] = [(e.type, getattr(e, "call_id", None)) for e in snap.entries]
        return "one"

    @tool(parallel=False)
    async def second(ctx: RunContext) -> str:
        """Second."""
        snap = await cp.load(ctx.run_id)
        observed["second"] = [(e.type, getattr(e, "call_id", None)) for e in snap.entries]
        observed["status"] = snap.status
        return "two"

    agent = Agent(
        name="a",
        model=ScriptedProvider([batch(("first", {}, "f"), ("second", {}, "s")), text("done")]),
        tools=[first, second],
    )
    await Runner.run(agent, "go", checkpoint=CheckpointOptions(cp, "r"))
    # Both calls are stored before either tool runs (snapshot after the model turn)...
    assert observed["first"] == [("input", None), ("tool_call", "f"), ("tool_call", "s")]
    # ...and the first result is stored before the second tool runs (snapshot after every result).
    assert observed["second"] == [*observed["first"], ("tool_result", "f")]
    assert observed["status"] == "running"


async def test_deps_are_not_snapshotted(cp: Any) -> None:
    """Your deps object is not snapshotted — you re-supply it when resuming."""

    class Deps:
        def __init__(self, label: str) -> None:
            self.label = label
            self.secret = object()  # not serializable

    seen: list[str | None] = []

    @tool
    async def who(ctx: RunContext) -> str:
        """Report the deps label."""
        seen.append(ctx.deps.label if ctx.deps is not None else None)
        return "ok"

    state = {"failed": False}

    def decide(entries: list[Any], tools: Any) -> Any:
        if "w1" not in answered(entries):
            return call("who", {}, call_id="w1")
        if not state["failed"]:
            state["failed"] = True
            return fail(ProviderError("down", retryable=True))
        return call("who", {}, call_id="w2") if "w2" not in answered(entries) else text("bye")

    agent = Agent(name="a", model=ScriptedProvider(decide), tools=[who], retry=None)
    with pytest.raises(ProviderError):
        await Runner.run(agent, "go", deps=Deps("first-process"), checkpoint=CheckpointOptions(cp, "r"))
    snap = await cp.load("r")
    assert "first-process" not in snap.to_json()
    await Runner.run(agent, "go", deps=Deps("second-process"), checkpoint=CheckpointOptions(cp, "r"))
    assert seen == ["first-process", "second-process"], "the resumed run sees the deps re-supplied to it"


# ---------------------------------------------------------------------------- if_run_exists


async def interrupted(cp: Any, run_id: str) -> Counter:
    agent, model = interrupted_run_agent()
    with pytest.raises(ProviderError):
        await Runner.run(agent, "original input", checkpoint=CheckpointOptions(cp, run_id))
    return model


async def completed(cp: Any, run_id: str) -> Any:
    agent = Agent(name="worker", model=ScriptedProvider([text("stored answer")]))
    return await Runner.run(agent, "original input", checkpoint=CheckpointOptions(cp, run_id))


def fresh_agent() -> tuple[Agent, Counter]:
    model = Counter(lambda entries: text(f"fresh answer to {user_texts(entries)[-1]}"))
    return Agent(name="worker", model=model.provider, tools=[lookup]), model


async def test_policy_resume_default(cp: Any) -> None:
    """ "resume" (default): continues an existing run, replays a completed one, starts fresh otherwise."""
    assert CheckpointOptions(cp, "x").if_run_exists == "resume"
    await interrupted(cp, "int")
    continuing = Agent(name="worker", model=ScriptedProvider([text("continued")]), tools=[lookup])
    await Runner.run(continuing, "new input", checkpoint=CheckpointOptions(cp, "int"))
    snap = await cp.load("int")
    assert snap.status == "completed" and snap.output == "continued"
    assert user_texts(snap.entries) == ["original input"], "on resume, the new input is ignored"
    assert [e.call_id for e in snap.entries if isinstance(e, ToolCallEntry)] == ["c1"], "continued, not restarted"

    first = await completed(cp, "done")
    agent, model = fresh_agent()
    replay = await Runner.run(agent, "new input", checkpoint=CheckpointOptions(cp, "done"))
    assert model.calls == 0 and replay.output == "stored answer" and replay.replayed
    assert replay.entries == first.entries

    result = await Runner.run(agent, "hello", checkpoint=CheckpointOptions(cp, "none"))
    assert result.output == "fresh answer to hello" and not result.replayed

    # A failed run is an existing, non-completed run too: "resume" continues it.
    broken = Agent(
        name="worker",
        model=ScriptedProvider([call("lookup", {"key": "k"}, call_id="c1"), fail(RuntimeError("bug"))]),
        tools=[lookup],
        retry=None,
    )
    with pytest.raises(RuntimeError):
        await Runner.run(broken, "original input", checkpoint=CheckpointOptions(cp, "failed"))
    assert (await cp.load("failed")).status == "failed"
    fixed = Agent(name="worker", model=ScriptedProvider([text("fixed")]), tools=[lookup])
    again = await Runner.run(fixed, "new input", checkpoint=CheckpointOptions(cp, "failed"))
    assert again.output == "fixed" and [e.call_id for e in again.entries if isinstance(e, ToolResultEntry)] == ["c1"]


async def test_policy_restart(cp: Any) -> None:
    """ "restart": discards an existing run and starts fresh (or just starts fresh)."""
    await interrupted(cp, "int")
    await completed(cp, "done")
    for rid in ("int", "done", "none"):
        agent, model = fresh_agent()
        result = await Runner.run(
            agent, f"new for {rid}", checkpoint=CheckpointOptions(cp, rid, if_run_exists="restart")
        )
        assert model.calls == 1 and result.output == f"fresh answer to new for {rid}" and not result.replayed
        snap = await cp.load(rid)
        assert user_texts(snap.entries) == [f"new for {rid}"], "the old run's entries are gone"
        assert snap.status == "completed"


async def test_policy_fail(cp: Any) -> None:
    """ "fail": raises UserError for an existing run, starts fresh otherwise."""
    await interrupted(cp, "int")
    await completed(cp, "done")
    for rid in ("int", "done"):
        agent, model = fresh_agent()
        with pytest.raises(UserError):
            await Runner.run(agent, "x", checkpoint=CheckpointOptions(cp, rid, if_run_exists="fail"))
        assert model.calls == 0
    assert (await cp.load("int")).status == "interrupted", "a refused call does not touch the stored run"
    agent, model = fresh_agent()
    result = await Runner.run(agent, "y", checkpoint=CheckpointOptions(cp, "none", if_run_exists="fail"))
    assert result.output == "fresh answer to y"


async def test_policy_resume_only(cp: Any) -> None:
    """ "resume_only": continues an existing run, raises UserError when none is stored."""
    await interrupted(cp, "int")
    resumed = await Runner.run(
        Agent(name="worker", model=ScriptedProvider([text("continued")]), tools=[lookup]),
        [],
        checkpoint=CheckpointOptions(cp, "int", if_run_exists="resume_only"),
    )
    assert resumed.output == "continued" and user_texts(resumed.entries) == ["original input"]
    agent, model = fresh_agent()
    with pytest.raises(UserError):
        await Runner.run(agent, [], checkpoint=CheckpointOptions(cp, "none", if_run_exists="resume_only"))
    assert model.calls == 0 and await cp.load("none") is None
    # A completed run under resume_only comes back too (replayed).
    await completed(cp, "done")
    again = await Runner.run(agent, [], checkpoint=CheckpointOptions(cp, "done", if_run_exists="resume_only"))
    assert again.output == "stored answer" and model.calls == 0


async def test_unknown_policy_is_rejected(cp: Any) -> None:
    with pytest.raises(UserError):
        CheckpointOptions(cp, "r", if_run_exists="sometimes")  # type: ignore[arg-type]


async def test_new_input_ignored_on_resume_reaches_the_model_as_original(cp: Any) -> None:
    """On resume, the new input is ignored — the transcript already carries the original."""
    await interrupted(cp, "r")
    model = Counter(lambda entries: text("ok"))
    await Runner.run(
        Agent(name="worker", model=model.provider, tools=[lookup]),
        "a different request",
        checkpoint=CheckpointOptions(cp, "r"),
    )
    prompt_users = user_texts(model.prompts[0])
    assert prompt_users == ["original input"]


# ---------------------------------------------------------------------------- replay


async def test_replay_terminal_events_only_no_hooks_no_guardrails(session: Any, cp: Any) -> None:
    """A replay re-emits terminal events only; hooks and output guardrails are not re-run; finish_reason None."""
    hooks = AgentHooks()
    hook_calls: list[str] = []
    hooks.on_any(lambda ev, ctx: hook_calls.append(type(ev).__name__))
    guard_calls: list[Any] = []

    def guard(output: Any, ctx: Any) -> None:
        guard_calls.append(output)

    agent = Agent(
        name="a",
        model=ScriptedProvider([call("lookup", {"key": "k"}, call_id="c1"), text("the answer")]),
        tools=[lookup],
        hooks=hooks,
        output_guardrails=[guard],
    )
    original = await Runner.run(agent, "q", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r"))
    assert guard_calls == ["the answer"] and "RunCompleted" in hook_calls and original.finish_reason == "stop"
    hook_calls.clear()

    handle = Runner.stream(agent, "q", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r"))
    events = [ev async for ev in handle]
    replay = await handle.result()
    assert [type(e) for e in events] == [RunStarted, RunCompleted]
    assert events[-1].result is replay
    assert replay.replayed and replay.output == "the answer"
    assert replay.finish_reason is None
    assert replay.usage == original.usage, "usage of the stored run is reported to the caller"
    assert replay.turns == original.turns and replay.entries == original.entries
    assert guard_calls == ["the answer"], "output guardrails are not re-run"
    assert not any(name in hook_calls for name in ("TurnStarted", "MessageCompleted", "ToolCallCompleted")), hook_calls
    assert hook_calls == [], f"hooks ran on the original completion and are not re-run: {hook_calls}"
    assert len(await session.segments("s")) == 1, "a replayed run never duplicates its entries"


async def test_replay_heals_the_missing_session_append(session: Any, cp: Any) -> None:
    """Session persistence is re-applied on replay — idempotently — healing the crash window."""
    before = time.time()
    agent = Agent(name="a", model=ScriptedProvider([text("persisted")]))
    original = await Runner.run(agent, "q", checkpoint=CheckpointOptions(cp, "r"))  # as if the append never happened
    assert await session.segments("s") == []
    snap = await cp.load("r")
    for _ in range(2):
        replay = await Runner.run(
            Agent(name="a", model=ScriptedProvider([])),
            "q",
            session=session,
            session_id="s",
            checkpoint=CheckpointOptions(cp, "r"),
        )
        assert replay.output == "persisted" and replay.replayed
    (seg,) = await session.segments("s")
    assert seg.run_id == "r" and seg.entries == original.entries
    assert seg.meta["timing"]["started_at"] == snap.started_at >= before


async def test_completed_run_id_reuse_drops_new_input(session: Any, cp: Any) -> None:
    """Sharp edge: reusing a completed run_id silently drops your new input — by design (replay)."""
    agent = Agent(name="a", model=ScriptedProvider([text("first answer"), text("never")]))
    await Runner.run(agent, "first question", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r"))
    again = await Runner.run(
        agent, "next question", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r")
    )
    assert again.output == "first answer"
    assert "next question" not in user_texts(await session.load("s"))
    assert "next question" not in user_texts(again.entries)


async def test_run_id_collision_across_sessions_is_one_run(tmp_path: Path) -> None:
    """Sharp edge: the checkpointer is global; two "runs" sharing an id are one run to it (nothing corrupted)."""
    async with SQLiteSession(str(tmp_path / "s.db")) as session, SQLiteCheckpointer(str(tmp_path / "c.db")) as cp:
        agent = Agent(name="a", model=ScriptedProvider([text("alice's answer"), text("bob's answer")]))
        await Runner.run(
            agent, "alice asks", session=session, session_id="alice", checkpoint=CheckpointOptions(cp, "job-1")
        )
        bob = await Runner.run(
            agent, "bob asks", session=session, session_id="bob", checkpoint=CheckpointOptions(cp, "job-1")
        )
        assert bob.output == "alice's answer" and bob.replayed
        assert user_texts(await session.load("alice")) == ["alice asks"], "alice's session is intact"


# ---------------------------------------------------------------------------- delete_on_success


class RecordingSession(InMemorySession):
    """Looks at the checkpoint at the moment of the session append; can fail the append."""

    def __init__(self, cp: Any, *, fail: bool = False) -> None:
        super().__init__()
        self.cp = cp
        self.fail = fail
        self.seen_status: list[str | None] = []

    async def append(self, session_id: str, entries: Any, *, run_id: str | None = None, meta: Any = None) -> str:
        snap = await self.cp.load(run_id) if run_id else None
        self.seen_status.append(snap.status if snap else None)
        if self.fail:
            raise OSError("session store unavailable")
        return await super().append(session_id, entries, run_id=run_id, meta=meta)


async def test_order_on_success_checkpoint_then_session(cp: Any) -> None:
    """On success the order is fixed: checkpoint finalized first, then the session append."""
    session = RecordingSession(cp)
    await Runner.run(
        Agent(name="a", model=ScriptedProvider([text("ok")])),
        "q",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(cp, "r"),
    )
    assert session.seen_status == ["completed"]
    # So while the run is in the session, it is never still resumable.
    assert (await cp.load("r")).status == "completed"


async def test_delete_on_success(cp: Any) -> None:
    """delete_on_success=True drops the snapshot once the run is in the session; delete comes after the append."""
    session = RecordingSession(cp)
    result = await Runner.run(
        Agent(name="a", model=ScriptedProvider([text("ok")])),
        "q",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(cp, "r", delete_on_success=True),
    )
    assert session.seen_status == ["completed"], "snapshot still present (and final) at the session append"
    assert await cp.load("r") is None
    (seg,) = await session.segments("s")
    assert seg.run_id == "r" and seg.entries == result.entries


async def test_delete_on_success_store_error_leaves_a_replayable_snapshot(cp: Any) -> None:
    """A store error between the append and the delete still leaves a replayable snapshot."""
    broken = RecordingSession(cp, fail=True)
    with pytest.raises(OSError):
        await Runner.run(
            Agent(name="a", model=ScriptedProvider([text("the result")])),
            "q",
            session=broken,
            session_id="s",
            checkpoint=CheckpointOptions(cp, "r", delete_on_success=True),
        )
    snap = await cp.load("r")
    assert snap is not None and snap.status == "completed" and snap.output == "the result"
    healthy = RecordingSession(cp)
    model = Counter(lambda entries: text("must not be called"))
    replay = await Runner.run(
        Agent(name="a", model=model.provider),
        "q",
        session=healthy,
        session_id="s",
        checkpoint=CheckpointOptions(cp, "r", delete_on_success=True),
    )
    assert replay.output == "the result" and model.calls == 0
    assert len(await healthy.segments("s")) == 1
    assert await cp.load("r") is None, "the healed replay then deletes the snapshot"


async def test_resume_from_a_snapshot_you_obtained(tmp_path: Path) -> None:
    """resume_from= rehydrates a RunSnapshot you obtained yourself."""
    async with (
        SQLiteCheckpointer(str(tmp_path / "a.db")) as source,
        SQLiteCheckpointer(str(tmp_path / "b.db")) as target,
    ):
        await interrupted(source, "moving")
        snap = RunSnapshot.from_json((await source.load("moving")).to_json())  # e.g. shipped over the wire
        model = Counter(lambda entries: text("continued elsewhere"))
        agent = Agent(name="worker", model=model.provider, tools=[lookup])
        result = await Runner.run(agent, [], checkpoint=CheckpointOptions(target, "moving", resume_from=snap))
        assert result.output == "continued elsewhere" and model.calls == 1
        assert result.entries[: len(snap.entries)] == snap.entries
        assert (await target.load("moving")).status == "completed"
        only = await Runner.run(
            Agent(name="worker", model=ScriptedProvider([text("again")]), tools=[lookup]),
            [],
            checkpoint=CheckpointOptions(resume_from=snap),
        )
        assert only.output == "again" and only.run_id == "moving"


# ---------------------------------------------------------------------------- what resume does


async def store_inflight(cp: Any, run_id: str, entries: list[Any], **head: Any) -> None:
    head.setdefault("status", "interrupted")
    await cp.append(run_id, entries, RunHead(**head))


async def test_resume_rebuilds_and_drains_dangling_calls(session: Any, cp: Any) -> None:
    """Resume: prompt re-rendered, history reloaded, snapshot appended; dangling calls re-executed (same turn)."""
    executions: list[tuple[str, int]] = []

    @tool(parallel=False)
    async def act(ctx: RunContext, n: int) -> str:
        """Act."""
        executions.append((f"act{n}", ctx.turn))
        return f"acted {n}"

    await session.append("s", [user("earlier"), said("earlier answer")], run_id="prev")
    entries = [
        user("now"),
        said("working"),
        tc("k1", "act", '{"n": 1}'),
        tc("k2", "act", '{"n": 2}'),
        tr("k1", "acted 1"),
    ]
    await store_inflight(cp, "r", entries, agent_name="a", turns=3)
    model = Counter(lambda e: text("all done"))
    agent = Agent(name="a", instructions=lambda ctx: f"deps say {ctx.deps}", model=model.provider, tools=[act])
    result = await Runner.run(
        agent, "ignored", deps="v2", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r")
    )
    assert executions == [("act2", 3)], "completed results are never re-run; the dangling call runs under its turn"
    prompt = model.prompts[0]
    assert prompt[0] == InputEntry(role="system", content="deps say v2"), "system prompt re-rendered"
    assert prompt[1:3] == [user("earlier"), said("earlier answer")], "session history reloaded"
    assert prompt[3 : 3 + len(entries)] == entries, "snapshot entries appended"
    assert isinstance(prompt[3 + len(entries)], ToolResultEntry) and prompt[3 + len(entries)].call_id == "k2"
    assert result.turns == 4 and result.output == "all done"
    assert_tool_consistent(result.entries)


async def test_full_transcript_is_session_plus_snapshot(session: Any, cp: Any) -> None:
    """full transcript = session.load(session_id) + snapshot.entries (while a run is in flight)."""
    checks: list[bool] = []

    @tool
    async def inspect_state(ctx: RunContext) -> str:
        """Compare stores with the live transcript."""
        history = await session.load("s")
        snap = await cp.load(ctx.run_id)
        checks.append(ctx.entries[1:] == [*history, *snap.entries])
        return "checked"

    await Runner.run(Agent(name="a", model=ScriptedProvider([text("hi")])), "hello", session=session, session_id="s")
    agent = Agent(
        name="a", model=ScriptedProvider([call("inspect_state", {}, call_id="i1"), text("bye")]), tools=[inspect_state]
    )
    await Runner.run(agent, "check", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r"))
    assert checks == [True]


# ---------------------------------------------------------------------------- handoffs


def handoff_agents() -> tuple[Agent, Agent, Counter, Counter]:
    billing_model = Counter(lambda e: text("billing answer"))
    triage_model = Counter(lambda e: text("triage answer"))
    billing = Agent(name="billing", instructions="You are billing.", model=billing_model.provider)
    triage = Agent(name="triage", instructions="You are triage.", model=triage_model.provider, handoffs=[billing])
    return triage, billing, triage_model, billing_model


async def test_resume_re_resolves_the_active_agent_by_name(cp: Any) -> None:
    """The snapshot records the active agent by name; the runner re-resolves it from the entry agent's graph."""
    triage, billing, triage_model, billing_model = handoff_agents()
    entries = [user("refund"), tc("h1", "transfer_to_billing"), tr("h1", "transferred"), user("and quickly")]
    await store_inflight(cp, "r", entries, agent_name="billing", turns=1)
    result = await Runner.run(triage, [], checkpoint=CheckpointOptions(cp, "r", if_run_exists="resume_only"))
    assert result.output == "billing answer" and result.final_agent is billing
    assert triage_model.calls == 0 and billing_model.calls == 1
    assert billing_model.prompts[0][0].content == "You are billing."


async def test_resume_completes_a_pending_handoff(cp: Any) -> None:
    """A transfer that fired but was not yet applied is completed before the target's first turn."""
    triage, billing, triage_model, billing_model = handoff_agents()
    entries = [user("refund"), tc("h1", "transfer_to_billing"), tr("h1", "transferred")]
    await store_inflight(cp, "r", entries, agent_name="triage", pending_handoff="billing", turns=1)
    handle = Runner.stream(triage, [], checkpoint=CheckpointOptions(cp, "r"))
    events = [ev async for ev in handle]
    result = await handle.result()
    assert result.final_agent is billing and result.output == "billing answer"
    assert triage_model.calls == 0 and billing_model.prompts[0][0].content == "You are billing."
    handoffs = [e for e in events if isinstance(e, HandoffOccurred)]
    assert [(h.from_agent.name, h.to_agent.name) for h in handoffs] == [("triage", "billing")]
    assert events.index(handoffs[0]) < next(
        i for i, e in enumerate(events) if isinstance(e, TurnStarted) and e.turn == 2
    )
    snap = await cp.load("r")
    assert snap.agent_name == "billing" and snap.pending_handoff is None


async def test_pending_handoff_is_recorded_in_the_head(cp: Any) -> None:
    """RunHead records the target of a handoff that fired but has not been applied yet."""
    seen: list[Any] = []

    @tool(parallel=False)
    async def peek(ctx: RunContext) -> str:
        """Look at the stored head."""
        snap = await cp.load(ctx.run_id)
        seen.append((snap.agent_name, snap.pending_handoff))
        return "peeked"

    billing = Agent(name="billing", model=ScriptedProvider([text("billing answer")]))
    triage = Agent(
        name="triage",
        model=ScriptedProvider([batch(("transfer_to_billing", {}, "h1"), ("peek", {}, "p1"))]),
        tools=[peek],
        handoffs=[billing],
    )
    result = await Runner.run(triage, "go", checkpoint=CheckpointOptions(cp, "r"))
    assert result.final_agent is billing
    assert seen == [("triage", "billing")]


async def test_duplicate_agent_names_are_a_hard_error_on_resume(cp: Any) -> None:
    """Two distinct agents sharing a name is a hard error on resume."""
    model = Counter(lambda e: text("never"))
    twin_a = Agent(name="helper", instructions="A", model=model.provider)
    twin_b = Agent(name="helper", instructions="B", model=model.provider)
    triage = Agent(name="triage", model=model.provider, handoffs=[twin_a, twin_b])
    await store_inflight(
        cp, "r", [user("hi"), tc("h1", "transfer_to_helper"), tr("h1", "ok")], agent_name="helper", turns=1
    )
    with pytest.raises(UserError, match="helper"):
        await Runner.run(triage, [], checkpoint=CheckpointOptions(cp, "r"))
    assert model.calls == 0


async def test_renamed_agent_breaks_resume_of_in_flight_runs(cp: Any) -> None:
    """Renaming or removing an agent breaks resume for its in-flight runs (hard error)."""
    triage, _, triage_model, billing_model = handoff_agents()
    await store_inflight(
        cp, "renamed", [user("hi"), tc("h1", "transfer_to_payments"), tr("h1", "ok")], agent_name="payments", turns=1
    )
    with pytest.raises(UserError, match="payments"):
        await Runner.run(triage, [], checkpoint=CheckpointOptions(cp, "renamed"))
    await store_inflight(
        cp,
        "pending",
        [user("hi"), tc("h1", "transfer_to_payments"), tr("h1", "ok")],
        agent_name="triage",
        pending_handoff="payments",
        turns=1,
    )
    with pytest.raises(UserError, match="payments"):
        await Runner.run(triage, [], checkpoint=CheckpointOptions(cp, "pending"))
    assert triage_model.calls == 0 and billing_model.calls == 0
    assert (await cp.load("renamed")).status == "interrupted"


async def test_completed_replay_of_a_removed_agent_degrades_to_entry_agent(
    cp: Any, caplog: Any, monkeypatch: Any
) -> None:
    """Completed-run replays degrade gracefully to the entry agent with a warning."""
    triage, _, triage_model, billing_model = handoff_agents()
    await store_inflight(
        cp,
        "done",
        [user("hi"), tc("h1", "transfer_to_payments"), tr("h1", "ok"), said("paid")],
        agent_name="payments",
        status="completed",
        output="paid",
        turns=2,
    )
    monkeypatch.setattr(logging.getLogger("lovia"), "propagate", True)
    with caplog.at_level(logging.WARNING):
        result = await Runner.run(triage, "x", checkpoint=CheckpointOptions(cp, "done"))
    assert result.output == "paid" and result.final_agent is triage and result.replayed
    assert any(r.levelno == logging.WARNING and "payments" in r.getMessage() for r in caplog.records)
    assert triage_model.calls == 0 and billing_model.calls == 0


# ============================================================================ SQLite files


def journal_mode(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0].lower()


async def test_wal_is_opt_in_for_both_stores(tmp_path: Path) -> None:
    """Both SQLite stores accept wal=True (off by default): WAL journal mode."""
    for cls in (SQLiteSession, SQLiteCheckpointer):
        off, on = tmp_path / f"{cls.__name__}-off.db", tmp_path / f"{cls.__name__}-on.db"
        async with cls(str(off)) as a, cls(str(on), wal=True) as b:
            for store in (a, b):
                if isinstance(store, SQLiteSession):
                    await store.append("s", [user("x")])
                else:
                    await store.append("r", [user("x")], RunHead(agent_name="a"))
        assert journal_mode(off) != "wal"
        assert journal_mode(on) == "wal"


async def test_several_stores_share_one_wal_file(tmp_path: Path) -> None:
    """wal=True: a database file shared with other writers (several stores in one file)."""
    import asyncio

    path = str(tmp_path / "shared.db")
    sessions = [SQLiteSession(path, wal=True) for _ in range(3)]
    cps = [SQLiteCheckpointer(path, wal=True) for _ in range(3)]
    try:

        async def one(i: int) -> Any:
            agent = Agent(
                name="a",
                model=ScriptedProvider([call("lookup", {"key": str(i)}, call_id=f"c{i}"), text(f"done {i}")]),
                tools=[lookup],
            )
            return await Runner.run(
                agent,
                f"run {i}",
                session=sessions[i % 3],
                session_id=f"u{i % 4}",
                checkpoint=CheckpointOptions(cps[i % 3], f"job-{i}"),
            )

        results = await asyncio.gather(*(one(i) for i in range(24)))
        assert [r.output for r in results] == [f"done {i}" for i in range(24)]
        per_session = [await sessions[0].segments(f"u{k}") for k in range(4)]
        assert sum(len(segs) for segs in per_session) == 24
        statuses = [(await cps[1].load(f"job-{i}")).status for i in range(24)]
        assert set(statuses) == {"completed"}
    finally:
        for store in (*sessions, *cps):
            await store.close()


async def populated_file(path: Path) -> None:
    async with SQLiteSession(str(path)) as s, SQLiteCheckpointer(str(path)) as c:
        await s.append("s", [user("kept"), tc("c1"), tr("c1", "out"), said("fine")], run_id="r1", meta={"m": 1})
        await c.append("r1", [user("kept"), said("fine")], RunHead(agent_name="a", status="completed", output="fine"))


async def read_back(path: Path) -> tuple[list[Any], Any]:
    async with SQLiteSession(str(path)) as s, SQLiteCheckpointer(str(path)) as c:
        return await s.load("s"), await c.load("r1")


def schema_rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        return [tuple(dict(r).items()) for r in conn.execute("SELECT * FROM lovia_schema ORDER BY 1")]


async def test_schema_version_is_recorded_in_lovia_schema(tmp_path: Path) -> None:
    """Each SQLite store records its schema version in a lovia_schema table in its file."""
    only_session = tmp_path / "s.db"
    async with SQLiteSession(str(only_session)) as s:
        await s.append("x", [user("x")])
    only_cp = tmp_path / "c.db"
    async with SQLiteCheckpointer(str(only_cp)) as c:
        await c.append("x", [user("x")], RunHead(agent_name="a"))
    both = tmp_path / "both.db"
    await populated_file(both)
    s_rows, c_rows, b_rows = schema_rows(only_session), schema_rows(only_cp), schema_rows(both)
    assert len(s_rows) >= 1 and len(c_rows) >= 1
    assert all(any(k == "version" and isinstance(v, int) for k, v in row) for row in b_rows)
    assert sorted(b_rows) != sorted(s_rows) and sorted(b_rows) != sorted(c_rows), "each store records its own version"


async def test_older_database_is_migrated_on_first_open(tmp_path: Path) -> None:
    """An older database (here: one that predates the version table) is migrated the first time it is opened."""
    path = tmp_path / "old.db"
    await populated_file(path)
    current = {
        dict(r)["component"] if "component" in dict(r) else i: dict(r)["version"]
        for i, r in enumerate(schema_rows(path))
    }
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE lovia_schema")
    entries, snap = await read_back(path)
    assert [e.content for e in entries if isinstance(e, AssistantTextEntry)] == ["fine"] and snap.output == "fine"
    assert {
        dict(r)["component"] if "component" in dict(r) else i: dict(r)["version"]
        for i, r in enumerate(schema_rows(path))
    } == current


async def test_too_new_database_is_refused_with_upgrade_lovia(tmp_path: Path) -> None:
    """A database that a newer lovia migrated past what this version knows is refused with "upgrade lovia"."""
    for cls, op in (
        (SQLiteSession, lambda store: store.load("s")),
        (SQLiteCheckpointer, lambda store: store.load("r1")),
    ):
        path = tmp_path / f"{cls.__name__}.db"
        await populated_file(path)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE lovia_schema SET version = version + 100")
        with pytest.raises(Exception) as info:
            store = cls(str(path))
            try:
                await op(store)
            finally:
                await store.close()
        message = f"{info.value} {getattr(info.value, 'hint', '') or ''}".lower()
        assert "upgrade lovia" in message, message


def rewrite_entries(path: Path, table: str, change: Any, *, form: str = "dict") -> None:
    """Rewrite every stored entry as a (newer) lovia would write it, with a matching checksum:
    ``change`` maps the entry's dict form to what is written, in the dict form or, with
    ``form="row"``, as the compact row form with every known field and the dict's other values after
    them (where a newer lovia puts the fields it adds)."""
    from lovia.stores._codec import checksum
    from lovia.transcript import _ROW_CODES, _ROW_FIELDS, _row_to_dict

    def written(d: dict[str, Any]) -> Any:
        if form == "dict":
            return d
        known = _ROW_FIELDS[d["type"]]
        return [
            _ROW_CODES[d["type"]],
            *(d.get(k) for k in known),
            *(v for k, v in d.items() if k not in {*known, "type"}),
        ]

    meta = "meta_json" if table == "session_runs" else "NULL"
    with sqlite3.connect(path) as conn:
        for rowid, raw, meta_json in conn.execute(f"SELECT rowid, entries_json, {meta} FROM {table}").fetchall():
            stored = [_row_to_dict(i) if isinstance(i, list) else i for i in json.loads(raw)]
            text = json.dumps([written(change(d)) for d in stored])
            conn.execute(
                f"UPDATE {table} SET entries_json = ?, checksum = ? WHERE rowid = ?",
                (text, checksum(text, meta_json), rowid),
            )


@pytest.mark.parametrize("form", ["dict", "row"])
async def test_unknown_fields_are_ignored_when_reading(tmp_path: Path, form: str) -> None:
    """Stored entries are read leniently: fields this version doesn't know are ignored."""
    path = tmp_path / "newer.db"
    await populated_file(path)
    expected = await read_back(path)
    for table in ("session_runs", "snapshot_turns"):
        rewrite_entries(path, table, lambda d: {**d, "added_by_lovia_2": {"x": 1}}, form=form)
    with sqlite3.connect(path) as conn:
        (head,) = conn.execute("SELECT head_json FROM snapshot_heads").fetchone()
        conn.execute(
            "UPDATE snapshot_heads SET head_json = ?", (json.dumps({**json.loads(head), "future_head_field": 7}),)
        )
    entries, snap = await read_back(path)
    assert entries == expected[0]
    assert snap.entries == expected[1].entries and snap.output == "fine"
    # And a run can still use that history.
    async with SQLiteSession(str(path)) as s:
        result = await Runner.run(
            Agent(name="a", model=ScriptedProvider([text("still works")])), "hi", session=s, session_id="s"
        )
    assert result.output == "still works"


@pytest.mark.parametrize("table", ["session_runs", "snapshot_turns"])
async def test_unknown_entry_type_is_an_error(tmp_path: Path, table: str) -> None:
    """Only an unknown entry type is an error."""
    path = tmp_path / "alien.db"
    await populated_file(path)
    rewrite_entries(path, table, lambda d: {**d, "type": "hologram"} if d["type"] == "assistant_text" else d)
    async with SQLiteSession(str(path)) as s, SQLiteCheckpointer(str(path)) as c:
        with pytest.raises(Exception, match="hologram"):
            if table == "session_runs":
                await s.load("s")
            else:
                await c.load("r1")


async def test_in_memory_stores_do_not_survive_the_process() -> None:
    """InMemory* stores don't survive the process — each instance is its own world."""
    s1, c1 = InMemorySession(), InMemoryCheckpointer()
    await s1.append("s", [user("x")], run_id="r")
    await c1.append("r", [user("x")], RunHead(agent_name="a"))
    assert await InMemorySession().load("s") == [] and await InMemoryCheckpointer().load("r") is None


# ============================================================================ real crashes


def run_child(work: Path, scenario: str, run_id: str = "job-1", **extra: Any) -> tuple[int, dict[str, Any] | None, str]:
    cfg = {"work": str(work), "scenario": scenario, "run_id": run_id, **extra}
    proc = subprocess.run([sys.executable, str(CHILD), json.dumps(cfg)], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else None), proc.stderr


def effects(work: Path) -> list[dict[str, Any]]:
    path = work / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def stored(work: Path, run_id: str = "job-1") -> tuple[list[Segment], RunSnapshot | None]:
    async with (
        SQLiteSession(str(work / "store.db"), wal=True) as s,
        SQLiteCheckpointer(str(work / "store.db"), wal=True) as c,
    ):
        return await s.segments("s1"), await c.load(run_id)


async def test_crash_mid_tool_then_reissue_from_fresh_processes(tmp_path: Path) -> None:
    """A crashed worker re-issues the same call: completed results not re-run, dangling ones are, answer comes back."""
    rc, out, err = run_child(tmp_path, "sequential", deps="deps-1")
    assert rc == -9 and out is None, err
    segs, snap = await stored(tmp_path)
    assert segs == [], "an interrupted run is not in the session"
    assert snap.status == "running" and snap.turns == 2
    assert [(e.type, getattr(e, "call_id", None)) for e in snap.entries] == [
        ("input", None),
        ("tool_call", "c1"),
        ("tool_result", "c1"),
        ("tool_call", "c2"),
    ], "the model turn and every tool result were saved; c2 was in flight"
    first_start = snap.started_at

    before_resume = time.time()
    rc, out, err = run_child(tmp_path, "sequential", input="a different input", deps="deps-2")
    assert rc == 0, err
    assert out["output"] == "done: charged and boomed" and not out["replayed"]
    assert out["model_calls"] == {"worker": 1}, "only the turn after the drain calls the model"
    assert out["turns"] == 3
    assert out["usage"]["input_tokens"] == 3, "the pre-crash model calls (1 token each) are carried by the snapshot"
    log = effects(tmp_path)
    assert [e["tool"] for e in log if e["tool"] == "charge"] == ["charge"], "the stored result is never re-run"
    boom_starts = [e for e in log if e["tool"] == "boom" and e["phase"] == "start"]
    assert len(boom_starts) == 2 and boom_starts[0]["pid"] != boom_starts[1]["pid"], "the dangling call runs again"
    assert {e["turn"] for e in boom_starts} == {2}, "re-executed under the same turn number"
    assert {e["run_id"] for e in log} == {"job-1"}, "ctx.run_id is the dedup key across processes"
    assert [e["deps"] for e in boom_starts] == ["deps-1", "deps-2"], "deps re-supplied by the resuming process"

    segs, snap = await stored(tmp_path)
    (seg,) = segs
    assert seg.run_id == "job-1" and snap.status == "completed"
    assert user_texts(seg.entries) == ["go"], "the new input was ignored"
    assert_tool_consistent(seg.entries)
    assert [e.call_id for e in seg.entries if isinstance(e, ToolResultEntry)] == ["c1", "c2"]
    timing = seg.meta["timing"]
    assert timing["started_at"] == first_start < before_resume <= timing["finished_at"]

    rc, out, err = run_child(tmp_path, "sequential", input="yet another")
    assert rc == 0, err
    assert out["replayed"] and out["model_calls"] == {} and out["output"] == "done: charged and boomed"
    assert out["events"] == ["RunStarted", "RunCompleted"] and out["finish_reason"] is None
    assert out["usage"]["input_tokens"] == 3
    segs, _ = await stored(tmp_path)
    assert len(segs) == 1, "the session holds the run once"
    assert len(effects(tmp_path)) == len(log), "a replay runs no tool"


async def test_crash_inside_a_batch_keeps_the_finished_sibling(tmp_path: Path) -> None:
    """Snapshot after every tool result: a finished call of the same batch is not re-run."""
    rc, _, err = run_child(tmp_path, "batch")
    assert rc == -9, err
    _, snap = await stored(tmp_path)
    assert [(e.type, getattr(e, "call_id", None)) for e in snap.entries][1:] == [
        ("tool_call", "c1"),
        ("tool_call", "c2"),
        ("tool_result", "c1"),
    ]
    rc, out, err = run_child(tmp_path, "batch")
    assert rc == 0 and out["output"] == "batch done", err
    log = effects(tmp_path)
    assert [e["tool"] for e in log].count("charge") == 1
    assert [e["turn"] for e in log if e["tool"] == "boom"] == [1, 1, 1]
    segs, _ = await stored(tmp_path)
    assert len(segs) == 1 and segs[0].entries == (await stored(tmp_path))[1].entries


async def test_crash_with_a_pending_handoff(tmp_path: Path) -> None:
    """The resume completes a fired-but-unapplied transfer before the target's first turn."""
    rc, _, err = run_child(tmp_path, "pending_handoff")
    assert rc == -9, err
    _, snap = await stored(tmp_path)
    assert snap.agent_name == "triage" and snap.pending_handoff == "billing"
    rc, out, err = run_child(tmp_path, "pending_handoff")
    assert rc == 0, err
    assert out["final_agent"] == "billing" and out["output"] == "billing: settled"
    assert out["model_calls"] == {"billing": 1}, "triage is not asked again"
    assert "HandoffOccurred" in out["events"]
    assert out["events"].index("HandoffOccurred") < len(out["events"]) - out["events"][::-1].index("TurnStarted") - 1
    boom = [e for e in effects(tmp_path) if e["tool"] == "boom" and e["phase"] == "start"]
    assert len(boom) == 2
    segs, snap = await stored(tmp_path)
    assert len(segs) == 1 and snap.agent_name == "billing" and snap.pending_handoff is None
    assert_tool_consistent(segs[0].entries)


async def test_crash_after_a_handoff_resumes_the_active_agent(tmp_path: Path) -> None:
    """Resume works across handoffs: the active agent is found by name."""
    rc, _, err = run_child(tmp_path, "after_handoff")
    assert rc == -9, err
    _, snap = await stored(tmp_path)
    assert snap.agent_name == "billing"
    rc, out, err = run_child(tmp_path, "after_handoff")
    assert rc == 0, err
    assert out["final_agent"] == "billing" and out["model_calls"] == {"billing": 1}
    rc, out, err = run_child(tmp_path, "after_handoff")
    assert out["replayed"] and out["final_agent"] == "billing" and out["model_calls"] == {}


async def test_crash_between_checkpoint_finalization_and_session_append(tmp_path: Path) -> None:
    """The crash window between the two stores heals on the next replay (idempotent session append)."""
    rc, _, err = run_child(tmp_path, "session_window")
    assert rc == -9, err
    segs, snap = await stored(tmp_path)
    assert segs == [] and snap.status == "completed", "finalized checkpoint, no segment yet"
    rc, out, err = run_child(tmp_path, "session_window")
    assert rc == 0, err
    assert out["replayed"] and out["model_calls"] == {} and out["output"] == "charged once"
    segs, snap = await stored(tmp_path)
    assert len(segs) == 1 and segs[0].entries == snap.entries
    assert segs[0].meta["timing"]["started_at"] == snap.started_at
    assert [e["tool"] for e in effects(tmp_path)] == ["charge"]
    rc, out, err = run_child(tmp_path, "session_window")
    segs, _ = await stored(tmp_path)
    assert rc == 0 and len(segs) == 1


async def test_busy_timeout_waits_for_another_writer(tmp_path: Path) -> None:
    """wal=True adds a busy timeout: a store waits for another writer instead of failing at once."""
    import asyncio

    path = tmp_path / "busy.db"
    async with SQLiteSession(str(path), wal=True) as store:
        await store.append("s", [user("first")], run_id="r0")
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute(
                "INSERT INTO session_runs (session_id, run_id, entries_json, meta_json, created_at) VALUES ('s', "
                "'ext', '[]', NULL, 0)"
            )
            pending = asyncio.ensure_future(store.append("s", [user("second")], run_id="r1"))
            await asyncio.sleep(0.3)  # the other writer holds the lock meanwhile
            assert not pending.done()
            other.execute("COMMIT")
        finally:
            other.close()
        assert await pending == "r1"
        assert [s.run_id for s in await store.segments("s")] == ["r0", "ext", "r1"]


async def test_concurrent_worker_processes_share_one_file(tmp_path: Path) -> None:
    """wal=True for a multi-process deployment: several workers write one file at the same time."""
    cfgs = [json.dumps({"work": str(tmp_path), "scenario": "plain", "run_id": f"job-{i}"}) for i in range(4)]
    procs = [
        subprocess.Popen([sys.executable, str(CHILD), cfg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for cfg in cfgs
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [o[1] for o in outs]
    async with SQLiteSession(str(tmp_path / "store.db"), wal=True) as s:
        segs = await s.segments("s1")
    assert sorted(seg.run_id for seg in segs) == [f"job-{i}" for i in range(4)]
