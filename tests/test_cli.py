"""The `lovia` command, run as a real subprocess against real store files."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import lovia
from lovia import Agent, CheckpointOptions, RunHead, Runner
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

ROOT = Path(__file__).resolve().parents[1]


def lovia_cmd(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_aligned(table: str, columns: list[str]) -> list[list[str]]:
    """Every row starts each column at the header's offset; returns the cells."""
    lines = table.splitlines()
    header, rule, rows = lines[0], lines[1], lines[2:]
    offsets = [header.index(c) for c in columns]
    assert set(rule) <= {"-", " "}
    cells = []
    for row in rows:
        for off in offsets[1:]:
            assert len(row) <= off or row[off - 2 : off] == "  ", f"misaligned: {row!r}"
        cells.append([row[a:b].strip() for a, b in zip(offsets, [*offsets[1:], None], strict=True)])
    return cells


@pytest.fixture
def store_file(tmp_path: Path) -> tuple[str, str, str]:
    """A SQLite file with one finished session run (checkpoint kept) and one interrupted checkpoint."""
    db = str(tmp_path / "store.db")

    async def build() -> None:
        async with SQLiteSession(db, wal=True) as session, SQLiteCheckpointer(db, wal=True) as cp:
            model = ScriptedProvider([call("lookup", {"q": "x" * 900}, call_id="c1"), text("The answer is 42.")])

            def lookup(q: str) -> str:
                """Look it up."""
                return "result " + q

            from lovia import tool

            agent = Agent(name="fixture", model=model, tools=[tool(lookup)])
            await Runner.run(
                agent,
                "What is the answer?",
                session=session,
                session_id="sess-one",
                checkpoint=CheckpointOptions(cp, "run-done"),
            )
            await session.append("sess-one", [InputEntry("user", "thanks"), *[]], run_id="run-two")
            head = RunHead(agent_name="fixture", status="interrupted", turns=1)
            entries = [
                InputEntry("user", "make the report"),
                ToolCallEntry("call_quick", "quick", '{"item": "a"}'),
                ToolResultEntry("call_quick", "quick:a"),
            ]
            await cp.append("run-stuck", entries, head)

    asyncio.run(build())
    return db, "run-done", "run-stuck"


