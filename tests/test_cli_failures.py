"""The `lovia` command when things are missing, stale or wrong: exit codes, messages, the demo's files."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lovia import Agent, CheckpointOptions, RunHead, Runner
from lovia.cli import STALE_AFTER, effective_status
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolCallEntry

from .test_cli import ROOT, lovia_cmd

CHILD = """
import asyncio, sys
from lovia import Agent, CheckpointOptions, Runner, tool
from lovia.stores import SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, text

@tool
async def wait_forever() -> str:
    '''Block.'''
    print("started", flush=True)
    await asyncio.sleep(3600)
    return "never"

async def main(db):
    model = ScriptedProvider([call("wait_forever", {}, call_id="c1"), text("done")])
    async with SQLiteCheckpointer(db, wal=True) as cp:
        opts = CheckpointOptions(cp, "killed-run", lease_ttl=float(sys.argv[2]) if sys.argv[2] != "none" else None)
        await Runner.run(Agent(name="sleeper", model=model, tools=[wait_forever]), "go", checkpoint=opts)

asyncio.run(main(sys.argv[1]))
"""


def killed_run(db: str, lease: str) -> None:
    """A real child process drives a run into a tool, then is SIGKILLed."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, db, lease], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "started"
    time.sleep(0.3)  # the checkpoint of the call is saved before the tool runs; give the lease a renewal
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()


def test_a_sigkilled_leased_run_lists_as_interrupted(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    killed_run(db, "0.5")
    time.sleep(0.8)  # the dead worker cannot renew: its lease runs out
    out = lovia_cmd("runs", "ls", "--db", db)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("killed-run"))
    assert " interrupted " in row and "lease expired" in row
    only = lovia_cmd("runs", "ls", "--db", db, "--status", "interrupted")
    assert "killed-run" in only.stdout
    assert "killed-run" not in lovia_cmd("runs", "ls", "--db", db, "--status", "running").stdout


def test_a_live_lease_still_lists_as_running(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    killed_run(db, "60")
    row = next(line for line in lovia_cmd("runs", "ls", "--db", db).stdout.splitlines() if line.startswith("killed"))
    assert " running " in row and "lease held" in row


def test_status_of_a_run_without_a_lease_goes_stale() -> None:
    now = 10_000.0
    assert effective_status("running", now - 5, None, now=now) == ("running", "")
    status, why = effective_status("running", now - STALE_AFTER - 120, None, now=now)
    assert status == "interrupted" and "no save for" in why
    assert effective_status("completed", 0, None, now=now) == ("completed", "")
    assert effective_status("running", now, now - 1, now=now) == ("interrupted", "lease expired")


@pytest.fixture
def demo_like(tmp_path: Path) -> str:
    """A store with an interrupted run of agent 'reporter' (like the demo's) and a two-run session."""
    db = str(tmp_path / "s.db")

    async def build() -> None:
        async with SQLiteSession(db, wal=True) as session, SQLiteCheckpointer(db, wal=True) as cp:
            head = RunHead(agent_name="reporter", status="interrupted", turns=1)
            await cp.append("stuck", [InputEntry("user", "report"), ToolCallEntry("c9", "fetch_rows", "{}")], head)
            model = ScriptedProvider([call("lookup", {}, call_id="c1"), text("first answer"), text("second answer")])

            def lookup() -> str:
                """Look."""
                return "found"

            from lovia import tool

            agent = Agent(name="a", model=model, tools=[tool(lookup)])
            opts = CheckpointOptions(cp, "run-1")
            await Runner.run(agent, "q1", session=session, session_id="s1", checkpoint=opts)
            await Runner.run(agent, "q2", session=session, session_id="s1", checkpoint=CheckpointOptions(cp, "run-2"))

    asyncio.run(build())
    return db


def test_resume_without_app_explains_how_to_name_the_agent(demo_like: str) -> None:
    out = lovia_cmd("runs", "resume", "stuck", "--db", demo_like)
    assert out.returncode == 2
    assert "made by agent 'reporter'" in out.stderr and "--app" in out.stderr
    assert "handoff graph" not in out.stderr


def test_resume_of_a_demo_run_with_the_printed_app(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")

    async def build() -> None:
        async with SQLiteCheckpointer(db, wal=True) as cp:
            head = RunHead(agent_name="reporter", status="interrupted", turns=0)
            await cp.append("demo-like", [InputEntry("user", "Build the weekly sales report.")], head)

    asyncio.run(build())
    out = lovia_cmd("runs", "resume", "demo-like", "--db", db, "--app", "lovia.web.crashdemo:demo_agents")
    assert out.returncode == 0, out.stderr
    assert "The weekly report is ready" in out.stdout
    assert "resuming run demo-like" in out.stderr and "tool build_report" in out.stderr  # progress


def test_rewind_says_what_it_removed_and_what_is_left(demo_like: str) -> None:
    before = lovia_cmd("sessions", "show", "s1", "--db", demo_like).stdout
    assert "run run-1" in before and "run run-2" in before
    out = lovia_cmd("sessions", "rewind", "s1", "--db", demo_like, "--keep-entries", "2")  # inside run-1: a call
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "removed 5 entries from s1; it now has 1", lines
    assert "tool call without its result was dropped" in out.stdout
    assert "removed checkpoint of run run-1" in out.stdout and "removed checkpoint of run run-2" in out.stdout
    show = lovia_cmd("sessions", "show", "s1", "--db", demo_like).stdout
    assert show.count("\n0  ") + show.count("\n0 ") >= 1 and "q2" not in show
    assert "run-1" not in lovia_cmd("runs", "ls", "--db", demo_like).stdout


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "rm", "nope"),
        ("runs", "show", "nope"),
        ("runs", "resume", "nope"),
        ("sessions", "show", "nope"),
        ("sessions", "rewind", "nope", "--keep-entries", "0"),
        ("sessions", "export", "nope"),
        ("sessions", "trim", "nope"),
    ],
)
def test_every_not_found_exits_1_with_a_message(demo_like: str, args: tuple[str, ...]) -> None:
    out = lovia_cmd(*args, "--db", demo_like)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "nope" in out.stderr and out.stdout == ""


