"""Schedules as 0.9.119 takes them: croniter's cron lines, any positive interval, bounded fields.

Also: no agent on a multi-agent server is a 400, and no store keeps a time that is not finite.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.exceptions import StoreError, UserError
from lovia.web import create_app
from lovia.web.store import ScheduleRow, SQLiteScheduleStore
from lovia.web.triggers import advance_next_fire
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema
from tests.web.helpers import ThreadServer, scripted_agent, wait_for


@pytest.fixture
def single(tmp_path: Path) -> Iterator[str]:
    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "web.db"), scheduler_poll=3600)) as srv:
        yield srv.url


def _local(stamp: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(stamp)  # noqa: DTZ006  (cron is local wall-clock time)


@pytest.mark.parametrize(
    ("expr", "check"),
    [
        ("0 9 * * MON-FRI", lambda t: t.weekday() < 5 and (t.hour, t.minute) == (9, 0)),
        ("@daily", lambda t: (t.hour, t.minute) == (0, 0)),
        ("0 0 1 JAN *", lambda t: (t.month, t.day, t.hour) == (1, 1, 0)),
        ("0 0 L * *", lambda t: (t + dt.timedelta(days=1)).day == 1 and t.hour == 0),
        ("30 6 * * sat", lambda t: t.weekday() == 5 and (t.hour, t.minute) == (6, 30)),
    ],
)
def test_cron_lines_croniter_reads_are_accepted(single: str, expr: str, check: Any) -> None:
    made = httpx.post(f"{single}/api/schedules", json={"input": "x", "trigger_kind": "cron", "trigger_expr": expr})
    assert made.status_code == 200, made.text
    nxt = made.json()["next_fire"]
    assert nxt > time.time() and check(_local(nxt)), _local(nxt)


def test_any_positive_interval_is_accepted_and_zero_is_not(single: str) -> None:
    before = time.time()
    made = httpx.post(f"{single}/api/schedules", json={"input": "x", "trigger_kind": "every", "trigger_expr": "0.5"})
    assert made.status_code == 200, made.text
    assert before + 0.5 <= made.json()["next_fire"] <= time.time() + 0.5
    for expr in ("0", "-3", "nan", "inf"):
        refused = httpx.post(
            f"{single}/api/schedules", json={"input": "x", "trigger_kind": "every", "trigger_expr": expr}
        )
        assert refused.status_code == 422 and refused.json()["detail"]["hint"], (expr, refused.text)


def test_a_multi_agent_server_needs_the_agent_named(tmp_path: Path) -> None:
    agents = {"alpha": scripted_agent(name="alpha"), "beta": scripted_agent(name="beta")}
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "web.db"), scheduler_poll=3600)) as srv:
        body = {"input": "x", "trigger_kind": "every", "trigger_expr": "60"}
        refused = httpx.post(f"{srv.url}/api/schedules", json=body)
        assert refused.status_code == 400, refused.text
        assert "alpha" in refused.json()["detail"]["hint"]
        named = httpx.post(f"{srv.url}/api/schedules", json={**body, "agent": "beta"})
        assert named.status_code == 200 and named.json()["agent"] == "beta"
        # A schedule bound to a chat runs that chat's agent.
        chat = httpx.post(f"{srv.url}/api/chat", json={"message": "hi", "agent": "beta"}, timeout=60).json()
        bound = httpx.post(f"{srv.url}/api/schedules", json={**body, "session_id": chat["session_id"]})
        assert bound.status_code == 200 and bound.json()["agent"] == "beta", bound.text


def _row(**changes: Any) -> ScheduleRow:
    now = time.time()
    base = {
        "id": "s1",
        "agent": None,
        "input": "x",
        "session_id": None,
        "trigger_kind": "every",
        "trigger_expr": "60",
        "next_fire": now + 60,
        "active": True,
        "last_session_id": None,
        "created_at": now,
        "updated_at": now,
    }
    return ScheduleRow(**{**base, **changes})


BAD_ROWS = [
    {"next_fire": math.inf},
    {"next_fire": math.nan},
    {"expires_at": math.nan},
    {"expires_at": -math.inf},
    {"max_fires": 10**30},
]


async def _refuses_bad_rows(store: Any) -> None:
    for changes in BAD_ROWS:
        with pytest.raises(UserError) as info:
            await store.add(_row(**changes))
        assert info.value.hint
    assert list(await store.list()) == []
    await store.add(_row())
    with pytest.raises(UserError):
        await store.update(_row(expires_at=math.nan))
    (kept,) = await store.list()
    assert kept.expires_at is None


def test_the_sqlite_schedule_store_keeps_no_time_that_is_not_finite(tmp_path: Path) -> None:
    asyncio.run(_refuses_bad_rows(SQLiteScheduleStore(tmp_path / "s.db")))


@pytest.mark.postgres
def test_the_postgres_schedule_store_keeps_no_time_that_is_not_finite() -> None:
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    from lovia.web.store import PostgresScheduleStore

    schema = new_schema("sched")

    async def main() -> None:
        store = PostgresScheduleStore(DSN, schema=schema)
        try:
            await _refuses_bad_rows(store)
        finally:
            await store.close()

    try:
        asyncio.run(main())
    finally:
        drop_schema(schema)


def test_a_read_only_schedule_database_says_so_over_http_and_keeps_nothing(tmp_path: Path) -> None:
    app = create_app(scripted_agent(), db_path=str(tmp_path / "web.db"), scheduler_poll=3600)
    with ThreadServer(app) as srv:
        store = app.state.deps.schedules
        store._conn.execute("PRAGMA query_only = ON")  # SQLite's own read-only switch, as for a read-only file
        body = {"input": "x", "trigger_kind": "every", "trigger_expr": "60"}
        refused = httpx.post(f"{srv.url}/api/schedules", json=body)
        assert refused.status_code == 500, refused.text
        assert "read-only" in refused.json()["detail"]["hint"]
        store._conn.execute("PRAGMA query_only = OFF")
        assert httpx.get(f"{srv.url}/api/schedules").json() == []

    async def direct() -> None:
        store = SQLiteScheduleStore(tmp_path / "s.db")
        store._conn.execute("PRAGMA query_only = ON")
        with pytest.raises(StoreError) as info:
            await store.add(_row())
        assert "read-only" in (info.value.hint or "")

    asyncio.run(direct())


def test_a_stored_schedule_that_cannot_fire_is_paused_and_the_others_still_fire(tmp_path: Path) -> None:
    db = tmp_path / "web.db"
    app = create_app(scripted_agent(), db_path=str(db), scheduler_poll=0.05)
    with ThreadServer(app) as srv:
        past = time.time() - 5
        with sqlite3.connect(db) as conn:  # rows an older version (or another writer) stored
            conn.execute(
                "INSERT INTO web_schedules (id, input, trigger_kind, trigger_expr, next_fire, created_at, updated_at)"
                " VALUES ('broken', 'x', 'cron', 'not a cron line', ?, 1, 1)",
                (past - 1,),
            )
        healthy = httpx.post(
            f"{srv.url}/api/schedules", json={"input": "ping", "trigger_kind": "every", "trigger_expr": "3600"}
        ).json()
        httpx.post(f"{srv.url}/api/schedules/{healthy['id']}/run").raise_for_status()  # a chat to fire into
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE web_schedules SET next_fire = ? WHERE id = ?", (past, healthy["id"]))
        wait_for(lambda: httpx.get(f"{srv.url}/api/schedules/{healthy['id']}").json()["fire_count"] >= 2, timeout=20)
        broken = httpx.get(f"{srv.url}/api/schedules/broken").json()
        assert broken["active"] is False and broken["finished_reason"] == "invalid"
        assert "cron" in broken["last_error"]


def test_an_interval_below_the_clocks_resolution_still_moves_on(tmp_path: Path) -> None:
    now = time.time()
    for expr in ("1e-320", "5e-324", "1e-9"):
        nxt = advance_next_fire("every", expr, now=now, slot=now - 5)
        assert nxt is not None and now < nxt < now + 1
    app = create_app(scripted_agent(), db_path=str(tmp_path / "web.db"), scheduler_poll=0.05)
    with ThreadServer(app) as srv:
        body = {"input": "tick", "trigger_kind": "every", "trigger_expr": "1e-320", "max_fires": 2}
        made = httpx.post(f"{srv.url}/api/schedules", json=body)
        assert made.status_code == 200, made.text
        url = f"{srv.url}/api/schedules/{made.json()['id']}"
        wait_for(lambda: httpx.get(url).json()["finished_reason"] == "max_fires", timeout=30)
        assert httpx.get(url).json()["fire_count"] == 2
