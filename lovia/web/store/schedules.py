"""Durable schedules and their exactly-once fire claims, in SQLite or PostgreSQL.

Two tables, versioned as store ``schedule`` in the stores' ``lovia_schema`` table (the steps are
never edited once released; append new ones; all pending ones commit in one transaction):

* ``web_schedules``: one row per schedule, with its next slot (``next_fire``), ``active`` flag,
  fire count and stop limits.
* ``web_schedule_claims(schedule_id, slot, owner, claimed_at, fired_at, run_id, session_id, error)``
  with primary key ``(schedule_id, slot)``: a slot is claimed by inserting its row in the same
  transaction that moves the schedule past it (compare-and-set on ``next_fire``). Two servers on
  one database therefore never both fire a slot: the loser's insert or update matches nothing
  and its transaction rolls back. ``fired_at`` is set once the run started; a claim left without
  it (the process died between the commit and the start) is taken over by :meth:`reclaim`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from ...exceptions import StoreError, UserError
from ...stores.sqlite._schema import Migration, ensure_schema
from ...types import JsonObject
from ..triggers import MAX_FIRES, check_time

__all__ = [
    "PostgresScheduleStore",
    "ScheduleClaim",
    "ScheduleRow",
    "ScheduleStore",
    "SQLiteScheduleStore",
    "open_schedule_store",
]


def json_object(value: Any) -> JsonObject | None:
    """A stored JSON object cell (text, bytes or a mapping) as a dict; ``None`` when empty or not an object."""
    if value is None or value == "":
        return None
    if isinstance(value, (str, bytes)):
        value = json.loads(value)
    return cast(JsonObject, dict(value)) if isinstance(value, Mapping) else None


@dataclass(slots=True)
class ScheduleRow:
    """One schedule: what to send, to which chat and agent, and when it fires next.

    ``session_id`` ``None`` opens a new chat on every fire. ``until`` is an optional stop condition
    in plain words, checked by the run after each fire (see :func:`lovia.web.scheduler.fire_input`);
    ``max_fires`` and ``expires_at`` stop the schedule regardless. ``context`` is the page's client
    context when the schedule was made; each fire's ``run_deps`` gets it. ``last_run_id`` and
    ``last_error`` describe the latest fire.
    """

    id: str
    agent: str | None
    input: str
    session_id: str | None
    trigger_kind: str
    trigger_expr: str
    next_fire: float
    active: bool
    last_session_id: str | None
    created_at: float
    updated_at: float
    until: str | None = None
    max_fires: int | None = None
    expires_at: float | None = None
    fire_count: int = 0
    finished_reason: str | None = None
    context: JsonObject | None = None
    last_run_id: str | None = field(default=None, kw_only=True)
    last_error: str | None = field(default=None, kw_only=True)

    @classmethod
    def from_row(cls, row: Any) -> ScheduleRow:
        """Build from a mapping of field names, or from a ``SELECT`` of the schedule store's columns in order."""
        if isinstance(row, Mapping):
            names = {f.name for f in dataclasses.fields(cls)}
            values = {k: v for k, v in row.items() if k in names}
            if "context" in values:
                values["context"] = json_object(values["context"])
            values.setdefault("agent", None)
            values.setdefault("session_id", None)
            values.setdefault("active", True)
            values.setdefault("last_session_id", None)
            return cls(**values)
        cells = list(row)
        cells += [None] * (19 - len(cells))
        return cls(
            id=cells[0],
            session_id=cells[1],
            agent=cells[2],
            input=cells[3],
            trigger_kind=cells[4],
            trigger_expr=cells[5],
            next_fire=float(cells[6]),
            active=bool(cells[7]),
            fire_count=int(cells[8] or 0),
            max_fires=cells[9],
            expires_at=cells[10],
            finished_reason=cells[11],
            last_session_id=cells[12],
            last_run_id=cells[13],
            last_error=cells[14],
            created_at=float(cells[15]),
            updated_at=float(cells[16]),
            context=json_object(cells[17]),
            until=cells[18],
        )

    def check(self) -> None:
        """Refuse (:class:`~lovia.exceptions.UserError`) a row no store may keep: a time that is not a
        finite epoch second between 1970 and 9999, or a count outside what the columns hold."""
        for what, stamp in (("next_fire", self.next_fire), ("expires_at", self.expires_at)):
            if stamp is not None:
                check_time(float(stamp), f"the schedule's {what}")
        for what, count in (("max_fires", self.max_fires), ("fire_count", self.fire_count)):
            if count is not None and not 0 <= count <= MAX_FIRES:
                raise UserError(
                    f"the schedule's {what} {count!r} is out of range", hint=f"use a whole number up to {MAX_FIRES}"
                )

    def values(self) -> tuple[Any, ...]:
        """The column values, in the schedule store's column order (see :meth:`from_row`), once :meth:`check` passed."""
        self.check()
        return (
            self.id,
            self.session_id,
            self.agent,
            self.input,
            self.trigger_kind,
            self.trigger_expr,
            self.next_fire,
            int(self.active),
            self.fire_count,
            self.max_fires,
            self.expires_at,
            self.finished_reason,
            self.last_session_id,
            self.last_run_id,
            self.last_error,
            self.created_at,
            self.updated_at,
            json.dumps(self.context) if self.context else None,
            self.until,
        )

    def to_dict(self) -> JsonObject:
        """JSON-safe form (what ``/api/schedules`` returns)."""
        return dataclasses.asdict(self)


