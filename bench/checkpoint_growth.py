"""Checkpoint save benchmark: one 1,000-step run saved after every step (1 KB tool result each).

Each step's save through ``SQLiteCheckpointer.append`` is followed, in the same run, by a bare
``sqlite3`` INSERT + COMMIT of the same bytes (the step's encoded entries plus its head) on a
second file whose connection has the same pragmas: the journal's own cost, taken moments apart
from the save it is compared with, so a busy moment of a shared machine hits both alike.

Printed per journal mode (default journal, then ``wal=True``):

* the median save and the median bare insert + commit, their ratio, and the median of the
  step-by-step ratios (target for the default journal: at most 1.25x, both);
* the median save of the last 100 steps against the first 100 (target at most 1.3x: a save costs
  O(new entries), so it stays flat); means are printed too, but fsync stalls of a shared disk
  make them noisy;
* the file size every 250 steps (it should grow linearly).

A PASS or MISS line ends each mode's block (only the default journal carries targets)::

    .venv/bin/python bench/checkpoint_growth.py [--steps N] [folder]

``run_all.py`` runs :func:`measure` as workload 7.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
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
SAVE_LIMIT = 1.25
"""Default journal: a save at most the bare insert + commit of the same bytes plus 25%."""
FLAT_LIMIT = 1.3
"""Median save of the last 100 steps at most 1.3x the first 100's."""


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


def bare_connection(path: Path, wal: bool) -> sqlite3.Connection:
    """A plain connection with the store's pragmas and a one-table schema for the bare inserts."""
    conn = sqlite3.connect(path, isolation_level=None)
    configure(conn, wal=wal)
    conn.execute("CREATE TABLE t (run_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (run_id, seq))")
    return conn


def bare_insert(conn: sqlite3.Connection, n: int, body: str) -> float:
    """Seconds for one INSERT of ``body`` with its commit."""
    t0 = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (?, ?, ?)", ("run-1", n, body))
    conn.execute("COMMIT")
    return time.perf_counter() - t0


@dataclass
class Figures:
    wal: bool
    saves: list[float] = field(default_factory=list)
    """Seconds of each step's save, in order."""
    bare: list[float] = field(default_factory=list)
    """Seconds of the bare insert + commit that followed each save."""
    sizes: list[tuple[int, int]] = field(default_factory=list)
    """(steps so far, database bytes) every 250 steps."""

    @property
    def save(self) -> float:
        return statistics.median(self.saves)

    @property
    def bare_median(self) -> float:
        return statistics.median(self.bare)

    @property
    def ratio(self) -> float:
        """Median save / median bare insert + commit."""
        return self.save / self.bare_median

    @property
    def paired(self) -> float:
        """Median of the step-by-step ratios save / the bare insert + commit right after it."""
        return statistics.median(a / b for a, b in zip(self.saves, self.bare, strict=True))

    @property
    def growth(self) -> float:
        """Median save of the last tenth of the steps (at most 100) over the first tenth's."""
        w = min(100, max(1, len(self.saves) // 10))
        return statistics.median(self.saves[-w:]) / statistics.median(self.saves[:w])


async def measure(folder: Path, *, wal: bool, steps: int = STEPS) -> Figures:
    """One ``steps``-step run on ``SQLiteCheckpointer(wal=wal)``, each save followed by the bare
    insert + commit of the same bytes on a file of its own."""
    figures = Figures(wal)
    path = folder / f"growth-{wal}.db"
    bare = bare_connection(folder / f"bare-{wal}.db", wal)
    try:
        async with SQLiteCheckpointer(path, wal=wal) as cp:
            await cp.load("run-1")  # open and create the file first: the first step should not pay for it
            for n in range(steps):
                entries, step_head = step_entries(n), head(n)  # what the run loop hands over, built untimed
                t0 = time.perf_counter()
                await cp.append("run-1", entries, step_head)
                figures.saves.append(time.perf_counter() - t0)
                figures.bare.append(bare_insert(bare, n, encode_entries(entries) + step_head.to_json()))
                if (n + 1) % 250 == 0:
                    if wal:
                        fold_wal(path)
                    figures.sizes.append((n + 1, path.stat().st_size))
            snap = await cp.load("run-1")
            assert snap is not None and len(snap.entries) == steps
    finally:
        bare.close()
    return figures


def verdicts(f: Figures) -> list[tuple[str, float, float]]:
    """(name, value, limit) of the targets: the default journal only."""
    if f.wal:
        return []
    return [
        ("save / bare insert + commit (medians)", f.ratio, SAVE_LIMIT),
        ("save / bare insert + commit (median of step-by-step ratios)", f.paired, SAVE_LIMIT),
        ("last 100 / first 100 steps (medians)", f.growth, FLAT_LIMIT),
    ]


def report(f: Figures) -> list[str]:
    w = min(100, max(1, len(f.saves) // 10))
    lines = [
        f"wal={f.wal}, {len(f.saves):,} steps:",
        f"  median save {f.save * 1e3:.3f} ms, bare insert+commit {f.bare_median * 1e3:.3f} ms: "
        f"{f.ratio:.2f}x; step-by-step {f.paired:.2f}x",
        f"  median save, last {w} / first {w} steps: {f.growth:.2f}x (means: first "
        f"{statistics.mean(f.saves[:w]) * 1e3:.3f} ms, last {statistics.mean(f.saves[-w:]) * 1e3:.3f} ms; bare "
        f"{statistics.mean(f.bare[:w]) * 1e3:.3f} / {statistics.mean(f.bare[-w:]) * 1e3:.3f} ms)",
    ]
    if f.sizes:
        per_step = [size / steps for steps, size in f.sizes]
        lines.append(
            "  file size: "
            + ", ".join(f"{steps} steps {size / 1024:.0f} KiB" for steps, size in f.sizes)
            + f"  (bytes/step {min(per_step):.0f}..{max(per_step):.0f})"
        )
    for name, value, limit in verdicts(f):
        verdict = "PASS" if value <= limit else "MISS"
        lines.append(f"  {verdict} {name}: {value:.2f}x (target <= {limit}x)")
    return lines


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("folder", nargs="?", default=None, help="where the files go (default: a temp dir)")
    args = parser.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        for wal in (False, True):
            figures = await measure(Path(tmp), wal=wal, steps=args.steps)
            print("\n".join(report(figures)))
            ok = ok and all(value <= limit for _, value, limit in verdicts(figures))
        print(f"(files in {tmp}; SQLite {sqlite3.sqlite_version})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
