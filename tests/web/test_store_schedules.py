"""The chat store's schedule and run-record methods (SQLite and PostgreSQL), the trigger helpers of
``lovia.web.scheduler``, ``fire_input``, stale-run sweeping, and ``Scheduler(deps)`` on a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import importlib.util
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lovia.exceptions import UserError
from lovia.web import RouterDeps
from lovia.web.scheduler import (
    TRIGGER_KINDS,
    ManualClock,
    Scheduler,
    advance_next_fire,
    fire_input,
    initial_next_fire,
    validate_trigger,
)
from lovia.web.store import ChatStore, RunRow, ScheduleRow
from lovia.web.store_pg import PostgresChatStore

from .helpers import scripted_agent

_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)

T0 = 1_800_000_000.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, _pg.requires_pg])])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ChatStore]:
    if request.param == "sqlite":
        made = ChatStore.sqlite(tmp_path / "web.db")
        yield made
        await made.close()
        return
    schema = _pg.new_schema("storesched")
    pg = PostgresChatStore(_pg.DSN, schema=schema)
    yield pg
    await pg.close()
    _pg.drop_schema(schema)


def _sched(sid: str = "s1", **kw: Any) -> ScheduleRow:
    base: dict[str, Any] = {
        "agent": None,
        "input": "ping",
        "session_id": None,
        "trigger_kind": "every",
        "trigger_expr": "60",
        "next_fire": T0 + 60,
        "active": True,
        "last_session_id": None,
        "created_at": T0,
        "updated_at": T0,
    }
    base.update(kw)
    return ScheduleRow(id=sid, **base)


def _run(rid: str, **kw: Any) -> RunRow:
    base: dict[str, Any] = {
        "session_id": "chat1",
        "agent": "bot",
        "source": "user",
        "status": "running",
        "error": None,
        "started_at": T0,
        "finished_at": None,
        "usage": None,
    }
    base.update(kw)
    return RunRow(id=rid, **base)


async def _set_owner(store: ChatStore, run_id: str, owner: str) -> None:
    if isinstance(store, PostgresChatStore):
        await store.execute("UPDATE {web_runs} SET owner = %s WHERE run_id = %s", (owner, run_id))
        return
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE chat_runs SET owner = ? WHERE run_id = ?", (owner, run_id))


# --------------------------------------------------------------------------- rows


def test_schedule_row_fields_round_trip_through_dicts_and_columns() -> None:
    row = _sched(until="the log says ready", max_fires=3, context={"kb": "ops"}, last_error="boom")
    again = ScheduleRow.from_row(row.to_dict())
    assert again == row
    assert ScheduleRow.from_row(row.values()) == row
    assert row.to_dict()["context"] == {"kb": "ops"} and row.to_dict()["until"] == "the log says ready"
    # the reference's defaults
    bare = _sched()
    assert (bare.until, bare.max_fires, bare.expires_at, bare.fire_count, bare.finished_reason, bare.context) == (
        None,
        None,
        None,
        0,
        None,
        None,
    )


def test_run_row_from_columns_and_to_dict() -> None:
    row = RunRow.from_row(("r1", "c1", "bot", "schedule:s1", "completed", None, T0, T0 + 2.5, '{"requests": 2}'))
    assert row == _run(
        "r1", session_id="c1", source="schedule:s1", status="completed", finished_at=T0 + 2.5, usage={"requests": 2}
    )
    out = row.to_dict()
    assert out["id"] == "r1" and out["usage"] == {"requests": 2} and out["duration"] == 2.5
    assert RunRow.from_row({"run_id": "r2", "status": "running", "started_at": T0}).to_dict()["duration"] is None


# --------------------------------------------------------------------------- triggers


def test_trigger_helpers_for_each_kind() -> None:
    assert TRIGGER_KINDS == ("cron", "every", "at")
    for kind, expr in (("cron", "*/5 * * * *"), ("every", "30"), ("at", "2027-01-02T03:04:05+00:00")):
        validate_trigger(kind, expr)
    assert initial_next_fire("every", "30", now=T0) == T0 + 30
    assert advance_next_fire("every", "30", now=T0 + 95) == T0 + 125
    when = dt.datetime(2027, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc).timestamp()
    assert initial_next_fire("at", "2027-01-02T03:04:05+00:00", now=T0) == when
    assert advance_next_fire("at", "2027-01-02T03:04:05+00:00", now=when) is None
    first = initial_next_fire("cron", "*/5 * * * *", now=T0)
    assert first > T0 and dt.datetime.fromtimestamp(first).minute % 5 == 0  # noqa: DTZ006 (cron is local time)
    nxt = advance_next_fire("cron", "*/5 * * * *", now=first)
    assert nxt == first + 300


@pytest.mark.parametrize(
    ("kind", "expr", "words"),
    [
        ("cron", "* * *", "5"),
        ("cron", "0 25 * * *", "range"),
        ("every", "0", "seconds"),
        ("every", "hourly", "3600"),
        ("at", "next tuesday", "ISO"),
        ("weekly", "1", "cron"),
    ],
)
def test_invalid_triggers_fail_with_a_hint(kind: str, expr: str, words: str) -> None:
    with pytest.raises(UserError) as info:
        validate_trigger(kind, expr)
    assert info.value.hint and words in f"{info.value.message} {info.value.hint}"
    with pytest.raises(UserError):
        initial_next_fire(kind, expr, now=T0)


def test_fire_input_adds_the_stop_condition() -> None:
    assert fire_input(_sched(input="check the log")) == "check the log"
    text = fire_input(_sched("sched_x", input="check the log", until="it says ready"))
    assert text.startswith("check the log\n\n") and "it says ready" in text
    assert "cancel_schedule" in text and "'sched_x'" in text


# --------------------------------------------------------------------------- schedules


async def test_schedule_methods(store: ChatStore) -> None:
    await store.add_schedule(_sched("a", session_id="chat1", until="done", context={"k": 1}))
    await store.add_schedule(_sched("b", next_fire=T0 + 5))
    got = await store.get_schedule("a")
    assert got == _sched("a", session_id="chat1", until="done", context={"k": 1})
    assert await store.get_schedule("nope") is None
    assert [r.id for r in await store.list_schedules()] == ["a", "b"]
    assert [r.id for r in await store.list_schedules(session_id="chat1")] == ["a"]

    await store.update_schedule(dataclasses.replace(got, input="pong", max_fires=4))
    again = await store.get_schedule("a")
    assert again is not None and (again.input, again.max_fires) == ("pong", 4)

    assert [r.id for r in await store.due_schedules(T0 + 10)] == ["b"]
    assert [r.id for r in await store.due_schedules(T0 + 60)] == ["b", "a"]

    await store.mark_fired("b", next_fire=T0 + 65, active=True, last_session_id="chat9")
    fired = await store.get_schedule("b")
    assert fired is not None and (fired.next_fire, fired.fire_count, fired.last_session_id) == (T0 + 65, 1, "chat9")
    await store.mark_fired("b", next_fire=T0 + 65, active=False, last_session_id=None, finished_reason="max_fires")
    done = await store.get_schedule("b")
    assert done is not None and (done.active, done.finished_reason, done.fire_count) == (False, "max_fires", 2)
    assert done.last_session_id == "chat9"  # None keeps the last chat
    assert [r.id for r in await store.due_schedules(T0 + 100)] == ["a"]

    await store.set_schedule_active("a", active=False, finished_reason="paused")
    paused = await store.get_schedule("a")
    assert paused is not None and (paused.active, paused.finished_reason) == (False, "paused")
    await store.set_schedule_active("a", active=True, next_fire=T0 + 500)
    resumed = await store.get_schedule("a")
    assert resumed is not None
    assert (resumed.active, resumed.finished_reason, resumed.next_fire) == (True, None, T0 + 500)

    assert await store.delete_schedule("a")
    assert not await store.delete_schedule("a")
    assert [r.id for r in await store.list_schedules()] == ["b"]


# --------------------------------------------------------------------------- runs


async def test_run_methods(store: ChatStore) -> None:
    R0 = time.time() - 3600  # noqa: N806  (runs finish in real time: start them in the past)
    await store.start_run(_run("r1", session_id="c1", started_at=R0))
    await store.start_run(_run("r2", session_id="c1", source="schedule:s1", started_at=R0 + 10))
    await store.start_run(_run("r3", session_id="c2", source="schedule:s1", started_at=R0 + 20))
    await store.finish_run("r1", status="completed", usage={"requests": 1})
    await store.finish_run("r3", status="failed", error="ProviderError: down")

    rows = await store.list_runs()
    assert [r.id for r in rows] == ["r3", "r2", "r1"]
    r1 = next(r for r in rows if r.id == "r1")
    assert (r1.status, r1.usage, r1.agent, r1.source) == ("completed", {"requests": 1}, "bot", "user")
    assert r1.finished_at is not None and r1.finished_at >= r1.started_at
    r3 = next(r for r in rows if r.id == "r3")
    assert (r3.status, r3.error) == ("failed", "ProviderError: down")

    assert [r.id for r in await store.list_runs(session_id="c1")] == ["r2", "r1"]
    assert [r.id for r in await store.list_runs(source="schedule:s1")] == ["r3", "r2"]
    assert [r.id for r in await store.list_runs(limit=1, offset=1)] == ["r2"]
    finished = r1.finished_at
    assert {r.id for r in await store.list_runs(since=finished)} >= {"r1"}
    assert "r2" not in {r.id for r in await store.list_runs(since=R0)}  # still running: not finished since

    assert await store.latest_run_statuses(["c1", "c2", "nochat"]) == {"c1": "running", "c2": "failed"}
    latest = await store.latest_run_for("schedule:s1")
    assert latest is not None and latest.id == "r3"
    assert await store.latest_run_for("schedule:none") is None

    # a resumed run starts again under its id: running, no error, its start kept
    await store.start_run(_run("r3", session_id="c2", source="schedule:s1", started_at=R0 + 99))
    again = await store.latest_run_for("schedule:s1")
    assert again is not None and (again.status, again.error, again.started_at) == ("running", None, R0 + 20)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_sweep_marks_a_dead_servers_running_runs_interrupted(store: ChatStore) -> None:
    host = socket.gethostname()
    for rid in ("dead", "alive", "mine", "elsewhere", "done"):
        await store.start_run(_run(rid, session_id=rid))
    await _set_owner(store, "dead", f"{host}:{_dead_pid()}")
    await _set_owner(store, "alive", f"{host}:{os.getppid()}")
    await _set_owner(store, "elsewhere", "some-other-host.invalid:1")
    await _set_owner(store, "done", f"{host}:{_dead_pid()}")
    await store.finish_run("done", status="completed")

    await store.sweep_stale_runs()
    statuses = {r.id: r.status for r in await store.list_runs()}
    assert statuses == {
        "dead": "interrupted",
        "alive": "running",
        "mine": "running",
        "elsewhere": "running",
        "done": "completed",
    }


# --------------------------------------------------------------------------- Scheduler(deps)


async def test_scheduler_over_deps_fires_a_due_schedule_once(store: ChatStore) -> None:
    clock = ManualClock(T0)
    agent = scripted_agent(name="bot")
    deps = RouterDeps(agents={"bot": agent}, store=store, clock=clock, scheduler_poll=3600)
    async with deps.lifespan():
        scheduler = Scheduler(deps, poll_interval=3600)
        assert scheduler.clock is clock  # the server's clock unless told otherwise
        await store.add_schedule(_sched("tick", input="hello there", next_fire=T0 + 60, max_fires=5))
        assert await scheduler.run_due() == 0
        clock.advance(60)
        assert await scheduler.run_due() == 1
        assert await scheduler.run_due() == 0  # the slot is taken: no second fire

        async def finished() -> RunRow:
            while True:
                run = await store.latest_run_for("schedule:tick")
                if run is not None and run.status != "running":
                    return run
                await asyncio.sleep(0.02)

        run = await asyncio.wait_for(finished(), 30)
        assert (run.status, run.agent, run.source) == ("completed", "bot", "schedule:tick")
        row = await store.get_schedule("tick")
        assert row is not None and row.fire_count == 1 and row.next_fire == T0 + 120
        assert row.last_run_id == run.id and row.last_session_id == run.session_id
        assert [r.id for r in await store.list_runs(source="schedule:tick")] == [run.id]

        session_id = await scheduler.fire_now(row)  # a manual fire leaves the timing alone
        assert session_id is not None and session_id != run.session_id  # no chat bound: a new chat each fire
        after = await store.get_schedule("tick")
        assert after is not None and after.fire_count == 2 and after.next_fire == T0 + 120
