"""``RunSupervisor`` driven directly (no HTTP): start, cancel with and without discard, drain;
``EventHub`` numbering and dropping; ``forward``; the run-source log filter."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry
from lovia.web import ChatStore
from lovia.web.api import RouterDeps
from lovia.web.sse import frame, frame_data
from lovia.web.supervisor import EventHub, RunController, forward, run_source_log_filter

from .helpers import Gate, scripted_agent


@pytest.fixture
async def deps(tmp_path: Path, gate: Gate) -> AsyncIterator[RouterDeps]:
    made = RouterDeps(agents={"bot": scripted_agent(gate, name="bot")}, store=ChatStore.sqlite(tmp_path / "s.db"))
    try:
        yield made
    finally:
        gate.release.set()
        await made.supervisor.shutdown(grace=5)
        await made.store.close()


async def _slow_run(deps: RouterDeps, gate: Gate, *, source: str = "user") -> RunController:
    """A run held open in its ``slow`` tool (after a finished ``lookup`` call)."""
    meta = await deps.store.create(title="held")
    before = gate.runs.get("slow", 0)
    run = await deps.supervisor.start(
        session_id=meta.id, agent=deps.pick(None), input="slow run", is_new=False, title_message=None, source=source
    )
    while gate.runs.get("slow", 0) == before:
        await asyncio.sleep(0.01)
    return run


async def test_cancel_keeps_the_finished_turns_and_drain_waits_for_the_end(deps: RouterDeps, gate: Gate) -> None:
    sup = deps.supervisor
    run = await _slow_run(deps, gate)
    assert sup.get(run.session_id) is run and run.info()["status"] == "running"
    assert not await sup.drain(run.session_id, timeout=0.1)  # still in its slow tool
    assert sup.cancel(run.session_id)
    assert await sup.drain(run.session_id, timeout=10)
    assert sup.get(run.session_id) is None and run.status == "cancelled"
    (segment,) = await deps.store.session.segments(run.session_id)
    assert segment.meta is not None and segment.meta["stopped"] is True
    assert any(isinstance(e, ToolResultEntry) for e in segment.entries)  # the finished lookup is kept
    assert await deps.store.checkpointer.load(run.run_id) is None
    assert not sup.cancel(run.session_id)  # nothing live any more


async def test_cancel_with_discard_keeps_nothing_of_the_run(deps: RouterDeps, gate: Gate) -> None:
    sup = deps.supervisor
    run = await _slow_run(deps, gate)
    live = run.subscribe_live()
    assert sup.cancel(run.session_id, discard=True)
    assert await sup.drain(run.session_id, timeout=10)
    assert run.status == "cancelled"
    assert await deps.store.session.segments(run.session_id) == []
    assert await deps.store.checkpointer.load(run.run_id) is None
    meta = await deps.store.get(run.session_id)
    assert meta is not None and meta.active_run_id is None
    records = await deps.store.run_history(session_id=run.session_id)
    assert [r.status for r in records] == ["cancelled"]
    seen = [item async for item in live.frames(keepalive=False)]
    last = frame_data(seen[-1])
    assert seen[-1]["event"] == "done" and last["stopped"] is True and last["run_id"] == run.run_id
    assert "refs" not in [f["event"] for f in seen]  # nothing was stored to name


async def test_drain_without_a_chat_waits_for_every_run(deps: RouterDeps, gate: Gate) -> None:
    sup = deps.supervisor
    first, second = await _slow_run(deps, gate), await _slow_run(deps, gate)
    assert {r.session_id for r in sup.live_runs} == {first.session_id, second.session_id}
    assert not await sup.drain(timeout=0.1)
    gate.release.set()
    assert await sup.drain(timeout=10)
    assert (first.status, second.status) == ("completed", "completed") and sup.live_runs == []
    assert await sup.drain(first.session_id, timeout=0)  # nothing to wait for: at once


async def test_start_refuses_a_second_run_unless_autostart_joins_it(deps: RouterDeps, gate: Gate) -> None:
    from lovia.exceptions import UserError

    sup = deps.supervisor
    run = await _slow_run(deps, gate)
    with pytest.raises(UserError, match="already live"):
        await sup.start(session_id=run.session_id, agent=run.agent, input="again", is_new=False, title_message=None)
    joined = await sup.start(
        session_id=run.session_id, agent=run.agent, input="and this", is_new=False, title_message=None, autostart=True
    )
    assert joined is run and run.uninject(run.inject("x")) is True


async def test_start_resume_continues_a_checkpoint(tmp_path: Path) -> None:
    started = asyncio.Event()
    calls = {"n": 0}

    @tool
    async def hold() -> str:
        """The first call waits until cancelled; the one a resume makes returns."""
        calls["n"] += 1
        if calls["n"] == 1:
            started.set()
            await asyncio.sleep(60)
        return "held"

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        if not any(isinstance(e, ToolResultEntry) for e in entries):
            return call("hold", {}, call_id="call_hold")
        return text("resumed and done")

    agent = Agent(name="bot", model=ScriptedProvider(script), tools=[hold])
    deps = RouterDeps(agents={"bot": agent}, store=ChatStore.sqlite(tmp_path / "r.db"))
    sup = deps.supervisor
    try:
        meta = await deps.store.create(title="r")
        run = await sup.start(session_id=meta.id, agent=agent, input="go", is_new=False, title_message=None)
        await started.wait()
        run.cancel_run(user=False)  # a shutdown: the checkpoint stays
        assert await sup.drain(meta.id, timeout=10) and run.status == "interrupted"
        snapshot = await deps.store.checkpointer.load(run.run_id)
        assert snapshot is not None
        resumed = await sup.start_resume(session_id=meta.id, agent=agent, snapshot=snapshot, client={"kb": "a"})
        assert resumed.run_id == run.run_id and resumed.resumed and resumed.client_context == {"kb": "a"}
        assert await sup.drain(meta.id, timeout=10)
        assert (resumed.status, resumed.output) == ("completed", "resumed and done")
    finally:
        await sup.shutdown(grace=5)
        await deps.store.close()


async def test_event_hub_numbers_frames_and_drops_a_reader_that_falls_behind() -> None:
    hub = EventHub(queue_maxsize=2)
    reader, stuck = hub.subscribe(), hub.subscribe()
    assert hub.seq == 0 and hub.subscribers == 2
    assert hub.publish(frame("ping", {"n": 1})) == 1
    assert await reader.queue.get() == frame("ping", {"n": 1})
    hub.publish(frame("ping", {"n": 2}))
    assert hub.publish(frame("ping", {"n": 3})) == 3 and hub.seq == 3
    assert hub.subscribers == 1  # the one that read nothing had two queued: dropped at the third
    assert [frame_data(f)["n"] for f in [await reader.queue.get(), await reader.queue.get()]] == [2, 3]
    assert [item async for item in stuck.frames(keepalive=False)] != []  # what it had, then the end
    hub.close()
    assert await reader.queue.get() is None
    late = hub.subscribe()
    assert [item async for item in late.frames(keepalive=False)] == []  # closed hub: ended at once


async def test_forward_leads_with_the_session_frame_and_ends_with_the_source() -> None:
    hub = EventHub()
    subscription = hub.subscribe()
    hub.publish(frame("note", {"x": 1}))
    hub.close()
    frames = [item async for item in forward(subscription, sid="chat_1", emit_session=True)]
    assert frames == [frame("session", {"session_id": "chat_1"}), frame("note", {"x": 1})]
    assert hub.subscribers == 0


async def test_records_logged_inside_a_run_carry_its_source(tmp_path: Path) -> None:
    @tool
    def note() -> str:
        """Log a line from inside the run."""
        logging.getLogger("lovia.web.tools").warning("a line from a tool")
        return "noted"

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        if not any(isinstance(e, ToolResultEntry) for e in entries):
            return call("note", {}, call_id="call_note")
        return text("ok")

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(run_source_log_filter())
    log = logging.getLogger("lovia.web.tools")
    log.addHandler(handler)
    agent = Agent(name="bot", model=ScriptedProvider(script), tools=[note])
    deps = RouterDeps(agents={"bot": agent}, store=ChatStore.sqlite(tmp_path / "l.db"))
    try:
        meta = await deps.store.create(title="l")
        run = await deps.supervisor.start(
            session_id=meta.id, agent=agent, input="go", is_new=False, title_message=None, source="schedule:sched_1"
        )
        assert await deps.supervisor.drain(meta.id, timeout=10) and run.status == "completed"
        log.warning("outside any run")
    finally:
        log.removeHandler(handler)
        await deps.supervisor.shutdown(grace=5)
        await deps.store.close()
    inside, outside = records
    assert inside.getMessage() == "a line from a tool"
    assert (inside.run_source, inside.run_session_id, inside.run_id) == ("schedule:sched_1", meta.id, run.run_id)  # type: ignore[attr-defined]
    assert inside.run_tag == "[schedule:sched_1] "  # type: ignore[attr-defined]
    assert (outside.run_source, outside.run_tag) == ("", "")  # type: ignore[attr-defined]


async def test_gated_calls_of_live_runs_wait_in_deps_approvals(deps: RouterDeps, gate: Gate) -> None:
    meta = await deps.store.create(title="gated")
    run = await deps.supervisor.start(
        session_id=meta.id, agent=deps.pick(None), input="remove notes.txt", is_new=False, title_message=None
    )
    while not deps.approvals.pending(meta.id):
        await asyncio.sleep(0.01)
    (call_id,) = deps.approvals.pending(meta.id)
    assert run.info()["status"] == "blocked_on_approval"
    assert not await deps.approvals.resolve("another_chat", call_id, True)  # keyed by chat
    assert await deps.approvals.resolve(meta.id, call_id, True)
    assert await deps.supervisor.drain(meta.id, timeout=10)
    assert run.status == "completed" and gate.runs == {"remove": 1}
    assert deps.approvals.pending(meta.id) == []