T = TypeVar("T")
COMPONENT = "schedule"

_COLUMNS = (
    "id, session_id, agent, input, trigger_kind, trigger_expr, next_fire, active, fire_count, max_fires, "
    "expires_at, finished_reason, last_session_id, last_run_id, last_error, created_at, updated_at, client_context, "
    "until"
)
_N_COLUMNS = len(_COLUMNS.split(","))
_CLAIM_COLUMNS = "schedule_id, slot, owner, claimed_at, fired_at, run_id, session_id, error"

# (version, name, statements); {real} is REAL (SQLite) or DOUBLE PRECISION (PostgreSQL).
_MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "create_web_schedules",
        (
            """CREATE TABLE IF NOT EXISTS {p}web_schedules (
                id TEXT PRIMARY KEY, session_id TEXT, agent TEXT, input TEXT NOT NULL,
                trigger_kind TEXT NOT NULL, trigger_expr TEXT NOT NULL, next_fire {real} NOT NULL,
                active INTEGER NOT NULL DEFAULT 1, fire_count INTEGER NOT NULL DEFAULT 0, max_fires INTEGER,
                expires_at {real}, finished_reason TEXT, last_session_id TEXT, last_run_id TEXT,
                last_error TEXT, created_at {real} NOT NULL, updated_at {real} NOT NULL)""",
            "CREATE INDEX IF NOT EXISTS {i}web_schedules_due ON {p}web_schedules (active, next_fire)",
            """CREATE TABLE IF NOT EXISTS {p}web_schedule_claims (
                schedule_id TEXT NOT NULL, slot {real} NOT NULL, owner TEXT NOT NULL,
                claimed_at {real} NOT NULL, fired_at {real}, run_id TEXT, session_id TEXT, error TEXT,
                PRIMARY KEY (schedule_id, slot))""",
        ),
    ),
    (2, "add_schedule_client_context", ("ALTER TABLE {p}web_schedules ADD COLUMN client_context TEXT",)),
    (3, "add_schedule_until", ("ALTER TABLE {p}web_schedules ADD COLUMN until TEXT",)),
)
LATEST_VERSION = _MIGRATIONS[-1][0]
# The same steps for the stores' shared SQLite migration record (lovia/stores/sqlite/_schema.py).
SCHEDULE_MIGRATIONS = tuple(
    Migration(version, name, tuple(statement.format(p="", i="", real="REAL") for statement in statements))
    for version, name, statements in _MIGRATIONS
)


