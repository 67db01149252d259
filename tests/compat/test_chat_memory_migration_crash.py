"""A chat or memory file whose migration is SIGKILLed, or fails, at any step is left byte for byte as it was.

A real child process opens a copy of the file, applies one step for real and dies (SIGKILL) or
raises while the migration's transaction is open; the file must be unchanged, and the next open
(in this process) must migrate it completely.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lovia.plugins.memory.index import KEYWORD_MIGRATIONS, KEYWORD_STORE
from lovia.plugins.memory.vector import VECTOR_MIGRATIONS, VECTOR_STORE
from lovia.web.chat_schema import CHAT_MIGRATIONS

from ._chat_ref import REF

CHILD = Path(__file__).with_name("chat_memory_child.py")
ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "tests" / "fixtures" / "sqlite"
LATEST_CHAT = CHAT_MIGRATIONS[-1].version


def _child(opener: str, path: Path, store: str, version: int, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(CHILD), opener, str(path), store, str(version), mode]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def _version(path: Path, store: str) -> int:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT version FROM lovia_schema WHERE store = ?", (store,)).fetchone()
    return int(row[0]) if row else 0


def _ref_chat(tmp_path: Path) -> Path:
    if not (REF / "chat.db").exists():
        pytest.skip(f"0.9.119's fixture files are not at {REF}")
    db = tmp_path / "chat.db"
    shutil.copyfile(REF / "chat.db", db)
    return db


def _our_chat(tmp_path: Path) -> Path:
    db = tmp_path / "ours.db"
    with sqlite3.connect(db) as conn:
        conn.executescript((OURS / "chat_uv2.sql").read_text())
    conn.close()
    return db


@pytest.mark.parametrize("version", [m.version for m in CHAT_MIGRATIONS if m.version > 2])
def test_a_0_9_119_chat_file_killed_at_any_step_is_unchanged_and_opens_next_time(tmp_path: Path, version: int) -> None:
    db = _ref_chat(tmp_path)
    before = db.read_bytes()
    done = _child("chat", db, "chat", version, "kill")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert db.read_bytes() == before
    assert _child("chat", db, "chat", 0, "none").stdout.strip() == "opened"
    assert _version(db, "chat") == LATEST_CHAT


@pytest.mark.parametrize("version", [1, 5, LATEST_CHAT])
def test_our_earlier_chat_file_killed_mid_migration_is_unchanged(tmp_path: Path, version: int) -> None:
    db = _our_chat(tmp_path)
    before = db.read_bytes()
    done = _child("chat", db, "chat", version, "kill")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert db.read_bytes() == before
    assert _child("chat", db, "chat", 0, "none").returncode == 0
    assert _version(db, "chat") == LATEST_CHAT


def test_a_failing_step_leaves_the_file_as_it_was_and_the_next_open_succeeds(tmp_path: Path) -> None:
    db = _ref_chat(tmp_path)
    before = db.read_bytes()
    done = _child("chat", db, "chat", 3, "fail")  # the conversion of 0.9.119's tables ran, then the step failed
    assert done.returncode == 1 and "failed on purpose" in done.stderr
    assert db.read_bytes() == before
    assert _version(db, "chat") == 2
    assert _child("chat", db, "chat", 0, "none").returncode == 0
    assert _version(db, "chat") == LATEST_CHAT


MEMORY = [
    ("keyword", "archive.db", KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version),
    ("vector", "vectors.db", VECTOR_STORE, VECTOR_MIGRATIONS[-1].version),
]


@pytest.mark.parametrize(("opener", "name", "store", "latest"), MEMORY)
@pytest.mark.parametrize("mode", ["kill", "fail"])
def test_a_0_9_119_memory_file_killed_or_failing_at_each_step_is_unchanged(
    tmp_path: Path, opener: str, name: str, store: str, latest: int, mode: str
) -> None:
    if not (REF / "memory" / name).exists():
        pytest.skip(f"0.9.119's fixture files are not at {REF}")
    db = tmp_path / name
    shutil.copyfile(REF / "memory" / name, db)
    before = db.read_bytes()
    for version in range(1, latest + 1):
        done = _child(opener, db, store, version, mode)
        assert done.returncode == (-signal.SIGKILL if mode == "kill" else 1), done.stderr
        assert db.read_bytes() == before, f"step {version}"
    assert _child(opener, db, store, 0, "none").returncode == 0
    assert _version(db, store) == latest
