"""What is specific to the PostgreSQL stores: schema versions, namespaces, errors, many openers."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import psycopg
import pytest

from lovia.checkpointer import RunHead
from lovia.exceptions import CorruptRecordError, SchemaTooNewError, StoreError, UserError
from lovia.stores import PostgresCheckpointer, PostgresSession
from lovia.transcript import InputEntry

_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)
DSN, drop_schema, new_schema = _pg.DSN, _pg.drop_schema, _pg.new_schema

pytestmark = [pytest.mark.postgres, _pg.requires_pg]


@pytest.fixture
def schema():
    name = new_schema("pg")
    yield name
    drop_schema(name)


def sql(schema: str, statement: str) -> list[tuple]:
    with psycopg.connect(DSN, autocommit=True, options=f"-c search_path={schema}") as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


async def test_many_concurrent_first_opens_migrate_once(schema):
    stores = [PostgresCheckpointer(DSN, schema=schema, max_size=1) for _ in range(8)]
    stores += [PostgresSession(DSN, schema=schema, max_size=1) for _ in range(8)]
    try:
        await asyncio.gather(*(s.load("x") for s in stores))
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    rows = sql(schema, "SELECT store, version, migration FROM lovia_schema ORDER BY store")
    assert rows == [("checkpoint", 3, "compact_entry_rows"), ("session", 3, "compact_entry_rows")]


async def test_a_failing_step_leaves_the_namespace_as_it_was(schema, monkeypatch):
    from lovia.stores.postgres import _schema

    original, seen = _schema._apply_step, []

    async def failing_third_step(conn, store, migration, names):
        await original(conn, store, migration, names)
        seen.append(migration.version)
        if migration.version == 3:
            raise RuntimeError("step 3 failed")

    monkeypatch.setattr(_schema, "_apply_step", failing_third_step)
    store = PostgresSession(DSN, schema=schema)
    with pytest.raises(RuntimeError, match="step 3 failed"):
        await store.load("x")
    await store.close()
    assert seen == [1, 2, 3]
    # Steps 1 and 2, the record and the namespace's tables all went with the transaction.
    assert sql(schema, f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}'") == []
    monkeypatch.undo()
    async with PostgresSession(DSN, schema=schema) as store:
        assert await store.load("x") == []
    assert sql(schema, "SELECT store, version FROM lovia_schema") == [("session", 3)]


async def test_a_record_keyed_by_component_is_converted_with_its_versions(schema):
    async with PostgresSession(DSN, schema=schema) as store:
        await store.append("s", [InputEntry(role="user", content="hi")], run_id="r")
    # Back to the shape this namespace had before the record took 0.9.119's key, with another store's row.
    sql(schema, "ALTER TABLE lovia_schema RENAME COLUMN store TO component")
    sql(schema, "ALTER TABLE lovia_schema ALTER COLUMN migration SET NOT NULL")
    sql(schema, "ALTER TABLE lovia_schema ALTER COLUMN applied_at SET NOT NULL")
    sql(schema, "INSERT INTO lovia_schema VALUES ('web', 1, 'create_web_tables', 5.0)")
    before = sql(schema, "SELECT * FROM lovia_schema ORDER BY 1")
    async with PostgresSession(DSN, schema=schema) as store:
        assert await store.load("s") == [InputEntry(role="user", content="hi")]
    assert sql(schema, "SELECT store, version, migration, applied_at FROM lovia_schema ORDER BY 1") == before
    columns = sql(
        schema,
        "SELECT column_name, is_nullable FROM information_schema.columns "
        f"WHERE table_schema = '{schema}' AND table_name = 'lovia_schema' ORDER BY ordinal_position",
    )
    assert columns == [("store", "NO"), ("version", "NO"), ("migration", "YES"), ("applied_at", "YES")]


async def test_cli_reads_versions_from_either_record_shape(schema):
    from lovia._cli_stores import _probe

    async with PostgresSession(DSN, schema=schema) as store:
        await store.load("s")
    assert await _probe(DSN, schema) == {"session": 3, "checkpoint": 0, "web": 0}
    sql(schema, "ALTER TABLE lovia_schema RENAME COLUMN store TO component")  # an older lovia's record
    assert await _probe(DSN, schema) == {"session": 3, "checkpoint": 0, "web": 0}
    assert sql(schema, "SELECT component, version FROM lovia_schema") == [("session", 3)]  # looking changed nothing


@pytest.mark.parametrize("store_cls", [PostgresSession, PostgresCheckpointer])
async def test_newer_schema_is_refused_with_upgrade_hint(schema, store_cls):
    first = store_cls(DSN, schema=schema)
    await first.load("x")
    await first.close()
    component = "session" if store_cls is PostgresSession else "checkpoint"
    sql(schema, f"UPDATE lovia_schema SET version = 99 WHERE store = '{component}'")
    store = store_cls(DSN, schema=schema)
    with pytest.raises(SchemaTooNewError) as err:
        await store.load("x")
    assert "upgrade lovia" in err.value.hint and "99" in str(err.value)
    await store.close()


async def test_prefixes_are_separate_namespaces(schema):
    a, b = (
        PostgresSession(DSN, schema=schema, table_prefix="a_"),
        PostgresSession(DSN, schema=schema, table_prefix="b_"),
    )
    await a.append("s", [InputEntry(role="user", content="hi")], run_id="r")
    assert await b.load("s") == []
    await a.close()
    await b.close()
    tables = {r[0] for r in sql(schema, f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}'")}
    assert {"a_session_runs", "b_session_runs", "a_lovia_schema", "b_lovia_schema"} <= tables


@pytest.mark.parametrize(
    "kwargs", [{"schema": "x; DROP TABLE y"}, {"table_prefix": "p-"}, {"schema": "1abc"}, {"schema": ""}]
)
def test_names_must_be_identifiers(kwargs):
    with pytest.raises(UserError) as err:
        PostgresSession(DSN, **kwargs)
    assert err.value.hint


def test_exactly_one_of_dsn_and_pool():
    with pytest.raises(UserError):
        PostgresCheckpointer()


async def test_unreachable_server_is_a_store_error_with_hint():
    store = PostgresCheckpointer("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1")
    with pytest.raises(StoreError) as err:
        await asyncio.wait_for(store.load("x"), 60)
    assert err.value.hint and isinstance(err.value.__cause__, Exception)
    assert type(err.value.__cause__).__module__.startswith(("psycopg", "psycopg_pool"))
    await store.close()


async def test_corrupt_rows_name_their_ids(schema):
    session, cp = PostgresSession(DSN, schema=schema), PostgresCheckpointer(DSN, schema=schema)
    await session.append("s", [InputEntry(role="user", content="hi")], run_id="r")
    await cp.append("run", [InputEntry(role="user", content="hi")], RunHead(agent_name="a"))
    sql(schema, "UPDATE session_runs SET entries_json = '{not json'")
    sql(schema, "UPDATE snapshot_heads SET head_json = '[]'")
    await session.close()
    session = PostgresSession(DSN, schema=schema)  # a hand edit bumps no counter: read it cold
    with pytest.raises(CorruptRecordError) as bad_session:
        await session.load("s")
    assert (bad_session.value.session_id, bad_session.value.run_id) == ("s", "r")
    with pytest.raises(CorruptRecordError) as bad_run:
        await cp.load("run")
    assert bad_run.value.run_id == "run"
    with pytest.raises(CorruptRecordError):
        await session.rewind("s", keep_entries=0)
    assert sql(schema, "SELECT entries_json FROM session_runs") == [("{not json",)]
    await session.close()
    await cp.close()


async def test_closed_store_refuses_with_hint(schema):
    store = PostgresSession(DSN, schema=schema)
    await store.load("s")
    await store.close()
    with pytest.raises(StoreError) as err:
        await store.load("s")
    assert err.value.hint


async def test_lease_times_come_from_the_database_clock(schema):
    cp = PostgresCheckpointer(DSN, schema=schema)
    lease = await cp.acquire_lease("r", owner="w", ttl=30)
    [(db_now,)] = sql(schema, "SELECT extract(epoch from clock_timestamp())::float8")
    assert abs(lease.expires_at - 30 - db_now) < 5
    await cp.close()
