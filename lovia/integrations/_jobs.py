"""Internal: the job book, one row per submitted run, next to the run's checkpoint.

A Celery message carries only a ``run_id``; what to run (the agent's registry name, the input, the
session) is read from this book, so any process (a redelivered message, the sweeper, an operator)
can re-issue a run from its id alone. Rows are written once on submit and then only change state:
``pending`` until a worker finishes the run, then ``done`` or ``failed``.

The book lives in the same database as the stores: a table ``lovia_celery_jobs`` in the SQLite
file, or in the PostgreSQL schema. Calls are synchronous (producers are often synchronous code and
the worker calls them outside its event loop); each process keeps one connection.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ..exceptions import StoreError, UserError

__all__ = ["Job", "JobBook", "open_book"]

_TABLE = "lovia_celery_jobs"
_COLUMNS = "run_id, agent, input_json, session_id, state, submitted_at, enqueued_at, enqueues, deliveries, finished_at"


@dataclass(frozen=True, slots=True)
class Job:
    """One submitted run as the book records it."""

    run_id: str
    agent: str
    """The worker's registry name of the entry agent."""
    input: Any
    session_id: str | None
    state: str
    """``pending``, ``done`` or ``failed``."""
    submitted_at: float
    enqueued_at: float
    """When a message for it was last published (submit or sweep)."""
    enqueues: int
    """Messages published for it: 1 on submit, +1 per sweep that re-enqueued it."""
    deliveries: int
    """Times a worker started it (redeliveries and retries included)."""
    finished_at: float | None


def _job(row: Any) -> Job:
    run_id, agent, input_json, session_id, state, submitted, enqueued, enqueues, deliveries, finished = row
    return Job(
        run_id=str(run_id),
        agent=str(agent),
        input=json.loads(input_json),
        session_id=session_id,
        state=str(state),
        submitted_at=float(submitted),
        enqueued_at=float(enqueued),
        enqueues=int(enqueues),
        deliveries=int(deliveries),
        finished_at=None if finished is None else float(finished),
    )


