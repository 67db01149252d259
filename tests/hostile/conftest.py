"""Stores for the hostile-input tests: every bundled backend, each in its own file or schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lovia import InMemoryCheckpointer, InMemorySession, SQLiteCheckpointer, SQLiteSession
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


async def open_stores(kind: str, tmp: Path) -> tuple[Any, Any, Any]:
    """(session, checkpointer, cleanup coroutine function) for one backend."""
    if kind == "memory":
        session, cp = InMemorySession(), InMemoryCheckpointer()

        async def noop() -> None:
            return None

        return session, cp, noop
    if kind == "sqlite":
        db = tmp / "hostile.db"
        session, cp = SQLiteSession(db, wal=True), SQLiteCheckpointer(db, wal=True)

        async def close_sqlite() -> None:
            await session.close()
            await cp.close()

        return session, cp, close_sqlite
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    from lovia.stores import PostgresCheckpointer, PostgresSession

    schema = new_schema("hostile")
    session, cp = PostgresSession(DSN, schema=schema), PostgresCheckpointer(DSN, schema=schema)

    async def close_pg() -> None:
        await session.close()
        await cp.close()
        drop_schema(schema)

    return session, cp, close_pg


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    session, cp, cleanup = await open_stores(request.param, tmp_path)
    try:
        yield session, cp
    finally:
        await cleanup()