def test_a_missing_database_exits_1(tmp_path: Path) -> None:
    out = lovia_cmd("runs", "ls", "--db", str(tmp_path / "none.db"))
    assert out.returncode == 1 and "no database at" in out.stderr and "LOVIA_DB" in out.stderr


@pytest.mark.parametrize("value", ["-1", "0", "ten"])
def test_limit_must_be_a_positive_number(demo_like: str, value: str) -> None:
    out = lovia_cmd("runs", "ls", "--db", demo_like, "--limit", value)
    assert out.returncode == 2
    assert "--limit" in out.stderr and ("at least 1" in out.stderr or "whole number" in out.stderr)
    assert "keyword" not in out.stderr and "Traceback" not in out.stderr


def test_flags_have_help() -> None:
    ls = lovia_cmd("runs", "ls", "--help").stdout
    assert "--status" in ls and "only runs with this status" in ls and "at most this many rows" in ls
    assert "at most this many rows" in lovia_cmd("sessions", "ls", "--help").stdout
    assert "LOVIA_DB" in lovia_cmd("--help").stdout


def test_db_is_global_and_read_from_the_environment(demo_like: str) -> None:
    before = lovia_cmd("--db", demo_like, "sessions", "ls")
    assert before.returncode == 0 and "s1" in before.stdout
    env = lovia_cmd("runs", "ls", env={"LOVIA_DB": demo_like})
    assert env.returncode == 0 and "stuck" in env.stdout
    after = lovia_cmd("--db", "/nonexistent/x.db", "runs", "ls", "--db", demo_like)  # the later one wins
    assert after.returncode == 0 and "stuck" in after.stdout