class JobBook(Protocol):
    """What the Celery integration needs from the book (SQLite and PostgreSQL implement it)."""

    def add(self, run_id: str, agent: str, input: Any, session_id: str | None) -> bool:
        """Record a new job; ``False`` (nothing changed) when ``run_id`` is already booked."""
        ...

    def get(self, run_id: str) -> Job | None:
        """The job, or ``None``."""
        ...

    def delivered(self, run_id: str) -> None:
        """A worker is starting the job."""
        ...

    def finish(self, run_id: str, state: str) -> None:
        """Mark the job ``done`` or ``failed``."""
        ...

    def stale(self, *, quiet_for: float, limit: int) -> list[Job]:
        """Pending jobs with no publish and no delivery in the last ``quiet_for`` seconds."""
        ...

    def requeued(self, run_id: str) -> None:
        """A sweep published the job again."""
        ...

    def jobs(self) -> list[Job]:
        """Every job, oldest first (for inspection and tests)."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...


class SQLiteBook:
    """The book in a SQLite file (WAL, shared with the stores)."""

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        self._lock = threading.Lock()
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA busy_timeout = 30000")
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, "
            "input_json TEXT NOT NULL, session_id TEXT, state TEXT NOT NULL, submitted_at REAL NOT NULL, "
            "enqueued_at REAL NOT NULL, enqueues INTEGER NOT NULL, deliveries INTEGER NOT NULL DEFAULT 0, "
            "finished_at REAL)"
        )

    def _do(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            with self._lock:
                cur = self._conn.execute(sql, params)
                return cur.fetchall() if cur.description else [cur.rowcount]
        except sqlite3.Error as exc:
            raise StoreError(f"celery job book: SQLite error: {exc}", hint="check the database file") from exc

    def add(self, run_id: str, agent: str, input: Any, session_id: str | None) -> bool:
        now = time.time()
        (count,) = self._do(
            f"INSERT INTO {_TABLE} (run_id, agent, input_json, session_id, state, submitted_at, enqueued_at, enqueues) "
            "VALUES (?, ?, ?, ?, 'pending', ?, ?, 1) ON CONFLICT (run_id) DO NOTHING",
            (run_id, agent, json.dumps(input), session_id, now, now),
        )
        return bool(count)

    def get(self, run_id: str) -> Job | None:
        rows = self._do(f"SELECT {_COLUMNS} FROM {_TABLE} WHERE run_id = ?", (run_id,))
        return _job(rows[0]) if rows else None

    def delivered(self, run_id: str) -> None:
        self._do(
            f"UPDATE {_TABLE} SET deliveries = deliveries + 1, enqueued_at = ? WHERE run_id = ?", (time.time(), run_id)
        )

    def finish(self, run_id: str, state: str) -> None:
        self._do(
            f"UPDATE {_TABLE} SET state = ?, finished_at = ? WHERE run_id = ? AND state = 'pending'",
            (state, time.time(), run_id),
        )

    def stale(self, *, quiet_for: float, limit: int) -> list[Job]:
        rows = self._do(
            f"SELECT {_COLUMNS} FROM {_TABLE} WHERE state = 'pending' AND enqueued_at < ? ORDER BY enqueued_at LIMIT ?",
            (time.time() - quiet_for, limit),
        )
        return [_job(r) for r in rows]

    def requeued(self, run_id: str) -> None:
        self._do(
            f"UPDATE {_TABLE} SET enqueues = enqueues + 1, enqueued_at = ? WHERE run_id = ?", (time.time(), run_id)
        )

    def jobs(self) -> list[Job]:
        return [_job(r) for r in self._do(f"SELECT {_COLUMNS} FROM {_TABLE} ORDER BY submitted_at, run_id")]

    def close(self) -> None:
        self._conn.close()


class PostgresBook:
    """The book in PostgreSQL (times from the database clock, like the leases)."""

    _NOW = "extract(epoch from clock_timestamp())::double precision"

    def __init__(self, dsn: str, *, schema: str | None) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the postgres extra is what brings the stores too
            raise UserError(
                "the PostgreSQL job book needs psycopg", hint="pip install 'lovia[celery,postgres]'"
            ) from exc
        self._psycopg = psycopg
        self._dsn = dsn
        self._table = f'"{schema}".{_TABLE}' if schema else _TABLE
        self._schema = schema
        self._lock = threading.Lock()
        self._conn: Any = None

    def _connect(self) -> Any:
        conn = self._psycopg.connect(self._dsn, autocommit=True)
        with conn.transaction():
            # Workers start together: serialise the DDL (CREATE ... IF NOT EXISTS still races in PostgreSQL).
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('lovia-celery-jobs'))")
            if self._schema:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} (run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, "
                "input_json TEXT NOT NULL, session_id TEXT, state TEXT NOT NULL, "
                "submitted_at DOUBLE PRECISION NOT NULL, enqueued_at DOUBLE PRECISION NOT NULL, "
                "enqueues INTEGER NOT NULL, deliveries INTEGER NOT NULL DEFAULT 0, finished_at DOUBLE PRECISION)"
            )
        return conn

    def _do(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            with self._lock:
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                cur = self._conn.execute(sql.replace("{t}", self._table).replace("{now}", self._NOW), params)
                return cur.fetchall() if cur.description else [cur.rowcount]
        except self._psycopg.Error as exc:
            if self._conn is not None and self._conn.broken:
                self._conn = None
            detail = " ".join(str(exc).split())
            raise StoreError(
                f"celery job book: PostgreSQL error: {detail}", hint="check that the server is reachable and the DSN"
            ) from exc

    def add(self, run_id: str, agent: str, input: Any, session_id: str | None) -> bool:
        (count,) = self._do(
            "INSERT INTO {t} (run_id, agent, input_json, session_id, state, submitted_at, enqueued_at, enqueues) "
            "VALUES (%s, %s, %s, %s, 'pending', {now}, {now}, 1) ON CONFLICT (run_id) DO NOTHING",
            (run_id, agent, json.dumps(input), session_id),
        )
        return bool(count)

    def get(self, run_id: str) -> Job | None:
        rows = self._do(f"SELECT {_COLUMNS} FROM {{t}} WHERE run_id = %s", (run_id,))
        return _job(rows[0]) if rows else None

    def delivered(self, run_id: str) -> None:
        self._do("UPDATE {t} SET deliveries = deliveries + 1, enqueued_at = {now} WHERE run_id = %s", (run_id,))

    def finish(self, run_id: str, state: str) -> None:
        self._do(
            "UPDATE {t} SET state = %s, finished_at = {now} WHERE run_id = %s AND state = 'pending'", (state, run_id)
        )

    def stale(self, *, quiet_for: float, limit: int) -> list[Job]:
        rows = self._do(
            f"SELECT {_COLUMNS} FROM {{t}} WHERE state = 'pending' AND enqueued_at < {{now}} - %s "
            "ORDER BY enqueued_at LIMIT %s",
            (quiet_for, limit),
        )
        return [_job(r) for r in rows]

    def requeued(self, run_id: str) -> None:
        self._do("UPDATE {t} SET enqueues = enqueues + 1, enqueued_at = {now} WHERE run_id = %s", (run_id,))

    def jobs(self) -> list[Job]:
        return [_job(r) for r in self._do(f"SELECT {_COLUMNS} FROM {{t}} ORDER BY submitted_at, run_id")]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def is_postgres(db: str) -> bool:
    """Whether ``db`` is a PostgreSQL URL rather than a SQLite path."""
    return db.startswith(("postgresql://", "postgres://"))


def open_book(db: str, *, schema: str | None) -> JobBook:
    """The job book for ``db`` (a PostgreSQL URL or a SQLite file path)."""
    return PostgresBook(db, schema=schema) if is_postgres(db) else SQLiteBook(db)
