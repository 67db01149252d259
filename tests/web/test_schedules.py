"""Schedules: triggers, the SQLite and PostgreSQL stores, exactly-once claims, restarts and SIGKILL."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib.util
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lovia.exceptions import SchemaTooNewError, UserError
from lovia.web.scheduler import ManualClock, Scheduler, next_state
from lovia.web.store import (
    PostgresScheduleStore,
    ScheduleRow,
    ScheduleStore,
    SQLiteScheduleStore,
    open_schedule_store,
)
from lovia.web.triggers import CronSpec, advance_next_fire, initial_next_fire, validate_trigger

_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)

CHILD = Path(__file__).with_name("schedule_child.py")
T0 = 1_800_000_000.0


# --------------------------------------------------------------------------- triggers


def test_every_keeps_its_phase_and_skips_missed_slots() -> None:
    assert initial_next_fire("every", "60", now=T0) == T0 + 60
    assert advance_next_fire("every", "60", now=T0 + 60, slot=T0 + 60) == T0 + 120
    # three slots missed: the next one is the first after now, on the same phase
    assert advance_next_fire("every", "60", now=T0 + 250, slot=T0 + 60) == T0 + 300


def test_at_fires_once() -> None:
    when = dt.datetime(2027, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert initial_next_fire("at", when.isoformat(), now=T0) == when.timestamp()
    assert initial_next_fire("at", "1800000123", now=T0) == 1800000123.0
    assert advance_next_fire("at", "1800000123", now=T0) is None


def test_cron_next_match_in_local_time() -> None:  # naive datetimes: cron is local wall-clock time
    start = dt.datetime(2027, 3, 1, 8, 59, 30).timestamp()  # noqa: DTZ001  (a Monday, local)
    nxt = dt.datetime.fromtimestamp(CronSpec.parse("0 9 * * 1-5").next_after(start))  # noqa: DTZ006
    assert (nxt.hour, nxt.minute, nxt.day) == (9, 0, 1)
    nxt = dt.datetime.fromtimestamp(CronSpec.parse("*/15 * * * *").next_after(start))  # noqa: DTZ006
    assert (nxt.hour, nxt.minute) == (9, 0)
    saturday = dt.datetime.fromtimestamp(CronSpec.parse("30 6 * * 6").next_after(start))  # noqa: DTZ006
    assert (saturday.isoweekday(), saturday.hour, saturday.minute) == (6, 6, 30)
    leap = dt.datetime.fromtimestamp(CronSpec.parse("0 0 29 2 *").next_after(start))  # noqa: DTZ006
    assert (leap.year, leap.month, leap.day) == (2028, 2, 29)


@pytest.mark.parametrize(
    ("kind", "expr"),
    [
        ("every", "0"),
        ("every", "-1"),
        ("every", "nan"),
        ("at", "inf"),
        ("every", "soon"),
        ("cron", "* * *"),
        ("cron", "61 * * * *"),
        ("cron", "0 0 31 2 *"),
        ("at", "tomorrow"),
        ("weekly", "1"),
    ],
)
def test_bad_triggers_are_refused_with_a_hint(kind: str, expr: str) -> None:
    with pytest.raises(UserError) as info:
        validate_trigger(kind, expr)
    assert info.value.hint


def test_next_state_limits() -> None:
    row = _row("s", input="x", next_fire=T0, max_fires=2)
    first = next_state(row, now=T0)
    assert (first.active, first.fire_count, first.next_fire) == (True, 1, T0 + 10)
    second = next_state(first, now=T0 + 10)
    assert (second.active, second.finished_reason) == (False, "max_fires")
    expiring = _row("s", input="x", next_fire=T0, expires_at=T0 + 5)
    assert next_state(expiring, now=T0).finished_reason == "expired"


# --------------------------------------------------------------------------- stores


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, _pg.requires_pg])])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ScheduleStore]:
    if request.param == "sqlite":
        made: ScheduleStore = SQLiteScheduleStore(tmp_path / "s.db")
        yield made
        await made.close()
        return
    schema = _pg.new_schema("sched")
    made = PostgresScheduleStore(_pg.DSN, schema=schema)
    yield made
    await made.close()
    _pg.drop_schema(schema)


def _row(sid: str = "s1", **kw: Any) -> ScheduleRow:
    base: dict[str, Any] = {
        "input": "ping",
        "trigger_kind": "every",
        "trigger_expr": "10",
        "next_fire": T0 + 10,
        "agent": None,
        "session_id": None,
        "active": True,
        "last_session_id": None,
        "created_at": T0,
        "updated_at": T0,
    }
    base.update(kw)
    return ScheduleRow(id=sid, **base)


async def test_crud_and_delete_for_session(store: ScheduleStore) -> None:
    await store.add(_row("a", session_id="chat1"))
    await store.add(_row("b", session_id="chat2"))
    got = await store.get("a")
    assert got is not None and got.session_id == "chat1" and got.active
    got.input = "pong"
    got.active = False
    await store.update(got)
    again = await store.get("a")
    assert again is not None and again.input == "pong" and not again.active
    assert [r.id for r in await store.list(session_id="chat2")] == ["b"]
    assert await store.delete_for_session("chat1") == 1
    assert await store.get("a") is None
    assert not await store.delete("a")
    assert await store.delete("b")


async def test_a_slot_is_claimed_once_among_racing_schedulers(store: ScheduleStore) -> None:
    await store.add(_row("a"))
    row = await store.get("a")
    assert row is not None
    moved = next_state(row, now=T0 + 10)
    results = await asyncio.gather(
        *(store.claim(moved, slot=row.next_fire, owner=f"w{i}", now=T0 + 10, advance=True) for i in range(8))
    )
    assert results.count(True) == 1
    after = await store.get("a")
    assert after is not None and after.next_fire == T0 + 20 and after.fire_count == 1
    # a stale view of the same slot cannot claim it again, even after the claim row is gone
    assert not await store.claim(moved, slot=row.next_fire, owner="late", now=T0 + 11, advance=True)


async def test_unfinished_claim_is_reclaimed_once(store: ScheduleStore) -> None:
    await store.add(_row("a"))
    row = await store.get("a")
    assert row is not None
    assert await store.claim(next_state(row, now=T0 + 10), slot=T0 + 10, owner="dead", now=T0 + 10, advance=True)
    assert await store.reclaim(owner="x", older_than=T0 + 5, now=T0 + 40) == []  # too recent
    taken = await store.reclaim(owner="x", older_than=T0 + 20, now=T0 + 40)
    assert [(c.schedule_id, c.slot, c.owner) for c in taken] == [("a", T0 + 10, "x")]
    assert await store.reclaim(owner="y", older_than=T0 + 20, now=T0 + 41) == []
    await store.finish_claim("a", T0 + 10, run_id="r1", session_id="c1", error=None)
    assert await store.reclaim(owner="y", older_than=T0 + 99, now=T0 + 99) == []
    (claim,) = await store.claims("a")
    assert claim.run_id == "r1" and claim.fired_at is not None


def test_sqlite_schema_is_versioned_and_a_newer_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    asyncio.run(SQLiteScheduleStore(path).close())
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM lovia_schema WHERE store = 'schedule'").fetchone() == (3,)
        conn.execute("UPDATE lovia_schema SET version = 99 WHERE store = 'schedule'")
    with pytest.raises(SchemaTooNewError) as info:
        SQLiteScheduleStore(path)
    assert info.value.hint


@pytest.mark.postgres
@_pg.requires_pg
def test_postgres_schema_shares_the_store_keyed_record_and_refuses_a_newer_one() -> None:
    import psycopg

    async def list_once() -> None:
        store = PostgresScheduleStore(_pg.DSN, schema=schema)
        try:
            await store.list()
        finally:
            await store.close()

    schema = _pg.new_schema("sched")
    try:
        with psycopg.connect(_pg.DSN, autocommit=True) as conn:  # a record of ours keyed by component
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(
                f'CREATE TABLE "{schema}".lovia_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL, '
                "migration TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            conn.execute(f"INSERT INTO \"{schema}\".lovia_schema VALUES ('session', 3, 'compact_entry_rows', 1.0)")
        asyncio.run(list_once())
        with psycopg.connect(_pg.DSN, autocommit=True) as conn:
            rows = conn.execute(f'SELECT store, version, migration FROM "{schema}".lovia_schema ORDER BY 1').fetchall()
            assert rows == [("schedule", 3, "add_schedule_until"), ("session", 3, "compact_entry_rows")]
            conn.execute(f"UPDATE \"{schema}\".lovia_schema SET version = 99 WHERE store = 'schedule'")
        with pytest.raises(SchemaTooNewError) as info:
            asyncio.run(list_once())
        assert "upgrade lovia" in info.value.hint
    finally:
        _pg.drop_schema(schema)


def test_a_version_1_schedule_store_gains_the_context_and_until_columns(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    asyncio.run(SQLiteScheduleStore(path).close())
    with sqlite3.connect(path) as conn:  # back to the first layout, with a schedule in it
        conn.execute("ALTER TABLE web_schedules DROP COLUMN client_context")
        conn.execute("ALTER TABLE web_schedules DROP COLUMN until")
        conn.execute("UPDATE lovia_schema SET version = 1 WHERE store = 'schedule'")
        conn.execute(
            "INSERT INTO web_schedules (id, input, trigger_kind, trigger_expr, next_fire, created_at, updated_at)"
            " VALUES ('old', 'ping', 'every', '60', 1, 1, 1)"
        )

    async def reopen() -> list[ScheduleRow]:
        store = SQLiteScheduleStore(path)
        try:
            await store.add(_row("new", input="x", trigger_expr="60", next_fire=1, context={"kb": "ops"}))
            return [r for r in await store.list() if r.id in ("old", "new")]
        finally:
            await store.close()

    rows = {r.id: r.context for r in asyncio.run(reopen())}
    assert rows == {"old": None, "new": {"kb": "ops"}}
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM lovia_schema WHERE store = 'schedule'").fetchone() == (3,)


def test_factory_picks_the_store_by_url(tmp_path: Path) -> None:
    assert isinstance(open_schedule_store("postgresql://u@h/db"), PostgresScheduleStore)
    made = open_schedule_store(tmp_path / "x.db")
    assert isinstance(made, SQLiteScheduleStore)
    asyncio.run(made.close())


# --------------------------------------------------------------------------- scheduler


class Recorder:
    def __init__(self) -> None:
        self.fires: list[str] = []

    async def __call__(self, row: ScheduleRow) -> tuple[str | None, str | None]:
        self.fires.append(row.id)
        return "chat", f"run{len(self.fires)}"


async def test_manual_clock_fires_each_slot_and_coalesces_missed_ones(tmp_path: Path) -> None:
    store = SQLiteScheduleStore(tmp_path / "s.db")
    clock, rec = ManualClock(T0), Recorder()
    sched = Scheduler.for_store(store, rec, clock=clock)
    await store.add(_row("a"))
    assert await sched.run_due() == 0
    clock.advance(10)
    assert (await sched.run_due(), await sched.run_due()) == (1, 0)
    clock.advance(55)  # slots at +20..+60 missed: one fire, next slot +70
    assert await sched.run_due() == 1
    row = await store.get("a")
    assert row is not None and row.next_fire == T0 + 70 and row.fire_count == 2 and row.last_run_id == "run2"
    assert [c.slot for c in await store.claims("a")] == [T0 + 20, T0 + 10]
    await store.close()


async def test_at_schedule_finishes_and_a_failed_fire_is_recorded(tmp_path: Path) -> None:
    store = SQLiteScheduleStore(tmp_path / "s.db")
    clock = ManualClock(T0)

    async def broken(row: ScheduleRow) -> tuple[str | None, str | None]:
        raise UserError("agent gone", hint="fix it")

    sched = Scheduler.for_store(store, broken, clock=clock)
    await store.add(_row("once", trigger_kind="at", trigger_expr=str(T0 + 1), next_fire=T0 + 1))
    clock.advance(2)
    assert await sched.run_due() == 0
    row = await store.get("once")
    assert (
        row is not None and not row.active and row.finished_reason == "done" and "agent gone" in (row.last_error or "")
    )
    (claim,) = await store.claims("once")
    assert claim.fired_at is not None and claim.error
    with pytest.raises(UserError):
        await sched.fire_now(row)
    await store.close()


async def test_restart_neither_loses_nor_repeats_a_slot(tmp_path: Path) -> None:
    path, clock = tmp_path / "s.db", ManualClock(T0)
    first = SQLiteScheduleStore(path)
    rec1 = Recorder()
    await first.add(_row("a"))
    clock.advance(10)
    assert await Scheduler.for_store(first, rec1, clock=clock).run_due() == 1
    await first.close()
    clock.advance(100)  # down for ten slots
    second = SQLiteScheduleStore(path)
    rec2 = Recorder()
    sched = Scheduler.for_store(second, rec2, clock=clock)
    assert (await sched.run_due(), await sched.run_due()) == (1, 0)
    slots = [c.slot for c in await second.claims("a")]
    assert sorted(slots) == [T0 + 10, T0 + 20] and len(set(slots)) == 2
    await second.close()


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_sigkill_between_claim_and_start_is_reclaimed(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    proc = _child("claim-then-die", db)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, out

    async def recover() -> None:
        store = SQLiteScheduleStore(db)
        (claim,) = await store.claims("a")
        assert claim.fired_at is None  # the killed process claimed the slot but started nothing
        rec = Recorder()
        clock = ManualClock(claim.claimed_at + 6)  # before the schedule's next slot (T0 + 10)
        sched = Scheduler.for_store(store, rec, clock=clock, owner="rescuer", reclaim_after=5)
        assert await sched.run_due() == 1 and rec.fires == ["a"]
        assert await sched.run_due() == 0
        (again,) = await store.claims("a")
        assert again.owner == "rescuer" and again.run_id == "run1"
        await store.close()

    asyncio.run(recover())


@pytest.mark.postgres
@_pg.requires_pg
def test_two_processes_on_postgres_fire_each_of_50_slots_once(tmp_path: Path) -> None:
    schema = _pg.new_schema("race")
    clock_file = tmp_path / "clock"
    clock_file.write_text(str(T0))
    store = PostgresScheduleStore(_pg.DSN, schema=schema)
    asyncio.run(_add_and_close(store, _row("a", trigger_expr="10")))
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [_child("race", _pg.DSN, schema, str(clock_file), str(log)) for log in logs]
    try:
        for n in range(1, 51):
            clock_file.write_text(str(T0 + 10 * n))
            _wait_fire_count(schema, n)
        clock_file.write_text("stop")
        for w in workers:
            out, _ = w.communicate(timeout=60)
            assert w.returncode == 0, out
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    fired = [line.split() for log in logs for line in log.read_text().splitlines()]
    slots = sorted(float(slot) for _, slot in fired)
    assert slots == [T0 + 10 * n for n in range(1, 51)]
    split = {log.stem: len(log.read_text().splitlines()) for log in logs}
    print(f"\n50 slots fired once each across two processes: {split}")
    _pg.drop_schema(schema)


async def _add_and_close(store: ScheduleStore, row: ScheduleRow) -> None:
    await store.add(row)
    await store.close()


def _wait_fire_count(schema: str, n: int) -> None:
    import psycopg

    deadline = time.monotonic() + 20
    with psycopg.connect(_pg.DSN, autocommit=True) as conn:
        while True:
            (count,) = conn.execute(f'SELECT fire_count FROM "{schema}".web_schedules').fetchone() or (0,)
            if count >= n:
                assert count == n
                return
            assert time.monotonic() < deadline, f"slot {n} never fired"
            time.sleep(0.005)
