"""The Celery app the integration tests start real workers with (configured by environment).

``LOVIA_TEST_BROKER``: the test's own redis-server; ``LOVIA_TEST_DB`` + ``LOVIA_TEST_SCHEMA``: the
PostgreSQL database and the test's schema. The agent makes three tool calls; the tool records
every attempt and applies its side effect once per idempotency key, in tables of that schema, so
the test can count what ran. A ``task_success`` handler records each delivery that returned, and
whether it was a replay.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from typing import Any

from celery import Celery
from celery.signals import task_success

from lovia import Agent, RunContext, tool
from lovia.integrations.celery import CeleryRuns
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry

BROKER = os.environ.get("LOVIA_TEST_BROKER", "redis://127.0.0.1:6399/0")
DB = os.environ.get("LOVIA_TEST_DB", "postgresql://postgres@127.0.0.1:5432/test")
SCHEMA = os.environ.get("LOVIA_TEST_SCHEMA") or None
STEP_DELAY = float(os.environ.get("LOVIA_TEST_STEP_DELAY", "0.02"))
CALLS = 3

EFFECT_TABLES = (
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, run_id TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS attempts (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, key TEXT NOT NULL, "
    "pid INT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS completions (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, "
    "replayed BOOLEAN NOT NULL)",
)

app = Celery("lovia_test", broker=BROKER, backend=BROKER)
app.conf.update(
    broker_transport_options={"visibility_timeout": float(os.environ.get("LOVIA_TEST_VISIBILITY", "6"))},
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


class Effects:
    """One connection per worker process to the test's effect tables (calls serialised by a lock)."""

    def __init__(self) -> None:
        import psycopg

        opts = f"-c search_path={SCHEMA}" if SCHEMA else ""
        self.conn = psycopg.connect(DB, autocommit=True, options=opts)
        self.lock = threading.Lock()

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        with self.lock:
            self.conn.execute(sql, params)

    def close(self) -> None:
        self.conn.close()


@tool
async def charge(ctx: RunContext[Any], step: int) -> str:
    """Apply step ``step`` of the job: recorded as an attempt, applied once per idempotency key."""
    effects, key, run_id = ctx.deps, ctx.idempotency_key or "", ctx.run_id or ""
    await asyncio.to_thread(
        effects.execute, "INSERT INTO attempts (run_id, key, pid) VALUES (%s, %s, %s)", (run_id, key, os.getpid())
    )
    await asyncio.sleep(random.uniform(0, STEP_DELAY))  # a kill here: attempted, not applied
    await asyncio.to_thread(
        effects.execute, "INSERT INTO effects (key, run_id) VALUES (%s, %s) ON CONFLICT DO NOTHING", (key, run_id)
    )
    await asyncio.sleep(random.uniform(0, STEP_DELAY))  # a kill here: applied, result not saved
    return f"step {step} applied"


def _turn(entries: list[Any], tools: Any) -> Any:
    done = sum(isinstance(e, ToolResultEntry) for e in entries)
    if done < CALLS:
        return call("charge", {"step": done}, call_id=f"c{done}")
    job = next(str(e.text) for e in entries if isinstance(e, InputEntry) and e.role == "user")
    return text(f"{job}: done")


worker_agent = Agent(name="worker", instructions="Do the job.", model=ScriptedProvider(_turn), tools=[charge])

runs = CeleryRuns(
    app,
    db=DB,
    schema=SCHEMA,
    agents={"worker": "tests.integrations.celery_app:worker_agent"},
    lease_ttl=float(os.environ.get("LOVIA_TEST_LEASE_TTL", "2")),
    deps=Effects,
    sweep_every=None,
    sweep_after=float(os.environ.get("LOVIA_TEST_SWEEP_AFTER", "30")),
    pool_size=2,
)


@task_success.connect
def _record_completion(sender: Any = None, result: Any = None, **_: Any) -> None:
    if sender is not None and sender.name == "lovia.run" and isinstance(result, dict):
        runs.process().deps.execute(
            "INSERT INTO completions (run_id, replayed) VALUES (%s, %s)", (result["run_id"], bool(result["replayed"]))
        )