def test_version() -> None:
    out = lovia_cmd("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"lovia {lovia.__version__}"


def test_no_arguments_print_the_usage_and_succeed() -> None:
    out = lovia_cmd()
    assert out.returncode == 0 and out.stdout.startswith("usage: lovia") and "web" in out.stdout


def test_web_version_prints_the_version() -> None:
    out = lovia_cmd("web", "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"lovia {lovia.__version__}"


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "lovia"
    if not script.exists():
        pytest.skip("console script not installed in this environment")
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == f"lovia {lovia.__version__}"


def test_runs_ls_show_rm(store_file: tuple[str, str, str]) -> None:
    db, done, stuck = store_file
    out = lovia_cmd("runs", "ls", "--db", db)
    assert out.returncode == 0, out.stderr
    cells = assert_aligned(out.stdout, ["run_id", "agent", "status", "turns", "entries", "started", "updated"])
    assert {(c[0], c[2], c[4]) for c in cells} == {(done, "completed", "4"), (stuck, "interrupted", "3")}
    only = lovia_cmd("runs", "ls", "--db", db, "--status", "interrupted").stdout
    assert stuck in only and done not in only

    show = lovia_cmd("runs", "show", stuck, "--db", db).stdout
    assert re.search(r"status\s+interrupted", show) and "quick" in show and "make the report" in show
    snap = json.loads(lovia_cmd("runs", "show", done, "--db", db, "--json").stdout)
    assert snap["status"] == "completed" and [e["type"] for e in snap["entries"]] == [
        "input",
        "tool_call",
        "tool_result",
        "assistant_text",
    ]

    rm = lovia_cmd("runs", "rm", done, "nope", "--db", db)
    assert rm.stdout.splitlines() == [f"deleted: {done}"]
    assert rm.returncode == 1 and "not found: nope" in rm.stderr
    assert done not in lovia_cmd("runs", "ls", "--db", db).stdout
    missing = lovia_cmd("runs", "show", done, "--db", db)
    assert missing.returncode == 1 and "lovia runs ls" in missing.stderr


def test_runs_resume_continues_without_rerunning_completed_tools(
    store_file: tuple[str, str, str], tmp_path: Path
) -> None:
    db, _done, stuck = store_file
    log = tmp_path / "tools.log"
    out = lovia_cmd(
        "runs", "resume", stuck, "--db", db, "--app", "tests.web.app_fixture:agent", env={"LOVIA_FIXTURE_LOG": str(log)}
    )
    assert out.returncode == 0, out.stderr
    assert "All done: quick and slow both finished." in out.stdout
    assert log.read_text().splitlines() == ["slow:start", "slow:done"]  # quick had a stored result
    again = lovia_cmd(
        "runs", "resume", stuck, "--db", db, "--app", "tests.web.app_fixture:agent", env={"LOVIA_FIXTURE_LOG": str(log)}
    )
    assert "replayed" in again.stdout and log.read_text().splitlines() == ["slow:start", "slow:done"]


def test_sessions_commands(store_file: tuple[str, str, str]) -> None:
    db, done, _stuck = store_file
    ls = lovia_cmd("sessions", "ls", "--db", db)
    cells = assert_aligned(ls.stdout, ["session_id", "title", "runs", "entries", "updated"])
    assert [c[:4] for c in cells] == [["sess-one", "", "2", "5"]]

    show = lovia_cmd("sessions", "show", "sess-one", "--db", db).stdout
    assert f"run {done}" in show and "run run-two" in show and "The answer is 42." in show

    md = lovia_cmd("sessions", "export", "sess-one", "--db", db).stdout
    assert "## User" in md and "What is the answer?" in md and "## Assistant" in md
    as_json = json.loads(lovia_cmd("sessions", "export", "sess-one", "--db", db, "--format", "json").stdout)
    assert [e["type"] for e in as_json] == ["input", "tool_call", "tool_result", "assistant_text", "input"]

    trim = lovia_cmd("sessions", "trim", "sess-one", "--db", db, "--keep-chars", "20", "--keep-runs", "1")
    assert trim.stdout.strip() == "trimmed 1 tool result(s) in sess-one"
    trimmed = json.loads(lovia_cmd("sessions", "export", "sess-one", "--db", db, "--format", "json").stdout)
    assert len(trimmed[2]["output"]) < 300

    rewind = lovia_cmd("sessions", "rewind", "sess-one", "--db", db, "--keep-entries", "1")
    assert rewind.returncode == 0 and rewind.stdout.startswith("removed 4 entries from sess-one; it now has 1")
    assert f"removed checkpoint of run {done}" in rewind.stdout
    after = json.loads(lovia_cmd("sessions", "export", "sess-one", "--db", db, "--format", "json").stdout)
    assert after == [{"type": "input", "role": "user", "content": "What is the answer?"}]
    # the rewound run's checkpoint went too: a resume must not replay the undone tail
    assert done not in lovia_cmd("runs", "ls", "--db", db).stdout


def test_missing_db_is_a_clear_error(tmp_path: Path) -> None:
    out = lovia_cmd("sessions", "ls", "--db", str(tmp_path / "nope.db"))
    assert out.returncode == 1
    assert "no database at" in out.stderr and "hint:" in out.stderr
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.slow
def test_demo_runs_offline(tmp_path: Path) -> None:
    db = str(tmp_path / "demo" / "demo.db")
    out = lovia_cmd("demo", "--fast", "--db", db, env={"LOVIA_MODEL": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SIGKILL the worker" in out.stdout and "status='running'" in out.stdout
    assert "fetch_rows executed 1 time(s)" in out.stdout and "build_report started 2 time(s)" in out.stdout
    assert "ok: completed tool results were not re-run" in out.stdout


def test_web_help_lists_the_flags() -> None:
    out = lovia_cmd("web", "--help")
    for flag in ("--host", "--port", "--db", "--app", "--token"):
        assert flag in out.stdout
    mod = subprocess.run(
        [sys.executable, "-m", "lovia.web", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=30
    )
    assert mod.returncode == 0 and "--app" in mod.stdout


@pytest.mark.skipif(importlib.util.find_spec("fastapi") is None, reason="needs lovia[web]")
def test_non_loopback_bind_prints_and_requires_a_token(tmp_path: Path) -> None:
    from tests.web.helpers import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "lovia.cli",
        "web",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--db",
        str(tmp_path / "w.db"),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        token_line = proc.stdout.readline()
        match = re.search(r"need this token: (\S+)", token_line)
        assert match, token_line
        token = match.group(1)
        link = proc.stdout.readline() + proc.stdout.readline()
        assert f"?token={token}" in link
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while True:
            try:
                if httpx.get(base + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert httpx.get(base + "/api/info").status_code == 401
        assert httpx.get(base + "/api/info", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
