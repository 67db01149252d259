"""``lovia db status`` and ``lovia db upgrade`` on real files (0.9.119's included).

The commands run in this process through ``lovia.cli.main`` (what the console script calls), with
their output captured; the entry point itself runs as a real subprocess in the first tests, and
``test_db_commands_import_no_optional_dependency`` runs both commands in a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from lovia.cli import main
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.stores.sqlite._schema import MIGRATIONS, latest_version
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web.store import SQLiteScheduleStore
from tests.compat._fixtures import FIXTURES, copy_fixture, needs_fixtures

ROOT = Path(__file__).resolve().parents[1]
OLD_FILES = [
    ("session.db", "session"),
    ("session_wal.db", "session"),
    ("runs.db", "checkpoint"),
    ("runs_wal.db", "checkpoint"),
]


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


def lovia_db(*args: str) -> Done:
    """``lovia db ARGS`` in this process: its exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["db", *args])
    return Done(code, out.getvalue(), err.getvalue())


def lovia_db_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``lovia db ARGS`` as a real child process, through the module's entry point."""
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", "db", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def _folder(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.parent.iterdir()}


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


async def _session_file(path: Path) -> None:
    async with SQLiteSession(path) as session:
        for run in ("r1", "r2"):
            await session.append(
                "u1", [InputEntry(role="user", content=run), AssistantTextEntry(content="ok")], run_id=run
            )


# ---------------------------------------------------------------------------- unhappy paths first


def test_status_of_a_missing_file_is_not_found_and_creates_nothing(tmp_path):
    for run in (lovia_db_process, lovia_db):
        done = run("status", str(tmp_path / "nope.db"))
        assert done.returncode == 1 and "no database at" in done.stderr and "hint:" in done.stderr, run
        assert done.stdout == "", run
        assert list(tmp_path.iterdir()) == []


def test_damaged_rows_are_reported_with_exit_status_1(tmp_path):
    path = tmp_path / "s.db"
    asyncio.run(_session_file(path))
    with sqlite3.connect(path) as conn:  # edited outside lovia: the checksum no longer matches
        conn.execute("UPDATE session_runs SET entries_json = replace(entries_json, 'r2', 'r9') WHERE run_id = 'r2'")
    before = path.read_bytes()
    done = lovia_db("status", str(path))
    assert done.returncode == 1, done.stderr
    assert "damaged: 1 row(s)" in done.stdout and "session 'u1', run 'r2'" in done.stdout
    report = json.loads(lovia_db("status", "--json", str(path)).stdout)
    (session,) = report["stores"]
    assert session["damaged"] == ["session 'u1', run 'r2'"] and session["checked"] and session["pending"] == []
    assert path.read_bytes() == before


