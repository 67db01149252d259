"""Checkpoint growth benchmark: one 1,000-step run saved after every step (1 KB tool result each).

Reports the mean save time of the last 100 steps against the first 100 (target <= 1.3x: a save
costs O(new entries)), the file size along the way (should grow linearly), and one save against a
bare ``sqlite3`` INSERT + COMMIT of the same bytes on a connection with the same pragmas
(target <= 1.5x)::

    .venv/bin/python bench/checkpoint_growth.py [folder]
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lovia.checkpointer import RunHead  # noqa: E402
from lovia.messages import Usage  # noqa: E402
from lovia.stores import SQLiteCheckpointer  # noqa: E402
from lovia.stores._codec import encode_entries  # noqa: E402
from lovia.stores.sqlite._db import configure  # noqa: E402
from lovia.transcript import ToolResultEntry  # noqa: E402

STEPS = 1_000
PAYLOAD = ("0123456789abcdef" * 64)[:1024]


def step_entries(n: int) -> list[ToolResultEntry]:
    return [ToolResultEntry(call_id=f"call_{n}", output=PAYLOAD)]


def head(n: int) -> RunHead:
    return RunHead(agent_name="worker", usage=Usage(input_tokens=n * 100, output_tokens=n * 10), turns=n)


def fold_wal(path: Path) -> None:
    """Fold the WAL into the main file so the size is the data's, not the log's (retrying while
    the store's own background checkpoint holds the checkpoint lock)."""
    with sqlite3.connect(path) as probe:
        while probe.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            time.sleep(0.001)


async def run_growth(path: Path, wal: bool) -> tuple[list[float], list[tuple[int, int]]]:
    times: list[float] = []
    sizes: list[tuple[int, int]] = []
    async with SQLiteCheckpointer(path, wal=wal) as cp:
        await cp.load("run-1")  # open and create the file first: the first step should not pay for it
        for n in range(STEPS):
            entries, step_head = step_entries(n), head(n)  # what the run loop hands over, built untimed
            t0 = time.perf_counter()
            await cp.append("run-1", entries, step_head)
            times.append(time.perf_counter() - t0)
            if (n + 1) % 250 == 0:
                if wal:
                    fold_wal(path)
                sizes.append((n + 1, path.stat().st_size))
        snap = await cp.load("run-1")
        assert snap is not None and len(snap.entries) == STEPS
    return times, sizes


def bare_insert(path: Path, wal: bool, samples: int = 200) -> float:
    """Median seconds of a bare INSERT of one batch + head upsert bytes, with commit."""
    conn = sqlite3.connect(path, isolation_level=None)
    configure(conn, wal=wal)
    conn.execute("CREATE TABLE t (run_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (run_id, seq))")
    batch, head_json = encode_entries(step_entries(0)), head(0).to_json()
    times = []
    for n in range(samples):
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", ("run-1", n, batch + head_json))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t0)
    conn.close()
    return statistics.median(times)


async def bare_insert_via_thread(path: Path, wal: bool, samples: int = 200) -> float:
    """The bare insert again, but hopped onto one worker thread as the store does (the loop never blocks)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    loop = asyncio.get_running_loop()
    conn = await loop.run_in_executor(pool, lambda: sqlite3.connect(path, isolation_level=None))
    await loop.run_in_executor(pool, lambda: configure(conn, wal=wal))
    await loop.run_in_executor(
        pool, lambda: conn.execute("CREATE TABLE t (run_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (run_id, seq))")
    )
    body = encode_entries(step_entries(0)) + head(0).to_json()

    def insert(n: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", ("run-1", n, body))
        conn.execute("COMMIT")

    times = []
    for n in range(samples):
        t0 = time.perf_counter()
        await loop.run_in_executor(pool, insert, n)
        times.append(time.perf_counter() - t0)
    await loop.run_in_executor(pool, conn.close)
    pool.shutdown()
    return statistics.median(times)


async def main() -> None:
    with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else None) as tmp:
        for wal in (True, False):
            times, sizes = await run_growth(Path(tmp) / f"growth-{wal}.db", wal)
            first, last = statistics.mean(times[:100]), statistics.mean(times[-100:])
            bare = bare_insert(Path(tmp) / f"bare-{wal}.db", wal)
            one = statistics.median(times)
            print(
                f"wal={wal}: mean save first 100 = {first * 1e3:.3f} ms, last 100 = {last * 1e3:.3f} ms, ratio "
                f"{last / first:.2f}x (target <= 1.3x)"
            )
            per_step = [size / steps for steps, size in sizes]
            print(
                "  file size: "
                + ", ".join(f"{steps} steps {size / 1024:.0f} KiB" for steps, size in sizes)
                + f"  (bytes/step {min(per_step):.0f}..{max(per_step):.0f})"
            )
            hop = await bare_insert_via_thread(Path(tmp) / f"hop-{wal}.db", wal)
            print(
                f"  median save {one * 1e3:.3f} ms vs bare sqlite3 insert+commit {bare * 1e3:.3f} ms: "
                f"{one / bare:.2f}x (target <= 1.5x)"
            )
            print(
                f"  same bare insert hopped onto a worker thread {hop * 1e3:.3f} ms: save is {one / hop:.2f}x of that"
            )
        print(f"(folder {tmp}, fs of {os.path.abspath(tmp)})")


if __name__ == "__main__":
    asyncio.run(main())