@dataclass(frozen=True, slots=True)
class ScheduleClaim:
    """One claimed slot of a schedule: who fired it and which run it started."""

    schedule_id: str
    slot: float
    owner: str
    claimed_at: float
    fired_at: float | None
    run_id: str | None
    session_id: str | None
    error: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ScheduleClaim:
        """Build from a ``SELECT`` of the claim columns, in order."""
        return cls(row[0], float(row[1]), row[2], float(row[3]), row[4], row[5], row[6], row[7])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)


class ScheduleStore(ABC):
    """Where schedules and their claims live; the SQLite and PostgreSQL stores share this API."""

    @abstractmethod
    async def add(self, row: ScheduleRow) -> None:
        """Insert a new schedule."""

    @abstractmethod
    async def get(self, schedule_id: str) -> ScheduleRow | None:
        """One schedule, or ``None``."""

    @abstractmethod
    async def list(self, *, session_id: str | None = None) -> Sequence[ScheduleRow]:
        """Every schedule (or those of one chat), oldest first."""

    @abstractmethod
    async def update(self, row: ScheduleRow) -> None:
        """Write every field of an existing schedule."""

    @abstractmethod
    async def delete(self, schedule_id: str) -> bool:
        """Delete a schedule and its claims; ``False`` when it did not exist."""

    @abstractmethod
    async def delete_for_session(self, session_id: str) -> int:
        """Delete the schedules bound to a chat (and their claims); returns how many."""

    @abstractmethod
    async def due(self, now: float) -> Sequence[ScheduleRow]:
        """Active schedules whose ``next_fire`` is at or before ``now``."""

    @abstractmethod
    async def claim(self, row: ScheduleRow, *, slot: float, owner: str, now: float, advance: bool) -> bool:
        """Claim ``slot`` of ``row`` for ``owner``; ``True`` only for the one caller that got it.

        With ``advance`` the same transaction writes ``row.next_fire``, ``row.active`` and
        ``row.finished_reason`` and bumps the fire count, but only if the stored ``next_fire`` is
        still ``slot`` (a manual fire leaves the timing alone and only bumps the count).
        """

    @abstractmethod
    async def finish_claim(
        self, schedule_id: str, slot: float, *, run_id: str | None, session_id: str | None, error: str | None
    ) -> None:
        """Record what a claimed slot started (or why it could not start)."""

    @abstractmethod
    async def reclaim(self, *, owner: str, older_than: float, now: float) -> Sequence[ScheduleClaim]:
        """Take over claims never marked fired and claimed before ``older_than`` (their owner died)."""

    @abstractmethod
    async def claims(self, schedule_id: str, *, limit: int = 50) -> Sequence[ScheduleClaim]:
        """A schedule's fire history, newest first."""

    @abstractmethod
    async def close(self) -> None:
        """Release the connection(s)."""


# --------------------------------------------------------------------------- SQLite


_SQLITE_READONLY = 8  # SQLite's primary result code for a write to a read-only database


