"""Schedule and run rows, the trigger helpers of ``lovia.web.scheduler``, ``fire_input``, and
``Scheduler(deps)`` on a manual clock over SQLite and PostgreSQL (the store's own schedule and
run-record methods are in ``tests/web/store/test_chat_index_contract.py``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path

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
from lovia.web.store import ChatStore, PostgresChatStore, RunRow, ScheduleRow

from .helpers import scripted_agent
from .store.backends import run_row as _run
from .store.backends import schedule_row as _sched

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
