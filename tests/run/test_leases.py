"""Run leases through the loop, on real SQLite and PostgreSQL stores, with short TTLs.

Worker A runs in its own thread with its own event loop (like another process on another host);
its tool is genuinely slow. When the tool *awaits*, A keeps renewing and B gets ``RunBusy``; when
the tool *blocks* A's loop (a stuck worker), A's lease expires, B takes the run over and finishes,
and A's late save is refused with ``LeaseLostError``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from lovia import Agent, CheckpointOptions, RunContext, Runner, tool
from lovia.exceptions import LeaseLostError, RunBusy
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

TTL = 0.6


@dataclass
class Deps:
    """How the slow tool behaves in this worker."""

    hold: float = 0.0
    blocking: bool = False
    started: threading.Event = field(default_factory=threading.Event)
    runs: list[str] = field(default_factory=list)


@tool
async def slow_job(ctx: RunContext[Deps], name: str) -> str:
    """Do a slow job."""
    deps = ctx.deps
    deps.runs.append(name)
    deps.started.set()
    if deps.blocking:
        time.sleep(deps.hold)  # a stuck worker: its event loop (and lease renewal) stalls
    else:
        await asyncio.sleep(deps.hold)
    return f"{name} done"


def agent() -> Agent[Deps]:
    def turn(entries: list[Any], tools: Any) -> Any:
        if not any(isinstance(e, ToolResultEntry) for e in entries):
            return call("slow_job", {"name": "report"}, call_id="c-1")
        return text("finished")

    return Agent(name="worker", instructions="Work.", model=ScriptedProvider(turn), tools=[slow_job])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_stores(request, tmp_path):
    """A function that opens a fresh (session, checkpointer) pair on the shared backend."""
    if request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        yield lambda: (SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True))
        return
    if UNREACHABLE:
        pytest.skip(UNREACHABLE)
    from lovia.stores import PostgresCheckpointer, PostgresSession

    schema = new_schema("lease")
    yield lambda: (
        PostgresSession(DSN, schema=schema, max_size=3),
        PostgresCheckpointer(DSN, schema=schema, max_size=3),
    )
    drop_schema(schema)


class Worker(threading.Thread):
    """Runs the agent once in its own thread and event loop; keeps the result or the error."""

    def __init__(self, open_stores: Any, run_id: str, deps: Deps) -> None:
        super().__init__(daemon=True)
        self.open_stores, self.run_id, self.deps = open_stores, run_id, deps
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        session, cp = self.open_stores()
        try:
            self.result = await run_once(session, cp, self.run_id, self.deps)
        except BaseException as exc:
            self.error = exc
        finally:
            await session.close()
            await cp.close()


async def run_once(session: Any, cp: Any, run_id: str, deps: Deps) -> Any:
    return await Runner.run(
        agent(),
        "Write the report.",
        deps=deps,
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(cp, run_id, lease_ttl=TTL),
    )


async def wait_for(event: threading.Event, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not event.is_set():
        assert time.monotonic() < deadline, "worker A never reached its tool"
        await asyncio.sleep(0.01)


async def test_second_caller_gets_run_busy_while_the_lease_is_live(open_stores):
    a = Worker(open_stores, "job-1", Deps(hold=3 * TTL))  # awaits: keeps renewing past several TTLs
    a.start()
    await wait_for(a.deps.started)
    await asyncio.sleep(TTL * 1.5)  # past the first TTL: only renewal keeps the lease alive
    session, cp = open_stores()
    b_deps = Deps()
    try:
        with pytest.raises(RunBusy) as busy:
            await run_once(session, cp, "job-1", b_deps)
        assert busy.value.hint and "lease" in busy.value.hint
        assert busy.value.run_id == "job-1" and 0 < busy.value.expires_in <= TTL
        assert b_deps.runs == []
        await asyncio.to_thread(a.join, 20)
        assert a.error is None and a.result.output == "finished"
        assert a.deps.runs == ["report"]
        [segment] = await session.segments("s")
        assert [type(e).__name__ for e in segment.entries] == [
            "InputEntry",
            "ToolCallEntry",
            "ToolResultEntry",
            "AssistantTextEntry",
        ]
        snap = await cp.load("job-1")
        assert snap.status == "completed" and snap.entries == segment.entries
    finally:
        await session.close()
        await cp.close()


async def test_stale_worker_is_taken_over_and_its_late_save_is_refused(open_stores):
    a = Worker(open_stores, "job-2", Deps(hold=4 * TTL, blocking=True))
    a.start()
    await wait_for(a.deps.started)
    session, cp = open_stores()
    b_deps = Deps(hold=0.05)
    try:
        deadline = time.monotonic() + 10
        while True:  # retry on RunBusy, as a job queue would, until A's lease expires
            try:
                result = await run_once(session, cp, "job-2", b_deps)
                break
            except RunBusy as exc:
                assert time.monotonic() < deadline
                await asyncio.sleep(min(exc.expires_in or 0.05, 0.2))
        assert result.output == "finished" and b_deps.runs == ["report"]
        await asyncio.to_thread(a.join, 20)
        assert isinstance(a.error, LeaseLostError), a.error
        assert a.error.hint and "no longer current" in str(a.error)
        snap = await cp.load("job-2")
        assert snap.status == "completed" and snap.output == "finished"
        results = [e for e in snap.entries if isinstance(e, ToolResultEntry)]
        assert [e.call_id for e in results] == ["c-1"]
        segments = await session.segments("s")
        assert [s.run_id for s in segments] == ["job-2"]
        assert segments[0].entries == snap.entries
    finally:
        await session.close()
        await cp.close()


async def test_simultaneous_fresh_callers_one_runs_the_other_writes_nothing(open_stores):
    """Both callers find no snapshot; the loser's RunBusy must not leave its entries in the run."""
    session, cp = open_stores()
    a_deps, b_deps = Deps(hold=0.3), Deps(hold=0.3)
    try:
        outcomes = await asyncio.gather(
            run_once(session, cp, "job-3", a_deps), run_once(session, cp, "job-3", b_deps), return_exceptions=True
        )
        winners = [o for o in outcomes if not isinstance(o, BaseException)]
        losers = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(winners) == 1 and len(losers) == 1 and isinstance(losers[0], RunBusy), outcomes
        snap = await cp.load("job-3")
        inputs = [e for e in snap.entries if isinstance(e, InputEntry)]
        calls = [e for e in snap.entries if isinstance(e, ToolCallEntry)]
        assert (len(inputs), len(calls), snap.status) == (1, 1, "completed"), snap.entries
    finally:
        await session.close()
        await cp.close()


async def test_busy_restart_deletes_nothing(open_stores):
    """``if_run_exists='restart'`` while another worker holds the run: RunBusy before any delete."""
    a = Worker(open_stores, "job-4", Deps(hold=2 * TTL))
    a.start()
    await wait_for(a.deps.started)
    session, cp = open_stores()
    try:
        before = await cp.load("job-4")
        assert before is not None and before.entries
        with pytest.raises(RunBusy):
            await Runner.run(
                agent(),
                "Start over.",
                deps=Deps(),
                checkpoint=CheckpointOptions(cp, "job-4", if_run_exists="restart", lease_ttl=TTL),
            )
        after = await cp.load("job-4")
        assert after is not None and after.entries[: len(before.entries)] == before.entries
        await asyncio.to_thread(a.join, 20)
        assert a.error is None and a.result.output == "finished"
    finally:
        await session.close()
        await cp.close()
