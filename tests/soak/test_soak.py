"""Soak: worker processes drain a shared job queue while being SIGKILLed at random.

Default: 4 workers, 200 jobs, up to 12 kills, on SQLite-WAL (one host) and PostgreSQL. Bigger:
``LOVIA_SOAK_JOBS=2000 LOVIA_SOAK_WORKERS=8 LOVIA_SOAK_KILLS=60 pytest tests/soak -s``.
Jobs per second (kills and recovery included) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lovia.transcript import ToolCallEntry, ToolResultEntry
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

from .soak_worker import PG_QUEUE, SQLITE_QUEUE, open_stores

JOBS = int(os.environ.get("LOVIA_SOAK_JOBS", "200"))
WORKERS = int(os.environ.get("LOVIA_SOAK_WORKERS", "4"))
KILLS = int(os.environ.get("LOVIA_SOAK_KILLS", "12"))
DEADLINE = float(os.environ.get("LOVIA_SOAK_TIMEOUT", "120"))
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


@dataclass
class Counts:
    done: int
    takes: int
    completions: int
    applied: int
    attempts: int
    over_applied: int


def spawn(backend: str, location: str, name: str, logs: Path) -> subprocess.Popen[bytes]:
    with open(logs / f"{name}.log", "ab") as log:  # a file, not a pipe: a chatty worker never blocks
        return subprocess.Popen(
            [sys.executable, "-m", "tests.soak.soak_worker", backend, location, name],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def tail(logs: Path, name: str) -> str:
    return (logs / f"{name}.log").read_text(errors="replace")[-3000:]


def drive(backend: str, location: str, remaining, logs: Path) -> tuple[float, int]:
    """Run the workers, SIGKILL and restart them at random; return (seconds, kills)."""
    rng = random.Random(7)
    started = time.monotonic()
    procs = {f"w{i}": spawn(backend, location, f"w{i}", logs) for i in range(WORKERS)}
    born = dict.fromkeys(procs, started)
    kills = 0
    try:
        while remaining() > 0:
            assert time.monotonic() - started < DEADLINE, f"soak did not finish: {remaining()} jobs left"
            time.sleep(rng.uniform(0.2, 0.6))
            # Only workers past start-up (about 0.7 s of imports) hold jobs: kill one of those.
            ripe = sorted(n for n, t in born.items() if time.monotonic() - t > 1.2)
            if kills < KILLS and ripe and remaining() > JOBS // 10:
                name = rng.choice(ripe)
                procs[name].send_signal(signal.SIGKILL)
                procs[name].wait()
                kills += 1
                procs[name], born[name] = spawn(backend, location, name, logs), time.monotonic()
            for name, proc in procs.items():
                if proc.poll() not in (None, 0, -signal.SIGKILL):
                    raise AssertionError(f"worker {name} failed: {tail(logs, name)}")
        elapsed = time.monotonic() - started
        for name, proc in procs.items():
            proc.wait(timeout=30)
            assert proc.returncode in (0, -signal.SIGKILL), tail(logs, name)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return elapsed, kills


async def check_runs(backend: str, location: str) -> None:
    """Every job is one completed checkpoint and exactly one tool-consistent session segment."""
    session, checkpointer = open_stores(backend, location)
    try:
        for job in range(1, JOBS + 1):
            run_id = f"job-{job}"
            segments = await session.segments(run_id)
            assert [s.run_id for s in segments] == [run_id], (run_id, [s.run_id for s in segments])
            entries = segments[0].entries
            calls = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
            results = [e.call_id for e in entries if isinstance(e, ToolResultEntry)]
            assert calls == results == ["c-charge"], (run_id, entries)
            snap = await checkpointer.load(run_id)
            assert snap is not None and snap.status == "completed" and snap.output == f"job {job} complete"
    finally:
        await session.close()
        await checkpointer.close()


def report(label: str, elapsed: float, kills: int, counts: Counts) -> None:
    print(
        f"\nsoak[{label}]: {JOBS} jobs, {WORKERS} workers, {kills} SIGKILLs in {elapsed:.1f}s = "
        f"{JOBS / elapsed:.1f} jobs/s; takes {counts.takes}, completions marked {counts.completions}, "
        f"effect attempts {counts.attempts}, applied {counts.applied}"
    )


def assert_counts(counts: Counts, kills: int) -> None:
    assert counts.done == JOBS
    assert counts.applied == JOBS and counts.over_applied == 0, counts
    assert counts.attempts >= counts.applied
    assert counts.completions >= JOBS


async def test_soak_sqlite_wal(tmp_path):
    path = str(tmp_path / "soak.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in SQLITE_QUEUE:
        conn.execute(statement)
    conn.executemany("INSERT INTO jobs (id) VALUES (?)", [(i,) for i in range(1, JOBS + 1)])

    def remaining() -> int:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE state != 'done'").fetchone()[0])

    elapsed, kills = drive("sqlite", path, remaining, tmp_path)
    row = conn.execute(
        "SELECT (SELECT count(*) FROM jobs WHERE state = 'done'), (SELECT sum(takes) FROM jobs), "
        "(SELECT sum(completions) FROM jobs), (SELECT count(*) FROM effects), (SELECT count(*) FROM attempts), "
        "(SELECT count(*) FROM (SELECT job FROM effects GROUP BY job HAVING count(*) > 1))"
    ).fetchone()
    conn.close()
    counts = Counts(*row)
    report("sqlite-wal", elapsed, kills, counts)
    assert_counts(counts, kills)
    await check_runs("sqlite", path)


@pytest.mark.postgres
async def test_soak_postgres(tmp_path):
    if UNREACHABLE:
        pytest.skip(UNREACHABLE)
    import psycopg

    schema = new_schema("soak")
    location = f"{schema}|{DSN}"
    conn = psycopg.connect(DSN, autocommit=True)
    try:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path = "{schema}"')
        for statement in PG_QUEUE:
            conn.execute(statement)
        conn.execute("INSERT INTO jobs (id) SELECT generate_series(1, %s)", (JOBS,))

        def remaining() -> int:
            return int(conn.execute("SELECT count(*) FROM jobs WHERE state != 'done'").fetchone()[0])

        elapsed, kills = drive("postgres", location, remaining, tmp_path)
        row = conn.execute(
            "SELECT (SELECT count(*) FROM jobs WHERE state = 'done'), (SELECT sum(takes) FROM jobs), "
            "(SELECT sum(completions) FROM jobs), (SELECT count(*) FROM effects), (SELECT count(*) FROM attempts), "
            "(SELECT count(*) FROM (SELECT job FROM effects GROUP BY job HAVING count(*) > 1) AS dup)"
        ).fetchone()
        counts = Counts(*(int(v) for v in row))
        report("postgres", elapsed, kills, counts)
        assert_counts(counts, kills)
        await check_runs("postgres", location)
    finally:
        conn.close()
        drop_schema(schema)
