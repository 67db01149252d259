"""The session and checkpoint files lovia 0.9.119 wrote open in ours, serve what it served, and runs continue.

Every test works on a copy: opening a file migrates it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from lovia import Agent, CheckpointOptions, Runner, SQLiteCheckpointer, SQLiteSession, tool
from lovia.stores.sqlite._schema import latest_version
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolCallEntry, ToolResultEntry, entry_from_dict, entry_to_dict

from ._fixtures import copy_fixture, drop_none, expected, needs_fixtures

pytestmark = needs_fixtures

SESSION_FILES = [("session.db", False, "session"), ("session_wal.db", True, "session_wal")]
CHECKPOINT_FILES = [("runs.db", False, "checkpoint"), ("runs_wal.db", True, "checkpoint_wal")]
# Head fields 0.9.119 did not have: a file of its own holds their defaults.
NEWER_HEAD_DEFAULTS = {
    "started_calls": [],
    "repair_attempts": 0,
    "model_usage": {},
    "trace": None,
    "provider_state": {},
}


def _versions(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {row[0]: row[1] for row in conn.execute("SELECT store, version FROM lovia_schema")}


# ---------------------------------------------------------------------------- served as written


@pytest.mark.parametrize(("name", "wal", "key"), SESSION_FILES)
async def test_session_file_serves_every_segment_as_written(tmp_path, name, wal, key):
    path = copy_fixture(name, tmp_path)
    want = expected()[key]
    async with SQLiteSession(path, wal=wal) as session:
        for session_id, segments in want.items():
            got = await session.segments(session_id)
            assert [s.run_id for s in got] == [run_id for run_id, _, _ in segments]
            for segment, (_, entries, meta) in zip(got, segments, strict=True):
                assert segment.entries == [entry_from_dict(d) for d in entries]
                assert [drop_none(entry_to_dict(e)) for e in segment.entries] == entries
                assert segment.meta == meta
            assert await session.load(session_id) == [e for s in got for e in s.entries]
        listed = {info.session_id: info.runs for info in await session.list_sessions()}
        assert listed == {sid: len(segs) for sid, segs in want.items()}
    assert _versions(path) == {"session": latest_version("session")}


@pytest.mark.parametrize(("name", "wal", "key"), CHECKPOINT_FILES)
async def test_checkpoint_file_serves_every_run_and_head_as_written(tmp_path, name, wal, key):
    path = copy_fixture(name, tmp_path)
    want = expected()[key]
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        for run_id, stored in want.items():
            snap = await checkpointer.load(run_id)
            assert snap is not None and snap.run_id == run_id
            assert snap.entries == [entry_from_dict(d) for d in stored["entries"]]
            assert [drop_none(entry_to_dict(e)) for e in snap.entries] == stored["entries"]
            head = dataclasses.asdict(snap.head)
            for field, value in NEWER_HEAD_DEFAULTS.items():
                assert head.pop(field) == value, field
            assert drop_none(head) == stored["head"]
        listed = {info.run_id: info.status for info in await checkpointer.list_runs()}
        assert listed == {run_id: stored["head"]["status"] for run_id, stored in want.items()}
    assert _versions(path) == {"checkpoint": latest_version("checkpoint")}


# ---------------------------------------------------------------------------- runs continue


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"lookup:{q}"


@pytest.mark.parametrize(("name", "wal", "_"), CHECKPOINT_FILES)
async def test_completed_run_replays_without_calling_the_model(tmp_path, name, wal, _):
    path = copy_fixture(name, tmp_path)
    model = ScriptedProvider([])  # any model call fails the test
    agent = Agent(name="bot", model=model, tools=[lookup])
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        result = await Runner.run(agent, "go", checkpoint=CheckpointOptions(checkpointer, "run-done"))
    assert result.replayed and result.output == "done-output" and model.calls == []


@pytest.mark.parametrize(("name", "wal", "_"), CHECKPOINT_FILES)
async def test_interrupted_run_resumes_where_it_stopped(tmp_path, name, wal, _):
    path = copy_fixture(name, tmp_path)
    model = ScriptedProvider([text("resumed")])
    agent = Agent(name="bot", model=model, tools=[lookup])
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        result = await Runner.run(
            agent, [], checkpoint=CheckpointOptions(checkpointer, "run-int", if_run_exists="resume_only")
        )
        snap = await checkpointer.load("run-int")
    assert result.output == "resumed" and not result.replayed
    # The model saw the stored transcript, tool result included.
    (prompt,) = model.requests
    assert ToolResultEntry(call_id="call_lookup", output="lookup:y", raw="lookup:y") in prompt.entries
    assert snap is not None and snap.status == "completed" and snap.output == "resumed"


@pytest.mark.parametrize(("name", "wal", "_"), CHECKPOINT_FILES)
async def test_pending_handoff_is_applied_and_the_dangling_call_runs(tmp_path, name, wal, _):
    path = copy_fixture(name, tmp_path)
    pings: list[str] = []

    @tool
    def ping() -> str:
        """Ping."""
        pings.append("ping")
        return "pong"

    b_model = ScriptedProvider([text("b answers")])
    b = Agent(name="b", model=b_model)
    a = Agent(name="a", model=ScriptedProvider([]), handoffs=[b], tools=[ping])
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        result = await Runner.run(
            a, [], checkpoint=CheckpointOptions(checkpointer, "run-hand", if_run_exists="resume_only")
        )
        snap = await checkpointer.load("run-hand")
    assert result.final_agent is b and result.output == "b answers"
    assert pings == ["ping"]
    (prompt,) = b_model.requests
    assert any(isinstance(e, ToolResultEntry) and e.call_id == "call_1_ping" for e in prompt.entries)
    assert snap is not None and snap.status == "completed" and snap.agent_name == "b"
    assert snap.pending_handoff is None


@pytest.mark.parametrize(("name", "wal", "_"), CHECKPOINT_FILES)
async def test_crashed_run_reruns_its_dangling_call_once(tmp_path, name, wal, _):
    path = copy_fixture(name, tmp_path)
    runs: list[str] = []

    @tool
    def crashy() -> str:
        """Survive this time."""
        runs.append("crashy")
        return "survived"

    model = ScriptedProvider([text("after the crash")])
    agent = Agent(name="bot", model=model, tools=[crashy])
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        before = await checkpointer.load("run-crash")
        assert before is not None and before.status == "running"
        assert isinstance(before.entries[-1], ToolCallEntry)
        result = await Runner.run(
            agent, [], checkpoint=CheckpointOptions(checkpointer, "run-crash", if_run_exists="resume_only")
        )
        snap = await checkpointer.load("run-crash")
    assert result.output == "after the crash" and runs == ["crashy"]
    assert snap is not None and snap.status == "completed"
    assert [e for e in snap.entries if isinstance(e, ToolResultEntry)] == [
        ToolResultEntry(call_id="call_crashy", output="survived", raw="survived")
    ]
    assert snap.turns == 2


@pytest.mark.parametrize(("name", "wal", "_"), SESSION_FILES)
async def test_conversation_continues_on_a_session_file(tmp_path, name, wal, _):
    path = copy_fixture(name, tmp_path)
    model = ScriptedProvider([call("lookup", {"q": "z"}), text("still Atlas")])
    agent = Agent(name="bot", model=model, tools=[lookup])
    async with SQLiteSession(path, wal=wal) as session:
        before = await session.load("u1")
        result = await Runner.run(agent, "And now?", session=session, session_id="u1")
        after = await session.segments("u1")
    assert result.output == "still Atlas"
    assert model.requests[0].entries[: len(before)] == before
    assert len(after) == 4 and after[-1].entries[-1].content == "still Atlas"  # type: ignore[union-attr]
