"""Migrations are crash-safe: a child process dies (SIGKILL) or fails at every step, the file stays as it was.

Each case copies a file at an older version, runs ``migration_child.py`` which opens the store with
the K-th migration step killing its own process (or raising) after the step ran, inside the
migration's transaction. Afterwards the file holds exactly what it held before (byte for byte; for
a WAL file, the same ``iterdump()``: its log may keep uncommitted frames), and the next open
migrates it and serves what a file migrated without any crash serves.

Every store that migrates a SQLite file is here: session, checkpoint, the web chat index and the
two memory indexes. To cover another, add it to ``STORES`` in ``_stores.py`` and its files to ``FILES``.

Each child is a fresh interpreter, so the cost grows with files times steps. The default run sweeps
every step of every store once, on the file marked ``SWEEP`` in ``FILES`` (one per store: the older
file with the most steps, one of them in WAL mode); every other file is killed once, after its last
step, when all of its changes are written but none committed. ``LOVIA_FULL_CRASH_SWEEP=1`` sweeps
every step of every file (the whole cross product: a few times longer).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lovia.stores.sqlite._schema import pending_migrations

from ._fixtures import FIXTURES, copy_fixture
from ._stores import STORES

CHILD = Path(__file__).with_name("migration_child.py")
OUR_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sqlite"

FULL_SWEEP = os.environ.get("LOVIA_FULL_CRASH_SWEEP", "") not in ("", "0")
SWEEP, LAST = "sweep", "last"
"""Default trials of a file: a kill after every step and a failing last step, or one kill after the last step."""

# (store, source, wal, trials): a frozen fixture of ours (``*.sql``) or a file lovia 0.9.119 wrote.
# Each store has exactly one SWEEP file (checked below), so every step of every store is killed by default.
FILES = [
    ("session", "session_v1.sql", False, LAST),
    ("session", "session_v1.sql", True, LAST),
    ("checkpoint", "checkpoint_v1.sql", False, LAST),
    ("checkpoint", "checkpoint_v3.sql", False, LAST),
    ("session", "session.db", False, LAST),
    ("session", "session_wal.db", True, SWEEP),
    ("checkpoint", "runs.db", False, SWEEP),
    ("checkpoint", "runs_wal.db", True, LAST),
    ("chat", "chat_uv2.sql", False, SWEEP),
    ("chat", "chat.db", False, LAST),
    ("memory_archive", "memory/archive.db", False, SWEEP),
    ("memory_vectors", "memory/vectors.db", False, SWEEP),
]


def _make(source: str, folder: Path, name: str) -> Path:
    """A file at the source's version in ``folder``."""
    if source.endswith(".sql"):
        path = folder / name
        conn = sqlite3.connect(path)
        conn.executescript((OUR_FIXTURES / source).read_text())
        conn.close()
        return path
    if not (FIXTURES / source).is_file():
        pytest.skip(f"the files lovia 0.9.119 wrote are not at {FIXTURES}")
    path = copy_fixture(source, folder)
    return path.rename(folder / name)


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _steps(store: str, path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return len(pending_migrations(conn, store, STORES[store].migrations()))
    finally:
        conn.close()


def _child(store: str, path: Path, wal: bool, k: int, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), store, str(path), "1" if wal else "0", str(k), how],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _cases() -> list[object]:
    return [
        pytest.param(store, source, wal, trials, id=f"{source}-{'wal' if wal else 'journal'}")
        for store, source, wal, trials in FILES
    ]


def _trials(steps: int, trials: str) -> list[tuple[int, str]]:
    if trials == SWEEP or FULL_SWEEP:
        return [(k, "kill") for k in range(1, steps + 1)] + [(steps, "raise")]
    return [(steps, "kill")]


def test_every_store_has_one_file_swept_at_every_step_by_default():
    swept = sorted(store for store, _, _, trials in FILES if trials == SWEEP)
    assert swept == sorted(STORES), "each store needs exactly one SWEEP file in FILES"
    assert any(wal for _, _, wal, trials in FILES if trials == SWEEP), "one swept file is in WAL mode"


@pytest.mark.slow
@pytest.mark.parametrize(("store", "source", "wal", "trials"), _cases())
async def test_killed_or_failing_at_any_step_leaves_the_file_as_it_was(tmp_path, store, source, wal, trials):
    reference = _make(source, tmp_path, "reference.db")
    steps = _steps(store, reference)
    assert steps >= 2, "a file with several pending steps shows that they commit together"
    served = await STORES[store].serve(reference, wal)  # migrated without any crash
    assert served, "the reference serves nothing: comparing with it would prove nothing"

    for k, how in _trials(steps, trials):
        path = _make(source, tmp_path, f"{how}-{k}.db")
        before_bytes, before_dump = path.read_bytes(), _dump(path)

        done = await asyncio.to_thread(_child, store, path, wal, k, how)

        if how == "kill":
            assert done.returncode == -9, (k, done.stdout, done.stderr)
        else:
            assert done.returncode == 2 and f"step {k}" in done.stdout, (done.stdout, done.stderr)
        if wal:
            assert _dump(path) == before_dump, (how, k)
        else:
            assert path.read_bytes() == before_bytes, (how, k)
        assert _steps(store, path) == steps, (how, k)
        # The next open migrates the file and serves what a file migrated in one go serves.
        assert await STORES[store].serve(path, wal) == served, (how, k)
        assert _steps(store, path) == 0
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT version FROM lovia_schema WHERE store = ?", (store,)).fetchone() == (
            STORES[store].migrations()[-1].version,
        )
        conn.close()


async def test_a_child_that_dies_after_the_last_step_has_not_committed(tmp_path):
    """The kill lands after the final step's record was written: the file still reads as unmigrated."""
    path = _make("session_v1.sql", tmp_path, "s.db")
    steps = _steps("session", path)
    done = await asyncio.to_thread(_child, "session", path, False, steps, "kill")
    assert done.returncode == -9
    conn = sqlite3.connect(path)  # rolls the hot journal back
    assert conn.execute("SELECT * FROM lovia_schema").fetchall() == [
        ("session", 1, "create_session_runs", 1700000000.0)
    ]
    conn.close()
