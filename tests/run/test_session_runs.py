"""Sessions through the runner: history, one segment per finished run, timing, concurrency."""

from __future__ import annotations

import asyncio
import time

import pytest

from lovia import Agent, InMemorySession, Runner, SQLiteSession, tool
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry


def remembering_model(entries, tools):
    """Answers from history: the project name the user gave earlier."""
    said = [e.text for e in entries if isinstance(e, InputEntry) and e.role == "user"]
    named = [s.split("called ")[1].rstrip(".") for s in said if "called " in s]
    if said[-1].startswith("What"):
        return text(named[0] if named else "I don't know.")
    return text("Noted.")


@pytest.fixture(params=["memory", "sqlite"])
def session(request, tmp_path):
    return InMemorySession() if request.param == "memory" else SQLiteSession(str(tmp_path / "chat.db"))


async def test_second_run_sees_the_first(session):
    agent = Agent(name="a", model=ScriptedProvider(remembering_model))
    t0 = time.time()
    await Runner.run(agent, "My project is called Atlas.", session=session, session_id="u1")
    result = await Runner.run(agent, "What is my project called?", session=session, session_id="u1")
    assert result.output == "Atlas"
    assert [e.type for e in result.entries] == ["input", "assistant_text"], "entries exclude history"
    segments = await session.segments("u1")
    assert len(segments) == 2 and segments[1].run_id == result.run_id
    timing = segments[0].meta["timing"]
    assert t0 <= timing["started_at"] <= timing["finished_at"] <= time.time()
    other = await Runner.run(agent, "What is my project called?", session=session, session_id="u2")
    assert other.output == "I don't know.", "sessions are isolated by id"


async def test_failed_runs_are_not_appended(session):
    agent = Agent(name="a", model=ScriptedProvider([fail(RuntimeError("down"))]), retry=None)
    with pytest.raises(RuntimeError):
        await Runner.run(agent, "hello", session=session, session_id="u")
    assert await session.segments("u") == []


async def test_history_and_context_state_carry_over(session):
    agent = Agent(name="a", model=ScriptedProvider([text("one"), text("two")]))
    await Runner.run(agent, "first", session=session, session_id="s")
    await Runner.run(agent, "second", session=session, session_id="s")
    prompts = agent.model.calls
    assert [m.text for m in prompts[1]] == ["first", "one", "second"]
    seg = (await session.segments("s"))[-1]
    assert "context_state" in seg.meta, "the default Compaction policy persists its carried state"


@tool
async def slow_echo(word: str) -> str:
    """Echo after a pause."""
    await asyncio.sleep(0.01)
    return word


async def test_many_concurrent_runs_on_one_sqlite_session(tmp_path):
    session = SQLiteSession(str(tmp_path / "shared.db"), wal=True)

    async def one(i: int) -> None:
        provider = ScriptedProvider([call("slow_echo", {"word": f"w{i}"}, call_id=f"c{i}"), text(f"done {i}")])
        agent = Agent(name="a", model=provider, tools=[slow_echo])
        await Runner.run(agent, f"run {i}", session=session, session_id=f"user-{i % 5}")

    await asyncio.gather(*(one(i) for i in range(60)))
    total = 0
    for sid in range(5):
        segments = await session.segments(f"user-{sid}")
        assert len(segments) == 12 and len({s.run_id for s in segments}) == 12
        for seg in segments:
            calls = {e.call_id for e in seg.entries if isinstance(e, ToolCallEntry)}
            results = {e.call_id for e in seg.entries if isinstance(e, ToolResultEntry)}
            assert calls == results
        total += sum(len(s.entries) for s in segments)
    assert total == 60 * 4


def test_run_ids_are_version_4_uuids_and_do_not_repeat():
    import uuid

    from lovia.session import new_run_id

    ids = [new_run_id() for _ in range(2_000)]
    assert len(set(ids)) == len(ids)
    for rid in ids[:200]:
        assert rid.startswith("run_") and len(rid) == 36
        parsed = uuid.UUID(rid[4:])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and parsed.hex == rid[4:]