@pytest.mark.slow
def test_demo_keeps_its_files_where_it_says_and_the_printed_commands_work(tmp_path: Path) -> None:
    env_no_db = {k: v for k, v in os.environ.items() if k != "LOVIA_DB"}
    out = subprocess.run(
        [sys.executable, "-m", "lovia.cli", "demo", "--fast"],
        cwd=tmp_path,
        env={**env_no_db, "LOVIA_MODEL": "", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    db = tmp_path / ".lovia" / "demo" / "demo.db"
    assert db.exists() and f"{Path('.lovia') / 'demo' / 'demo.db'}" in out.stdout
    printed = out.stdout.split("Inspect them with:", 1)[1]
    commands = [line.strip() for line in printed.splitlines() if line.startswith("  ")]
    assert len(commands) == 3 and " runs ls --db" in commands[0]
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "lovia" or Path(argv[0]).name == "lovia"  # bare, or the venv's script
        ran = subprocess.run(  # exactly as printed: the program named, from the demo's folder
            argv,
            cwd=tmp_path,
            env={**env_no_db, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ran.returncode == 0, (command, ran.stderr)
        assert "demo-report-run" in ran.stdout or "demo-session" in ran.stdout or "report" in ran.stdout
    sessions = subprocess.run(
        [sys.executable, "-m", "lovia.cli", "sessions", "ls", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env_no_db, "PYTHONPATH": str(ROOT)},
    )
    assert "demo-session" in sessions.stdout
    again = subprocess.run(  # a second demo starts over in the same files
        [sys.executable, "-m", "lovia.cli", "demo", "--fast"],
        cwd=tmp_path,
        env={**env_no_db, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "build_report started 2 time(s)" in again.stdout


def test_a_failed_web_run_is_listed_with_its_error_and_logged(tmp_path: Path) -> None:
    from tests.web.helpers import ProcessServer, free_port, sse

    db = str(tmp_path / "web.db")
    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: the endpoint is down
    env = {**os.environ, "LOVIA_TEST_BASE_URL": down}
    server = ProcessServer("--db", db, "--app", "tests.web.app_down:agent", env=env)
    with server as srv:
        stream = sse(srv.url, "/api/chat/stream", {"message": "hello?"}, timeout=60)
        assert server.proc is not None and server.proc.stdout is not None
        server.proc.send_signal(signal.SIGTERM)
        log = server.proc.communicate(timeout=30)[0]
    error = stream.of("error")[-1]
    assert error["type"] == "ProviderError" and "connection failed" in error["message"]
    failed_lines = [line for line in log.splitlines() if "failed: ProviderError" in line]
    assert len(failed_lines) == 1, log
    out = lovia_cmd("runs", "ls", "--db", db, "--status", "failed")
    assert out.returncode == 0, out.stderr
    row = out.stdout.splitlines()[2]
    assert error["run_id"] in row and " failed " in row and "ProviderError: openai (fake-model): connection" in row
    show = lovia_cmd("runs", "show", error["run_id"], "--db", db)
    assert "error" in show.stdout and "connection failed" in show.stdout
    session = lovia_cmd("sessions", "show", stream.of("session")[0]["session_id"], "--db", db).stdout
    assert "(failed)" in session and "error: ProviderError" in session


def test_a_web_run_whose_server_was_sigkilled_lists_as_interrupted(tmp_path: Path) -> None:
    from tests.web.helpers import ProcessServer, sse, wait_for

    db, log = str(tmp_path / "web.db"), tmp_path / "tools.log"
    env = {**os.environ, "LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "30"}
    server = ProcessServer("--db", db, "--app", "tests.web.app_fixture:agent", env=env).start()
    try:
        stream = sse(server.url, "/api/chat/stream", {"message": "make the report"}, until="tool_call")
        run_id = stream.of("snapshot")[0]["run_id"]
        wait_for(lambda: log.exists() and "slow:start" in log.read_text())
        live = lovia_cmd("runs", "ls", "--db", db)
        row = next(line for line in live.stdout.splitlines() if line.startswith(run_id))
        assert " running " in row and "server " in row  # its server is alive: still running
    finally:
        server.kill(signal.SIGKILL)
    out = lovia_cmd("runs", "ls", "--db", db, "--status", "interrupted")
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith(run_id))
    assert " interrupted " in row and "is gone" in row
    assert run_id not in lovia_cmd("runs", "ls", "--db", db, "--status", "running").stdout
