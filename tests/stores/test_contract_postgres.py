"""The public store contracts against real PostgreSQL (each test in its own throwaway schema)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lovia.checkpointer import RunHead
from lovia.stores import PostgresCheckpointer, PostgresSession
from lovia.testing.contracts import CheckpointerContract, SessionContract
from lovia.transcript import InputEntry

# tests/stores is not a package: load the shared PostgreSQL plumbing by path.
_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)
DSN, drop_schema, new_schema, requires_pg = _pg.DSN, _pg.drop_schema, _pg.new_schema, _pg.requires_pg

pytestmark = [pytest.mark.postgres, requires_pg]


class TestPostgresSessionContract(SessionContract):
    @pytest.fixture(params=["own-schema", "shared-pool-prefixed"])
    async def session(self, request):
        schema = new_schema("s")
        if request.param == "own-schema":
            store = PostgresSession(DSN, schema=schema, max_size=4)
            yield store
            await store.close()
        else:
            # Session and checkpointer share one caller-owned pool, namespaced by a table prefix.
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(DSN, min_size=1, max_size=4, open=False)
            await pool.open()
            neighbour = PostgresCheckpointer(pool=pool, schema=schema, table_prefix="app_")
            await neighbour.append("neighbour-run", [InputEntry(role="user", content="hi")], RunHead(agent_name="a"))
            store = PostgresSession(pool=pool, schema=schema, table_prefix="app_")
            yield store
            await store.close()
            snap = await neighbour.load("neighbour-run")
            assert snap is not None and len(snap.entries) == 1
            await neighbour.close()
            await pool.close()
        drop_schema(schema)


class TestPostgresCheckpointerContract(CheckpointerContract):
    @pytest.fixture
    async def checkpointer(self):
        schema = new_schema("c")
        store = PostgresCheckpointer(DSN, schema=schema, max_size=12)
        yield store
        await store.close()
        drop_schema(schema)
