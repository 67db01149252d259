"""A soak worker process: take jobs from a shared queue, run each as a leased, checkpointed run.

``python -m tests.soak.soak_worker <backend> <location> <name>`` with backend ``sqlite`` (location:
the database file, queue in the same file) or ``postgres`` (location: ``"<schema>|<dsn>"``, queue
in that schema). The queue hands a job out with ``FOR UPDATE SKIP LOCKED`` (PostgreSQL) or under
``BEGIN IMMEDIATE`` (SQLite); a job taken by a worker that died is handed out again once its
visibility timeout passes. The parent SIGKILLs workers at random; the runs' checkpoints, leases and
the tool's idempotency key must still make every job complete exactly once.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import time
from typing import Any

from lovia import Agent, CheckpointOptions, RunContext, Runner, tool
from lovia.exceptions import LeaseLostError, RunBusy
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry

LEASE_TTL = 1.0
RETAKE_AFTER = 1.5  # seconds a taken job stays hidden from other workers

SQLITE_QUEUE = (
    "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL DEFAULT 'queued', "
    "taken_at REAL NOT NULL DEFAULT 0, takes INTEGER NOT NULL DEFAULT 0, completions INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, job INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, job INTEGER NOT NULL, "
    "key TEXT NOT NULL)",
)
PG_QUEUE = (
    "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL DEFAULT 'queued', "
    "taken_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity', takes INTEGER NOT NULL DEFAULT 0, "
    "completions INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, job INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS attempts (id BIGSERIAL PRIMARY KEY, job INTEGER NOT NULL, key TEXT NOT NULL)",
)


class SQLiteQueue:
    """The job queue and effect tables in the soak's SQLite file (every call in a thread)."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        self.conn.execute("PRAGMA busy_timeout = 30000")

    def _claim(self) -> int | None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            row = self.conn.execute(
                "SELECT id FROM jobs WHERE state = 'queued' OR (state = 'taken' AND taken_at < ?) ORDER BY id LIMIT 1",
                (time.time() - RETAKE_AFTER,),
            ).fetchone()
            if row is not None:
                self.conn.execute(
                    "UPDATE jobs SET state = 'taken', taken_at = ?, takes = takes + 1 WHERE id = ?",
                    (time.time(), row[0]),
                )
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()
        return int(row[0]) if row else None

    async def claim(self) -> int | None:
        return await asyncio.to_thread(self._claim)

    async def remaining(self) -> int:
        return await asyncio.to_thread(
            lambda: int(self.conn.execute("SELECT count(*) FROM jobs WHERE state != 'done'").fetchone()[0])
        )

    async def done(self, job: int) -> None:
        await asyncio.to_thread(
            self.conn.execute, "UPDATE jobs SET state = 'done', completions = completions + 1 WHERE id = ?", (job,)
        )

    async def attempt(self, job: int, key: str) -> None:
        await asyncio.to_thread(self.conn.execute, "INSERT INTO attempts (job, key) VALUES (?, ?)", (job, key))

    async def apply(self, job: int, key: str) -> None:
        await asyncio.to_thread(
            self.conn.execute, "INSERT INTO effects (key, job) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, job)
        )


class PostgresQueue:
    """The job queue and effect tables in the soak's PostgreSQL schema."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, dsn: str, schema: str) -> PostgresQueue:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, options=f"-c search_path={schema}")
        return cls(conn)

    async def claim(self) -> int | None:
        cur = await self.conn.execute(
            "UPDATE jobs SET state = 'taken', taken_at = now(), takes = takes + 1 WHERE id = ("
            "SELECT id FROM jobs WHERE state = 'queued' OR (state = 'taken' AND taken_at < now() - %s * "
            "interval '1 second') "
            "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
            (RETAKE_AFTER,),
        )
        row = await cur.fetchone()
        return int(row[0]) if row else None

    async def remaining(self) -> int:
        cur = await self.conn.execute("SELECT count(*) FROM jobs WHERE state != 'done'")
        row = await cur.fetchone()
        return int(row[0])

    async def done(self, job: int) -> None:
        await self.conn.execute("UPDATE jobs SET state = 'done', completions = completions + 1 WHERE id = %s", (job,))

    async def attempt(self, job: int, key: str) -> None:
        await self.conn.execute("INSERT INTO attempts (job, key) VALUES (%s, %s)", (job, key))

    async def apply(self, job: int, key: str) -> None:
        await self.conn.execute(
            "INSERT INTO effects (key, job) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", (key, job)
        )


@tool
async def charge(ctx: RunContext[Any], job: int) -> str:
    """Apply the job's one side effect, keyed by the call's idempotency key."""
    queue, key = ctx.deps, ctx.idempotency_key or ""
    await queue.attempt(job, key)
    await asyncio.sleep(random.uniform(0, 0.02))  # a kill here: effect not applied yet
    await queue.apply(job, key)
    await asyncio.sleep(random.uniform(0, 0.02))  # a kill here: applied, result not saved
    return f"charged job {job}"


def _turn(entries: list[Any], tools: Any) -> Any:
    job = next(int(str(e.text).split()[-1]) for e in entries if isinstance(e, InputEntry) and e.role == "user")
    if not any(isinstance(e, ToolResultEntry) for e in entries):
        return call("charge", {"job": job}, call_id="c-charge")
    return text(f"job {job} complete")


def open_stores(backend: str, location: str) -> tuple[Any, Any]:
    """The session and checkpointer of the soak."""
    if backend == "sqlite":
        from lovia.stores import SQLiteCheckpointer, SQLiteSession

        return SQLiteSession(location, wal=True), SQLiteCheckpointer(location, wal=True)
    from lovia.stores import PostgresCheckpointer, PostgresSession

    schema, _, dsn = location.partition("|")
    return PostgresSession(dsn, schema=schema, max_size=2), PostgresCheckpointer(dsn, schema=schema, max_size=3)


async def work(backend: str, location: str) -> None:
    """Take jobs until every job is done."""
    if backend == "sqlite":
        queue: Any = SQLiteQueue(location)
    else:
        schema, _, dsn = location.partition("|")
        queue = await PostgresQueue.connect(dsn, schema)
    session, checkpointer = open_stores(backend, location)
    agent = Agent(name="soak", instructions="Do the job.", model=ScriptedProvider(_turn), tools=[charge])
    while True:
        job = await queue.claim()
        if job is None:
            if await queue.remaining() == 0:
                return
            await asyncio.sleep(0.05)
            continue
        run_id = f"job-{job}"
        try:
            await Runner.run(
                agent,
                f"Do job {job}",
                deps=queue,
                session=session,
                session_id=run_id,
                checkpoint=CheckpointOptions(checkpointer, run_id, lease_ttl=LEASE_TTL),
            )
        except (RunBusy, LeaseLostError):
            continue  # another worker drives it; the job stays taken until its timeout
        await queue.done(job)


if __name__ == "__main__":
    asyncio.run(work(sys.argv[1], sys.argv[2]))
