"""A checksum per stored segment and checkpoint batch: edits made outside lovia are caught on load.

Byte flips are made in the database file itself (SQLite) and by same-length SQL edits (both
backends); each must surface as a CorruptRecordError naming the session or run, with a hint,
while every other record still loads.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest

from lovia.checkpointer import RunHead
from lovia.exceptions import CorruptRecordError
from lovia.stores import PostgresCheckpointer, PostgresSession, SQLiteCheckpointer, SQLiteSession
from lovia.stores._codec import checksum
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sqlite"

_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)


def _flip_on_disk(path: Path, needle: bytes) -> None:
    """Change one byte inside every occurrence of ``needle`` in the file itself."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0, f"{needle!r} is not in the file"
    while at >= 0:
        data[at + len(needle) // 2] ^= 0x01
        at = data.find(needle, at + 1)
    path.write_bytes(bytes(data))


def _run(marker: str) -> list:
    return [
        InputEntry(role="user", content=f"look up {marker}"),
        ToolCallEntry(call_id="c1", name="lookup", arguments='{"q": "x"}'),
        ToolResultEntry(call_id="c1", output=f"found {marker}"),
        AssistantTextEntry(content="done"),
    ]


async def test_a_byte_flipped_on_disk_inside_a_session_entry_is_caught(tmp_path):
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        await session.append("victim", _run("ZEBRA-PROJECT-NOTES"), run_id="r-bad", meta={"k": 1})
        await session.append("bystander", _run("other"), run_id="r-ok")
    _flip_on_disk(path, b"ZEBRA-PROJECT-NOTES")
    async with SQLiteSession(path) as session:
        for read in (session.load, session.segments):
            with pytest.raises(CorruptRecordError) as err:
                await read("victim")
            assert (err.value.session_id, err.value.run_id) == ("victim", "r-bad")
            assert "'victim'" in str(err.value) and "checksum" in str(err.value)
            assert err.value.hint and "rewind or clear" in err.value.hint
        assert await session.load("bystander") == _run("other")
        # Maintenance refuses to rewrite (and so bless) the damaged row.
        with pytest.raises(CorruptRecordError):
            await session.trim_tool_results("victim", keep_chars=1, keep_runs=0)
        await session.clear("victim")  # the way out the hint names
        assert await session.load("victim") == []


async def test_an_edited_segment_meta_is_caught(tmp_path):
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        await session.append("s", _run("a"), run_id="r1", meta={"context_state": {"budget": 100}})
    with sqlite3.connect(path) as conn:  # same length, still valid JSON
        conn.execute("UPDATE session_runs SET meta_json = replace(meta_json, '100', '999')")
    async with SQLiteSession(path) as session:
        with pytest.raises(CorruptRecordError) as err:
            await session.segments("s")
    assert err.value.run_id == "r1"


async def test_a_byte_flipped_on_disk_inside_a_checkpoint_batch_is_caught(tmp_path):
    path = tmp_path / "c.db"
    async with SQLiteCheckpointer(path) as cp:
        await cp.append("job-bad", _run("QUOKKA-BATCH-TEXT")[:2], RunHead(agent_name="a"))
        await cp.append("job-bad", _run("q")[2:], RunHead(agent_name="a", turns=1))
        await cp.append("job-ok", _run("fine"), RunHead(agent_name="a"))
    _flip_on_disk(path, b"QUOKKA-BATCH-TEXT")
    async with SQLiteCheckpointer(path) as cp:
        with pytest.raises(CorruptRecordError) as err:
            await cp.load("job-bad")
        assert err.value.run_id == "job-bad" and "'job-bad'" in str(err.value)
        assert err.value.hint and "checkpointer.delete(run_id)" in err.value.hint
        snap = await cp.load("job-ok")
        assert snap is not None and list(snap.entries) == _run("fine")
        await cp.delete("job-bad")
        assert await cp.load("job-bad") is None


async def test_maintenance_writes_fresh_checksums(tmp_path):
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        for n in range(3):
            run = [*_run(str(n))[:2], ToolResultEntry(call_id="c1", output="x" * 2000), AssistantTextEntry(content="k")]
            await session.append("s", run, run_id=f"r{n}", meta={"n": n})
        assert await session.trim_tool_results("s", keep_chars=10, keep_runs=1) == 2
        assert await session.rewind("s", keep_entries=9) == 3
        expected = await session.segments("s")
    async with SQLiteSession(path) as cold:  # verifies every row again
        assert await cold.segments("s") == expected


async def test_a_row_without_checksum_is_read_unverified(tmp_path):
    """NULL means "written without one" (by hand, or by a writer predating checksums)."""
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        await session.append("s", _run("a"), run_id="r1")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE session_runs SET checksum = NULL")
    async with SQLiteSession(path) as session:
        assert await session.load("s") == _run("a")


@pytest.mark.parametrize("fixture", ["session_v1.sql", "checkpoint_v3.sql"])
async def test_migration_adds_checksums_to_existing_rows(tmp_path, fixture):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / fixture).read_text())
    conn.close()
    table = "session_runs" if fixture.startswith("session") else "snapshot_turns"
    async with SQLiteSession(path) as session, SQLiteCheckpointer(path) as cp:
        await session.load("u1")
        await cp.load("job-1")
    with sqlite3.connect(path) as conn:
        meta = "meta_json" if table == "session_runs" else "NULL"
        rows = conn.execute(f"SELECT entries_json, {meta}, checksum FROM {table}").fetchall()
        assert rows and all(stored == checksum(text, m) for text, m, stored in rows)
        # A same-length edit of stored content, after the migration, is caught.
        conn.execute(f"UPDATE {table} SET entries_json = replace(entries_json, 'Atlas', 'Atlaz')")
        conn.execute(f"UPDATE {table} SET entries_json = replace(entries_json, 'migrate', 'migrat3')")
    async with SQLiteSession(path) as session, SQLiteCheckpointer(path) as cp:
        with pytest.raises(CorruptRecordError) as err:
            await (session.load("u1") if table == "session_runs" else cp.load("job-1"))
    assert err.value.run_id in ("run_a", "run_b", "job-1")


