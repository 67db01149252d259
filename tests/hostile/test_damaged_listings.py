"""One damaged row is reported as damaged; every other run and session is still listed."""

from __future__ import annotations

import asyncio
import contextlib
import io
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, CheckpointOptions, Runner, SQLiteCheckpointer, SQLiteSession
from lovia.cli import main
from lovia.exceptions import CorruptRecordError
from lovia.testing import ScriptedProvider, text
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema


async def _three_runs(cp: Any, session: Any | None = None) -> None:
    for rid in ("r1", "r2", "r3"):
        agent = Agent(name="a", model=ScriptedProvider([text(f"answer {rid}")]))
        sid = f"s-{rid}" if session is not None else None
        await Runner.run(agent, "q", checkpoint=CheckpointOptions(cp, rid), session=session, session_id=sid)


async def _cli(*args: str) -> tuple[int, str, str]:
    """``lovia ARGS`` in process (on a thread: the CLI runs its own event loop)."""

    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
        return code, out.getvalue(), err.getvalue()

    return await asyncio.to_thread(run)


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE snapshot_heads SET head_json = '{not json' WHERE run_id = 'r2'",
        "UPDATE snapshot_heads SET head_json = '[1, 2]' WHERE run_id = 'r2'",
        "UPDATE snapshot_heads SET head_json = '' WHERE run_id = 'r2'",
        "UPDATE snapshot_heads SET entry_count = 'many' WHERE run_id = 'r2'",
    ],
)
async def test_sqlite_list_runs_reports_the_damaged_head_and_lists_the_rest(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "runs.db"
    async with SQLiteCheckpointer(db) as cp:
        await _three_runs(cp)
    with sqlite3.connect(db) as conn:
        conn.execute(damage)
    async with SQLiteCheckpointer(db) as cp:
        infos = await cp.list_runs()
        assert sorted(i.run_id for i in infos) == ["r1", "r2", "r3"]
        damaged = [i for i in infos if i.damaged]
        assert [i.run_id for i in damaged] == ["r2"]
        assert "r2" in damaged[0].damaged and "hint:" in damaged[0].damaged
        assert damaged[0].status == "failed"
        assert all(i.status == "completed" and i.agent_name == "a" for i in infos if not i.damaged)
        for rid in ("r1", "r3"):
            assert (await cp.load(rid)) is not None
        if "head_json" in damage:
            with pytest.raises(CorruptRecordError):
                await cp.load("r2")
        assert [i.run_id for i in await cp.list_runs(status="completed")] in (["r3", "r1"], ["r3", "r2", "r1"])
    code, out, err = await _cli("runs", "ls", "--db", str(db))
    assert code == 0
    assert "r1" in out and "r3" in out and "DAMAGED" in out
    assert "damaged: r2:" in err and "hint:" in err


@pytest.mark.postgres
async def test_postgres_list_runs_reports_the_damaged_head_and_lists_the_rest() -> None:
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    import psycopg

    from lovia.stores import PostgresCheckpointer

    schema = new_schema("damaged")
    try:
        async with PostgresCheckpointer(DSN, schema=schema) as cp:
            await _three_runs(cp)
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(f"UPDATE \"{schema}\".snapshot_heads SET head_json = '{{broken' WHERE run_id = 'r2'")
            infos = await cp.list_runs()
            assert sorted(i.run_id for i in infos) == ["r1", "r2", "r3"]
            (bad,) = [i for i in infos if i.damaged]
            assert bad.run_id == "r2" and bad.status == "completed" and "hint:" in (bad.damaged or "")
            assert [i.run_id for i in await cp.list_runs(status="completed") if not i.damaged] == ["r3", "r1"]
    finally:
        drop_schema(schema)


async def test_sqlite_list_sessions_flags_a_session_with_an_undecodable_run(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with SQLiteSession(db, wal=True) as session, SQLiteCheckpointer(db, wal=True) as cp:
        await _three_runs(cp, session)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE session_runs SET entries_json = 'garbage' WHERE session_id = 's-r2'")
    async with SQLiteSession(db) as session:
        infos = {i.session_id: i for i in await session.list_sessions()}
        assert sorted(infos) == ["s-r1", "s-r2", "s-r3"]
        assert infos["s-r1"].damaged is None and infos["s-r3"].damaged is None
        assert "s-r2" in (infos["s-r2"].damaged or "") and "hint:" in (infos["s-r2"].damaged or "")
        with pytest.raises(CorruptRecordError):
            await session.load("s-r2")
        assert len(await session.load("s-r1")) == 2
    code, out, err = await _cli("sessions", "ls", "--db", str(db))
    assert code == 0 and "s-r1" in out and "s-r3" in out
    assert "damaged: s-r2:" in err


def test_web_sidebar_lists_a_damaged_chat_as_damaged(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from lovia.web import create_app
    from tests.web.helpers import ThreadServer

    db = tmp_path / "web.db"
    agent = Agent(name="a", model=ScriptedProvider([text("x")]))
    with ThreadServer(create_app(agent, db_path=str(db))) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        ids = [http.post("/api/sessions", json={"title": f"chat {i}"}).json()["id"] for i in range(3)]
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE chat_sessions SET created_at = 'yesterday' WHERE id = ?", (ids[1],))
        r = http.get("/api/sessions")
        assert r.status_code == 200
        listed = {s["id"]: s for s in r.json()}
        assert sorted(listed) == sorted(ids)
        assert "damaged" not in listed[ids[0]] and "damaged" not in listed[ids[2]]
        assert ids[1] in listed[ids[1]]["damaged"] and "hint:" in listed[ids[1]]["damaged"]


async def test_sqlite_list_sessions_survives_a_damaged_timestamp(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with SQLiteSession(db, wal=True) as session, SQLiteCheckpointer(db, wal=True) as cp:
        await _three_runs(cp, session)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE session_runs SET created_at = 'last tuesday' WHERE session_id = 's-r3'")
    async with SQLiteSession(db) as session:
        infos = {i.session_id: i for i in await session.list_sessions()}
    assert sorted(infos) == ["s-r1", "s-r2", "s-r3"] and infos["s-r3"].damaged and not infos["s-r1"].damaged
    assert isinstance(infos["s-r3"].updated_at, float)
    code, out, err = await _cli("sessions", "ls", "--db", str(db))
    assert code == 0 and "s-r1" in out and "damaged: s-r3:" in err


def test_web_run_history_lists_a_damaged_record_as_damaged(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from lovia.web import create_app
    from tests.web.helpers import ThreadServer

    db = tmp_path / "web.db"
    agent = Agent(name="a", model=ScriptedProvider([text("one"), text("two")]))
    with ThreadServer(create_app(agent, db_path=str(db))) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        for message in ("first", "second"):
            assert http.post("/api/chat", json={"message": message}).status_code == 200
        with sqlite3.connect(db) as conn:
            (rid,) = conn.execute("SELECT run_id FROM chat_runs ORDER BY started_at LIMIT 1").fetchone()
            conn.execute("UPDATE chat_runs SET usage_json = '{torn' WHERE run_id = ?", (rid,))
        r = http.get("/api/runs/history")
        assert r.status_code == 200
        runs = {x["run_id"]: x for x in r.json()["runs"]}
        assert len(runs) == 2 and "hint:" in runs[rid]["damaged"]
        assert all("damaged" not in x for k, x in runs.items() if k != rid)
