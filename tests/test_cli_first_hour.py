"""What a new user runs right after `lovia demo`: the stores commands on a core install, and in pipes."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lovia import RunHead
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.transcript import InputEntry, ToolCallEntry

ROOT = Path(__file__).resolve().parents[1]
# Runs the CLI with the PostgreSQL driver made unimportable, as on `pip install lovia` (no extras).
CORE_ONLY = (
    "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
    "from lovia.cli import main; raise SystemExit(main(sys.argv[1:]))"
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CORE_ONLY, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def dead_worker_file(tmp_path: Path) -> str:
    """A run left `running` by a worker whose lease has run out, plus a session with a finished run."""
    db = str(tmp_path / "demo.db")

    async def build() -> None:
        async with SQLiteCheckpointer(db) as cp, SQLiteSession(db) as session:
            await cp.acquire_lease("job-1", owner="gone:1:x", ttl=0.05)
            await cp.append(
                "job-1",
                [InputEntry(role="user", content="go"), ToolCallEntry(call_id="c1", name="slow", arguments="{}")],
                RunHead(agent_name="worker", status="running", turns=1),
            )
            await session.append("s1", [InputEntry(role="user", content="hi")], run_id="r1")

    asyncio.run(build())
    time.sleep(0.1)  # the lease expires
    return db


def test_stores_commands_need_no_postgres_driver(dead_worker_file: str) -> None:
    for args in (["runs", "ls"], ["runs", "show", "job-1"], ["sessions", "show", "s1"], ["sessions", "ls"]):
        out = _cli(*args, "--db", dead_worker_file)
        assert out.returncode == 0, (args, out.stderr)
        assert "psycopg" not in out.stderr


def test_runs_show_reads_a_dead_owner_as_ls_does(dead_worker_file: str) -> None:
    listed = _cli("runs", "ls", "--db", dead_worker_file).stdout
    shown = _cli("runs", "show", "job-1", "--db", dead_worker_file).stdout
    assert re.search(r"job-1\s+worker\s+interrupted", listed)
    assert re.search(r"status\s+interrupted \(lease expired\)", shown), shown


def test_a_closed_pipe_ends_the_listing_quietly(tmp_path: Path) -> None:
    db = str(tmp_path / "many.db")

    async def build() -> None:
        async with SQLiteSession(db) as session:
            for i in range(200):
                await session.append(f"s{i}", [InputEntry(role="user", content="x" * 50)], run_id="r")

    asyncio.run(build())
    # The reader is gone before the command writes a line (as `| head -0` would leave it).
    proc = subprocess.Popen(
        [sys.executable, "-m", "lovia.cli", "sessions", "ls", "--db", db, "--limit", "200"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_the_demo_names_lovia_as_the_reader_can_call_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia.web.crashdemo import lovia_command

    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").touch()
    script = bin_dir / "lovia"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert lovia_command() == ".venv/bin/lovia"  # not activated: the path that works from here
    monkeypatch.setenv("PATH", str(bin_dir))
    assert lovia_command() == "lovia"  # activated (or installed on PATH): the bare name