# ---------------------------------------------------------------------------- PostgreSQL


def _sql(schema: str, statement: str, params: tuple = ()) -> list[tuple]:
    import psycopg

    with psycopg.connect(_pg.DSN, autocommit=True, options=f"-c search_path={schema}") as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def schema():
    name = _pg.new_schema("sum")
    yield name
    _pg.drop_schema(name)


@pytest.mark.postgres
@_pg.requires_pg
async def test_postgres_same_length_edits_are_caught(schema):
    async with PostgresSession(_pg.DSN, schema=schema) as session, PostgresCheckpointer(_pg.DSN, schema=schema) as cp:
        await session.append("victim", _run("ZEBRA"), run_id="r-bad")
        await session.append("bystander", _run("other"), run_id="r-ok")
        await cp.append("job-bad", _run("QUOKKA"), RunHead(agent_name="a"))
        await cp.append("job-ok", _run("fine"), RunHead(agent_name="a"))
    _sql(schema, "UPDATE session_runs SET entries_json = replace(entries_json, 'ZEBRA', 'ZEBRB')")
    _sql(schema, "UPDATE snapshot_turns SET entries_json = replace(entries_json, 'QUOKKA', 'QUOKKB')")
    async with PostgresSession(_pg.DSN, schema=schema) as session, PostgresCheckpointer(_pg.DSN, schema=schema) as cp:
        with pytest.raises(CorruptRecordError) as bad_session:
            await session.load("victim")
        assert (bad_session.value.session_id, bad_session.value.run_id) == ("victim", "r-bad")
        assert "checksum" in str(bad_session.value) and bad_session.value.hint
        with pytest.raises(CorruptRecordError) as bad_run:
            await cp.load("job-bad")
        assert bad_run.value.run_id == "job-bad" and bad_run.value.hint
        assert await session.load("bystander") == _run("other")
        ok = await cp.load("job-ok")
        assert ok is not None and list(ok.entries) == _run("fine")


@pytest.mark.postgres
@_pg.requires_pg
async def test_postgres_migration_adds_checksums_to_existing_rows(schema):
    from lovia.stores.postgres._names import Names
    from lovia.stores.postgres._schema import MIGRATIONS, render

    names = Names(schema=schema, prefix="")
    import psycopg

    # A namespace as version 1 of each component left it, with rows in it.
    with psycopg.connect(_pg.DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path = "{schema}"')
        for component in ("session", "checkpoint"):
            for statement in MIGRATIONS[component][0].statements:
                conn.execute(render(statement, names))
        conn.execute(
            "CREATE TABLE lovia_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "migration TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        conn.execute(
            "INSERT INTO lovia_schema VALUES ('session', 1, 'create_session_runs', 0), "
            "('checkpoint', 1, 'create_snapshot_tables', 0)"
        )
        conn.execute(
            "INSERT INTO session_runs (session_id, run_id, entries_json, entry_count, meta_json, created_at) VALUES "
            """('u1', 'run_a', '[{"type":"input","role":"user","content":"Atlas"}]', 1, '{"a":1}', 1.0)"""
        )
        conn.execute(
            "INSERT INTO snapshot_heads VALUES ('job-1', %s, 'running', 1, 1, 1.0)",
            (RunHead(agent_name="a").to_json(),),
        )
        conn.execute(
            "INSERT INTO snapshot_turns VALUES "
            """('job-1', 1, '[{"type":"input","role":"user","content":"Migrate"}]', 1)"""
        )
    async with PostgresSession(_pg.DSN, schema=schema) as session, PostgresCheckpointer(_pg.DSN, schema=schema) as cp:
        assert await session.load("u1") == [InputEntry(role="user", content="Atlas")]
        snap = await cp.load("job-1")
        assert snap is not None and list(snap.entries) == [InputEntry(role="user", content="Migrate")]
        await session.append("u1", _run("more"), run_id="run_b")  # the head row was backfilled
        assert len(await session.segments("u1")) == 2
    assert _sql(schema, "SELECT store, version FROM lovia_schema ORDER BY store") == [
        ("checkpoint", 3),
        ("session", 3),
    ]
    assert all(s is not None for (s,) in _sql(schema, "SELECT checksum FROM session_runs"))
    _sql(schema, "UPDATE snapshot_turns SET entries_json = replace(entries_json, 'Migrate', 'Migrats')")
    async with PostgresCheckpointer(_pg.DSN, schema=schema) as cp:
        with pytest.raises(CorruptRecordError):
            await cp.load("job-1")