def _sqlite_hint(exc: sqlite3.Error) -> str:
    """What to do about a failed write: a read-only database is a permissions problem, not a full disk."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code of an extended one
    if code == _SQLITE_READONLY or "readonly" in str(exc).lower():
        return "the database is read-only: make its file and its folder writable for the server (nothing was saved)"
    return "check the database file and free disk space"


class SQLiteScheduleStore(ScheduleStore):
    """Schedules in a SQLite file (usually the chat database itself), one locked connection.

    Args:
        path: the database file (created with its folder when missing) or ``":memory:"``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout = 10000")
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the schedule store in {self.path}: {exc}", hint="check the --db path and its permissions"
            ) from exc

    def _migrate(self) -> None:
        ensure_schema(self._conn, COMPONENT, path=self.path, migrations=SCHEDULE_MIGRATIONS)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                try:
                    return fn(self._conn)
                except sqlite3.Error as exc:
                    if self._conn.in_transaction:
                        self._conn.rollback()
                    raise StoreError(f"schedule store {self.path}: {exc}", hint=_sqlite_hint(exc)) from exc

        return await asyncio.to_thread(locked)

    async def add(self, row: ScheduleRow) -> None:
        """Insert a new schedule."""
        marks = ", ".join("?" * _N_COLUMNS)
        await self._run(lambda c: c.execute(f"INSERT INTO web_schedules ({_COLUMNS}) VALUES ({marks})", row.values()))

    async def get(self, schedule_id: str) -> ScheduleRow | None:
        """One schedule, or ``None``."""
        sql = f"SELECT {_COLUMNS} FROM web_schedules WHERE id = ?"
        found = await self._run(lambda c: c.execute(sql, (schedule_id,)).fetchone())
        return ScheduleRow.from_row(found) if found else None

    async def list(self, *, session_id: str | None = None) -> Sequence[ScheduleRow]:
        """Every schedule (or those of one chat), oldest first."""
        sql = f"SELECT {_COLUMNS} FROM web_schedules WHERE ? IS NULL OR session_id = ? ORDER BY created_at, id"
        rows = await self._run(lambda c: c.execute(sql, (session_id, session_id)).fetchall())
        return [ScheduleRow.from_row(r) for r in rows]

    async def update(self, row: ScheduleRow) -> None:
        """Write every field of an existing schedule."""
        names = [n.strip() for n in _COLUMNS.split(",")][1:]
        sql = f"UPDATE web_schedules SET {', '.join(n + ' = ?' for n in names)} WHERE id = ?"
        values = row.values()
        await self._run(lambda c: c.execute(sql, (*values[1:], values[0])))

    async def delete(self, schedule_id: str) -> bool:
        """Delete a schedule and its claims; ``False`` when it did not exist."""

        def drop(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            gone = conn.execute("DELETE FROM web_schedules WHERE id = ?", (schedule_id,)).rowcount
            conn.execute("DELETE FROM web_schedule_claims WHERE schedule_id = ?", (schedule_id,))
            conn.execute("COMMIT")
            return gone > 0

        return await self._run(drop)

    async def delete_for_session(self, session_id: str) -> int:
        """Delete the schedules bound to a chat (and their claims); returns how many."""
        count = 0
        for row in await self.list(session_id=session_id):
            count += await self.delete(row.id)
        return count

    async def due(self, now: float) -> Sequence[ScheduleRow]:
        """Active schedules whose ``next_fire`` is at or before ``now``."""
        sql = f"SELECT {_COLUMNS} FROM web_schedules WHERE active = 1 AND next_fire <= ? ORDER BY next_fire, id"
        rows = await self._run(lambda c: c.execute(sql, (now,)).fetchall())
        return [ScheduleRow.from_row(r) for r in rows]

    async def claim(self, row: ScheduleRow, *, slot: float, owner: str, now: float, advance: bool) -> bool:
        """Claim ``slot`` of ``row`` for ``owner`` (see :meth:`ScheduleStore.claim`)."""

        def take(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            inserted = conn.execute(
                "INSERT INTO web_schedule_claims (schedule_id, slot, owner, claimed_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (row.id, slot, owner, now),
            ).rowcount
            if advance:
                moved = conn.execute(
                    "UPDATE web_schedules SET next_fire = ?, active = ?, finished_reason = ?, "
                    "fire_count = fire_count + 1, updated_at = ? WHERE id = ? AND next_fire = ? AND active = 1",
                    (row.next_fire, int(row.active), row.finished_reason, now, row.id, slot),
                ).rowcount
            else:
                moved = conn.execute(
                    "UPDATE web_schedules SET fire_count = fire_count + 1, updated_at = ? WHERE id = ?", (now, row.id)
                ).rowcount
            if inserted != 1 or moved != 1:
                conn.execute("ROLLBACK")
                return False
            conn.execute("COMMIT")
            return True

        return await self._run(take)

    async def finish_claim(
        self, schedule_id: str, slot: float, *, run_id: str | None, session_id: str | None, error: str | None
    ) -> None:
        """Record what a claimed slot started (or why it could not start)."""

        def write(conn: sqlite3.Connection) -> None:
            stamp = time.time()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "UPDATE web_schedule_claims SET fired_at = ?, run_id = ?, session_id = ?, error = ? "
                "WHERE schedule_id = ? AND slot = ?",
                (stamp, run_id, session_id, error, schedule_id, slot),
            )
            conn.execute(
                "UPDATE web_schedules SET last_run_id = ?, last_session_id = COALESCE(?, last_session_id), "
                "last_error = ?, updated_at = ? WHERE id = ?",
                (run_id, session_id, error, stamp, schedule_id),
            )
            conn.execute("COMMIT")

        await self._run(write)

    async def reclaim(self, *, owner: str, older_than: float, now: float) -> Sequence[ScheduleClaim]:
        """Take over claims never marked fired and claimed before ``older_than``."""

        def take(conn: sqlite3.Connection) -> list[ScheduleClaim]:
            sql = f"SELECT {_CLAIM_COLUMNS} FROM web_schedule_claims WHERE fired_at IS NULL AND claimed_at < ?"
            taken = []
            for found in conn.execute(sql, (older_than,)).fetchall():
                changed = conn.execute(
                    "UPDATE web_schedule_claims SET owner = ?, claimed_at = ? "
                    "WHERE schedule_id = ? AND slot = ? AND fired_at IS NULL AND claimed_at = ?",
                    (owner, now, found[0], found[1], found[3]),
                ).rowcount
                if changed == 1:
                    taken.append(ScheduleClaim.from_row((found[0], found[1], owner, now, *found[4:])))
            return taken

        return await self._run(take)

    async def claims(self, schedule_id: str, *, limit: int = 50) -> Sequence[ScheduleClaim]:
        """A schedule's fire history, newest first."""
        sql = f"SELECT {_CLAIM_COLUMNS} FROM web_schedule_claims WHERE schedule_id = ? ORDER BY claimed_at DESC LIMIT ?"
        rows = await self._run(lambda c: c.execute(sql, (schedule_id, limit)).fetchall())
        return [ScheduleClaim.from_row(r) for r in rows]

    async def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


# --------------------------------------------------------------------------- PostgreSQL


def _run_statements(statements: Sequence[str]) -> Callable[[Any, Any], Any]:
    """A PostgreSQL migration step running already rendered statements (names are filled in per store)."""

    async def run(conn: Any, names: Any) -> None:
        for statement in statements:
            await conn.execute(statement)

    return run


class PostgresScheduleStore(ScheduleStore):
    """Schedules in PostgreSQL, shared by every ``lovia web`` process on the database.

    Args:
        dsn: a ``postgresql://`` URL.
        schema: an optional PostgreSQL schema for the tables (created when missing).
        table_prefix: prepended to the table names.
    """

    def __init__(self, dsn: str, *, schema: str | None = None, table_prefix: str = "", max_size: int = 4) -> None:
        from ...stores.postgres._db import import_driver, validate_identifier
        from ...stores.postgres._names import Names

        self._psycopg, self._pool_mod = import_driver()
        self.dsn = dsn
        self.names = Names(
            validate_identifier(schema, "schema") if schema is not None else None,
            validate_identifier(table_prefix, "table_prefix", allow_empty=True),
        )
        self._max_size = max_size
        self._pool: Any = None
        self._lock = asyncio.Lock()

    def _t(self, name: str) -> str:
        return self.names.table(name).as_string(None)

    async def _open(self) -> Any:
        async with self._lock:
            if self._pool is None:
                try:
                    conn = await self._psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                    async with conn:
                        await self._migrate(conn)
                    pool = self._pool_mod.AsyncConnectionPool(
                        self.dsn, min_size=1, max_size=self._max_size, open=False, kwargs={"autocommit": True}
                    )
                    await pool.open(wait=False)
                    self._pool = pool
                except self._psycopg.Error as exc:
                    raise self._error(exc, "connecting") from exc
        return self._pool

    def _error(self, exc: BaseException, doing: str) -> StoreError:
        from ...stores.postgres._db import describe

        return StoreError(
            f"PostgreSQL schedule store: error while {doing}: {describe(exc)}",
            hint="check that the server is reachable, the URL and credentials, and that the role may create tables",
        )

    def _pg_migrations(self) -> tuple[Any, ...]:
        """The schedule steps for the stores' shared PostgreSQL record (``lovia/stores/postgres/_schema.py``)."""
        from ...stores.postgres._schema import Migration as PgMigration

        schema = self.names.schema
        prefix = (f"{self._psycopg.sql.Identifier(schema).as_string(None)}." if schema else "") + self.names.prefix
        steps = []
        for version, name, statements in _MIGRATIONS:
            rendered = tuple(s.format(p=prefix, i=self.names.prefix, real="DOUBLE PRECISION") for s in statements)
            steps.append(PgMigration(version, name, (), backfill=_run_statements(rendered)))
        return tuple(steps)

    async def _migrate(self, conn: Any) -> None:
        from ...stores.postgres._schema import ensure_schema as ensure_pg_schema

        await ensure_pg_schema(conn, COMPONENT, self.names, self._pg_migrations())

    async def _fetch(self, sql: str, params: Sequence[Any], doing: str) -> list[Any]:
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(sql, params)
                return list(await cur.fetchall()) if cur.description else []
        except self._psycopg.Error as exc:
            raise self._error(exc, doing) from exc

    async def add(self, row: ScheduleRow) -> None:
        """Insert a new schedule."""
        marks = ", ".join(["%s"] * _N_COLUMNS)
        await self._fetch(
            f"INSERT INTO {self._t('web_schedules')} ({_COLUMNS}) VALUES ({marks})", row.values(), "adding"
        )

    async def get(self, schedule_id: str) -> ScheduleRow | None:
        """One schedule, or ``None``."""
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM {self._t('web_schedules')} WHERE id = %s", (schedule_id,), "reading"
        )
        return ScheduleRow.from_row(rows[0]) if rows else None

    async def list(self, *, session_id: str | None = None) -> Sequence[ScheduleRow]:
        """Every schedule (or those of one chat), oldest first."""
        sql = (
            f"SELECT {_COLUMNS} FROM {self._t('web_schedules')} "
            "WHERE %s::text IS NULL OR session_id = %s ORDER BY created_at, id"
        )
        return [ScheduleRow.from_row(r) for r in await self._fetch(sql, (session_id, session_id), "listing")]

    async def update(self, row: ScheduleRow) -> None:
        """Write every field of an existing schedule."""
        names = [n.strip() for n in _COLUMNS.split(",")][1:]
        sql = f"UPDATE {self._t('web_schedules')} SET {', '.join(n + ' = %s' for n in names)} WHERE id = %s"
        values = row.values()
        await self._fetch(sql, (*values[1:], values[0]), "updating")

    async def delete(self, schedule_id: str) -> bool:
        """Delete a schedule and its claims; ``False`` when it did not exist."""
        pool = await self._open()
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(f"DELETE FROM {self._t('web_schedules')} WHERE id = %s", (schedule_id,))
                gone = cur.rowcount
                await conn.execute(
                    f"DELETE FROM {self._t('web_schedule_claims')} WHERE schedule_id = %s", (schedule_id,)
                )
        except self._psycopg.Error as exc:
            raise self._error(exc, "deleting") from exc
        return bool(gone > 0)

    async def delete_for_session(self, session_id: str) -> int:
        """Delete the schedules bound to a chat (and their claims); returns how many."""
        count = 0
        for row in await self.list(session_id=session_id):
            count += await self.delete(row.id)
        return count

    async def due(self, now: float) -> Sequence[ScheduleRow]:
        """Active schedules whose ``next_fire`` is at or before ``now``."""
        sql = (
            f"SELECT {_COLUMNS} FROM {self._t('web_schedules')} "
            "WHERE active = 1 AND next_fire <= %s ORDER BY next_fire, id"
        )
        return [ScheduleRow.from_row(r) for r in await self._fetch(sql, (now,), "polling")]

    async def claim(self, row: ScheduleRow, *, slot: float, owner: str, now: float, advance: bool) -> bool:
        """Claim ``slot`` of ``row`` for ``owner`` (see :meth:`ScheduleStore.claim`)."""
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                async with conn.transaction():
                    cur = await conn.execute(
                        f"INSERT INTO {self._t('web_schedule_claims')} (schedule_id, slot, owner, claimed_at) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (row.id, slot, owner, now),
                    )
                    inserted = cur.rowcount
                    if advance:
                        cur = await conn.execute(
                            f"UPDATE {self._t('web_schedules')} SET next_fire = %s, active = %s, "
                            "finished_reason = %s, fire_count = fire_count + 1, updated_at = %s "
                            "WHERE id = %s AND next_fire = %s AND active = 1",
                            (row.next_fire, int(row.active), row.finished_reason, now, row.id, slot),
                        )
                    else:
                        cur = await conn.execute(
                            f"UPDATE {self._t('web_schedules')} SET fire_count = fire_count + 1, updated_at = %s "
                            "WHERE id = %s",
                            (now, row.id),
                        )
                    if inserted != 1 or cur.rowcount != 1:
                        raise _Lost
        except _Lost:
            return False
        except self._psycopg.Error as exc:
            if isinstance(exc, self._psycopg.errors.SerializationFailure):
                return False
            raise self._error(exc, "claiming a slot") from exc
        return True

    async def finish_claim(
        self, schedule_id: str, slot: float, *, run_id: str | None, session_id: str | None, error: str | None
    ) -> None:
        """Record what a claimed slot started (or why it could not start)."""
        pool = await self._open()
        stamp = time.time()
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(
                    f"UPDATE {self._t('web_schedule_claims')} SET fired_at = %s, run_id = %s, session_id = %s, "
                    "error = %s WHERE schedule_id = %s AND slot = %s",
                    (stamp, run_id, session_id, error, schedule_id, slot),
                )
                await conn.execute(
                    f"UPDATE {self._t('web_schedules')} SET last_run_id = %s, "
                    "last_session_id = COALESCE(%s, last_session_id), last_error = %s, updated_at = %s WHERE id = %s",
                    (run_id, session_id, error, stamp, schedule_id),
                )
        except self._psycopg.Error as exc:
            raise self._error(exc, "recording a fire") from exc

    async def reclaim(self, *, owner: str, older_than: float, now: float) -> Sequence[ScheduleClaim]:
        """Take over claims never marked fired and claimed before ``older_than``."""
        sql = (
            f"UPDATE {self._t('web_schedule_claims')} SET owner = %s, claimed_at = %s "
            "WHERE fired_at IS NULL AND claimed_at < %s "
            f"RETURNING {_CLAIM_COLUMNS}"
        )
        return [ScheduleClaim.from_row(r) for r in await self._fetch(sql, (owner, now, older_than), "reclaiming")]

    async def claims(self, schedule_id: str, *, limit: int = 50) -> Sequence[ScheduleClaim]:
        """A schedule's fire history, newest first."""
        sql = (
            f"SELECT {_CLAIM_COLUMNS} FROM {self._t('web_schedule_claims')} WHERE schedule_id = %s "
            "ORDER BY claimed_at DESC LIMIT %s"
        )
        return [ScheduleClaim.from_row(r) for r in await self._fetch(sql, (schedule_id, limit), "listing fires")]

    async def close(self) -> None:
        """Close the pool."""
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


class _Lost(Exception):
    """Raised inside a claim transaction to roll it back: another process has the slot."""


def open_schedule_store(database: str | os.PathLike[str], **options: Any) -> ScheduleStore:
    """The schedule store for a database: PostgreSQL for a ``postgresql://`` URL, else a SQLite file.

    Args:
        database: ``postgresql://...`` / ``postgres://...``, or a SQLite file path.
        options: passed to :class:`PostgresScheduleStore` (``schema=``, ``table_prefix=``).
    """
    text = os.fspath(database)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresScheduleStore(text, **options)
    return SQLiteScheduleStore(text)