def test_a_file_from_a_newer_lovia_is_reported_too_new_and_not_upgraded(tmp_path):
    path = tmp_path / "s.db"
    asyncio.run(_session_file(path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE lovia_schema SET version = 99 WHERE store = 'session'")
    done = lovia_db("status", str(path))
    assert done.returncode == 0
    assert f"session: version 99, latest {latest_version('session')}, too new" in done.stdout
    assert json.loads(lovia_db("status", "--json", str(path)).stdout)["stores"][0]["too_new"] is True
    before = path.read_bytes()
    up = lovia_db_process("upgrade", str(path))  # the entry point's exit status for a refused upgrade
    assert up.returncode == 2 and "newer than this lovia" in up.stderr and "upgrade lovia" in up.stderr
    assert path.read_bytes() == before


# ---------------------------------------------------------------------------- 0.9.119's files


@needs_fixtures
@pytest.mark.parametrize(("name", "store"), OLD_FILES)
def test_status_of_a_0_9_119_file_lists_its_pending_steps_and_changes_nothing(tmp_path, name, store):
    path = copy_fixture(name, tmp_path)
    before = _folder(path)
    done = lovia_db("status", str(path))
    assert done.returncode == 0, done.stderr
    assert "as lovia 0.9.119 writes it" in done.stdout
    steps = [f"{m.version} {m.name}" for m in MIGRATIONS[store]]
    assert (
        f"{store}: version 0, latest {latest_version(store)}, {len(steps)} pending: " + ", ".join(steps) in done.stdout
    )
    report = json.loads(lovia_db("status", "--json", str(path)).stdout)
    assert report["record"] == "store-0.9.119"
    assert report["stores"] == [
        {
            "store": store,
            "version": 0,
            "latest": latest_version(store),
            "too_new": False,
            "pending": steps,
            "checked": False,
            "damaged": [],
        }
    ]
    assert _folder(path) == before  # same bytes, and nothing new beside it (no -wal, -shm or -journal)
    assert path.read_bytes() == (FIXTURES / name).read_bytes()


@needs_fixtures
@pytest.mark.parametrize(("name", "store"), OLD_FILES)
def test_upgrade_with_backup_migrates_and_keeps_a_consistent_copy(tmp_path, name, store):
    path = copy_fixture(name, tmp_path)
    original = _dump(path)
    done = lovia_db("upgrade", "--backup", str(path))
    assert done.returncode == 0, done.stderr
    assert f"backup: {path}.bak" in done.stdout and f"{store}: version 0 -> {latest_version(store)}" in done.stdout
    assert _dump(Path(f"{path}.bak")) == original
    report = json.loads(lovia_db("status", "--json", str(path)).stdout)
    assert report["record"] == "store"
    assert [(s["store"], s["version"], s["pending"], s["damaged"]) for s in report["stores"]] == [
        (store, latest_version(store), [], [])
    ]
    # A second backup never overwrites the first.
    again = lovia_db("upgrade", "--backup", str(path))
    assert again.returncode == 0 and f"backup: {path}.bak.1" in again.stdout
    assert f"{store}: up to date" in again.stdout
    assert _dump(Path(f"{path}.bak")) == original


# ---------------------------------------------------------------------------- our files


def test_status_and_upgrade_of_our_older_file_with_several_stores(tmp_path):
    path = tmp_path / "ours.db"
    conn = sqlite3.connect(path)
    conn.executescript((ROOT / "tests" / "fixtures" / "sqlite" / "checkpoint_v3.sql").read_text())
    conn.close()
    asyncio.run(SQLiteScheduleStore(path).close())  # the schedule store converts the record and records itself
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE web_schedules DROP COLUMN until")
        conn.execute("UPDATE lovia_schema SET version = 2 WHERE store = 'schedule'")
    report = json.loads(lovia_db("status", "--json", str(path)).stdout)
    assert {s["store"]: (s["version"], s["pending"]) for s in report["stores"]} == {
        "checkpoint": (3, ["4 checksum_snapshot_turns", "5 compact_entry_rows"]),
        "schedule": (2, ["3 add_schedule_until"]),
    }
    done = lovia_db("upgrade", str(path))
    assert done.returncode == 0, done.stderr
    assert "checkpoint: version 3 -> 5" in done.stdout and "schedule: version 2 -> 3" in done.stdout

    async def served() -> object:
        async with SQLiteCheckpointer(path) as checkpointer:
            return await checkpointer.load("job-1")

    snap = asyncio.run(served())
    assert snap is not None and snap.status == "interrupted"


def test_status_reads_a_component_keyed_record(tmp_path):
    path = tmp_path / "ours.db"
    conn = sqlite3.connect(path)
    conn.executescript((ROOT / "tests" / "fixtures" / "sqlite" / "session_v4.sql").read_text())
    conn.close()
    done = lovia_db("status", str(path))
    assert done.returncode == 0
    assert "keyed by component" in done.stdout and "session: version 4, latest 4, up to date" in done.stdout
    assert lovia_db("upgrade", str(path)).returncode == 0
    assert json.loads(lovia_db("status", "--json", str(path)).stdout)["record"] == "store"


def test_db_commands_import_no_optional_dependency(tmp_path):
    path = tmp_path / "s.db"
    asyncio.run(_session_file(path))
    code = (
        "import sys\n"
        "from lovia.cli import main\n"
        f"assert main(['db', 'status', {str(path)!r}]) == 0\n"
        f"assert main(['db', 'upgrade', '--backup', {str(path)!r}]) == 0\n"
        "optional = ('fastapi', 'uvicorn', 'psycopg', 'psycopg_pool', 'jinja2', 'croniter')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in optional))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@needs_fixtures
def test_the_0_9_119_chat_file_shows_its_chat_store_and_upgrades_with_its_neighbours(tmp_path):
    from lovia.web.store.schema import CHAT_MIGRATIONS

    path = copy_fixture("chat.db", tmp_path)
    before = _folder(path)
    report = json.loads(lovia_db("status", "--json", str(path)).stdout)
    stores = {s["store"]: s for s in report["stores"]}
    assert stores["chat"]["version"] == 2 and stores["chat"]["latest"] == CHAT_MIGRATIONS[-1].version
    assert stores["chat"]["pending"][0].startswith("3 ")
    assert {"session", "checkpoint", "chat"} <= set(stores) and report["other_stores"] == []
    assert _folder(path) == before  # status changed nothing
    done = lovia_db("upgrade", str(path))
    assert done.returncode == 0, done.stderr
    after = {s["store"]: s for s in json.loads(lovia_db("status", "--json", str(path)).stdout)["stores"]}
    assert all(not s["pending"] for s in after.values()), after


@needs_fixtures
@pytest.mark.parametrize(("name", "store"), [("archive.db", "memory_archive"), ("vectors.db", "memory_vectors")])
def test_the_0_9_119_memory_indexes_upgrade_from_the_command(tmp_path, name, store):
    path = tmp_path / name
    path.write_bytes((FIXTURES / "memory" / name).read_bytes())
    report = json.loads(lovia_db("status", "--json", str(path)).stdout)
    assert [(s["store"], s["version"]) for s in report["stores"]] == [(store, 0)]
    done = lovia_db("upgrade", str(path))
    assert done.returncode == 0, done.stderr  # the archive's re-index needs its SQL function: prepared
    (after,) = json.loads(lovia_db("status", "--json", str(path)).stdout)["stores"]
    assert after["store"] == store and after["pending"] == [] and after["version"] == after["latest"]
