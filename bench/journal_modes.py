"""SQLite journal modes and sync levels for a session append: the measurement behind lovia's pragmas.

Each configuration commits ``--appends`` single-row transactions (a 4-entry run, the same bytes
``SQLiteSession.append`` writes) to its own file with bare ``sqlite3``, side by side in one run,
and prints the median and the ratio to the rollback journal's default (``DELETE`` + ``FULL``).

What each guarantees (SQLite documentation, and why lovia picks what it picks):

* rollback journal (``DELETE``/``TRUNCATE``/``PERSIST``) + ``synchronous=FULL``: a committed
  transaction survives a process crash and an OS crash or power loss. The three modes differ only
  in how the journal is retired after a commit (unlink, truncate, or zero its header); all are
  equally durable.
* rollback journal + ``synchronous=NORMAL``: survives a process crash; a power loss can corrupt
  the file. Not offered.
* ``WAL`` + ``synchronous=NORMAL``: survives a process crash; a power loss may roll back the
  last commits but never corrupts the file. ``WAL`` + ``FULL`` also keeps those commits, at an
  ``fsync`` per commit.

Usage::

    .venv/bin/python bench/journal_modes.py [--appends 200] [DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lovia.stores._codec import encode_entries, encode_meta  # noqa: E402
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry  # noqa: E402

CONFIGS = [
    ("DELETE", "FULL"),
    ("TRUNCATE", "FULL"),
    ("PERSIST", "FULL"),
    ("WAL", "NORMAL"),
    ("WAL", "FULL"),
]


def run_text(n: int) -> str:
    return encode_entries(
        [
            InputEntry(role="user", content=f"What is the weather in Paris? ({n})"),
            ToolCallEntry(call_id=f"call_{n}", name="weather", arguments='{"city": "Paris"}'),
            ToolResultEntry(call_id=f"call_{n}", output="weather in Paris: 18C, light rain " * 5),
            AssistantTextEntry(content="It is 18C with light rain in Paris."),
        ]
    )


def measure(folder: Path, journal: str, sync: str, appends: int, round_: int) -> float:
    conn = sqlite3.connect(folder / f"{journal}-{sync}-{round_}.db", isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute(f"PRAGMA synchronous = {sync}")
    conn.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, run_id TEXT, "
        "entries_json TEXT, meta_json TEXT, created_at REAL, UNIQUE (session_id, run_id))"
    )
    conn.execute("CREATE INDEX runs_sid ON runs (session_id, id)")
    meta = encode_meta({"timing": {"started_at": 1.0, "finished_at": 2.0}})
    samples = []
    for i in range(appends):
        text = run_text(i)
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO runs (session_id, run_id, entries_json, meta_json, created_at) VALUES (?, ?, ?, ?, ?)",
            ("s", f"r{i}", text, meta, time.time()),
        )
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - t0)
    conn.close()
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("dir", nargs="?", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        # Interleave rounds so that disk noise spreads over every configuration alike.
        results: dict[tuple[str, str], list[float]] = {c: [] for c in CONFIGS}
        for round_ in range(3):
            for journal, sync in CONFIGS:
                results[(journal, sync)].append(measure(Path(tmp), journal, sync, args.appends // 3, round_))
        base = statistics.median(results[("DELETE", "FULL")])
        print(f"sqlite {sqlite3.sqlite_version}; median of {args.appends} single-run appends per configuration")
        for (journal, sync), values in results.items():
            value = statistics.median(values)
            print(f"{journal:9} synchronous={sync:7} {value * 1e3:8.3f} ms   {value / base:5.2f}x DELETE+FULL")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
