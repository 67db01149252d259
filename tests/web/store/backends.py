"""The chat index on each backend for the store tests: a real SQLite file, a real PostgreSQL schema."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from lovia.web.store import ChatStore, PostgresChatStore, RunRow, ScheduleRow
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param(
        "postgres",
        id="postgres",
        marks=[pytest.mark.postgres, pytest.mark.skipif(UNREACHABLE is not None, reason=UNREACHABLE or "")],
    ),
]


@dataclass
class Backend:
    """A chat store and a side door into the database behind it (for counts and injected faults)."""

    kind: str
    store: ChatStore
    where: str
    """The SQLite file, or the PostgreSQL schema."""

    def table(self, sqlite_name: str, pg_name: str) -> str:
        """The name of a table on this backend, qualified on PostgreSQL."""
        return sqlite_name if self.kind == "sqlite" else f'"{self.where}"."{pg_name}"'

    def refuse_deleting(self, chat_id: str) -> None:
        """Make the database raise when the index row of ``chat_id`` is deleted (an injected failure)."""
        if self.kind == "sqlite":
            self.execute(
                "CREATE TRIGGER refuse_delete BEFORE DELETE ON chat_sessions "
                f"WHEN OLD.id = '{chat_id}' BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
            )
            return
        self.execute(
            f'CREATE FUNCTION "{self.where}".refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN '
            f"IF OLD.id = '{chat_id}' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN OLD; END $$"
        )
        self.execute(
            f'CREATE TRIGGER refuse_delete BEFORE DELETE ON "{self.where}".web_chats '
            f'FOR EACH ROW EXECUTE FUNCTION "{self.where}".refuse_delete()'
        )

    def allow_deleting(self) -> None:
        """Remove the trigger :meth:`refuse_deleting` made."""
        if self.kind == "sqlite":
            self.execute("DROP TRIGGER refuse_delete")
        else:
            self.execute(f'DROP TRIGGER refuse_delete ON "{self.where}".web_chats')

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement straight on the database (``?`` placeholders on both)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as conn:
                return list(conn.execute(sql, params).fetchall())
        import psycopg

        with psycopg.connect(DSN, autocommit=True) as conn:
            cur = cast(Any, conn).execute(sql.replace("?", "%s"), params)
            return list(cur.fetchall()) if cur.description else []


async def open_backend(kind: str, tmp_path: Path, *, where: str | None = None) -> AsyncIterator[Backend]:
    """Yield a store of ``kind`` (fresh, or reopened on ``where``); close it afterwards, and drop a
    PostgreSQL schema this call made."""
    made = where is None
    if kind == "sqlite":
        where = where or str(tmp_path / "chats.db")
        store: ChatStore = ChatStore.sqlite(where)
    else:
        where = where or new_schema("idx")
        store = PostgresChatStore(DSN, schema=where)
    try:
        yield Backend(kind, store, where)
    finally:
        await store.close()
        if kind == "postgres" and made:
            drop_schema(where)


T0 = 1_800_000_000.0


def schedule_row(sid: str = "s1", **kw: Any) -> ScheduleRow:
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


def run_row(rid: str, **kw: Any) -> RunRow:
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
