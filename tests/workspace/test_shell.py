"""Foreground and background commands on real subprocesses."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from lovia.workspace import CommandResult, Workspace, WorkspaceError, WorkspaceLimits


@pytest.fixture
async def ws(tmp_path: Path):
    session = await Workspace.local(str(tmp_path), mode="trusted", shell_timeout=30).open()
    yield session
    await session.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


async def test_foreground_captures_both_streams_and_exit_code(ws, tmp_path):
    (tmp_path / "sub").mkdir()
    result = await ws.run("pwd; echo err >&2; exit 3", cwd="sub")
    assert result.exit_code == 3 and not result.ok
    assert result.stdout.strip() == str(tmp_path / "sub") and result.stderr.strip() == "err"


async def test_timeout_kills_the_group_and_reports_it(ws):
    started = time.monotonic()
    result = await ws.run("sleep 30 & sleep 30; echo never", timeout=1)
    assert result.timed_out and result.exit_code is None and "timed out" in result.stderr
    assert time.monotonic() - started < 10


async def test_output_is_capped_with_head_and_tail_kept(tmp_path):
    ws = await Workspace.local(
        str(tmp_path), mode="trusted", limits=WorkspaceLimits(max_shell_output_chars=1000)
    ).open()
    result = await ws.run("echo FIRST; seq 1 200000; echo LAST")
    assert result.truncated and len(result.stdout) < 1200
    assert result.stdout.startswith("FIRST") and result.stdout.rstrip().endswith("LAST")
    assert "truncated" in result.stdout
    await ws.close()


async def test_env_extra_and_inherit(tmp_path, monkeypatch):
    monkeypatch.setenv("LOVIA_HOST_ONLY", "host-value")
    minimal = await Workspace.local(str(tmp_path), mode="trusted", env={"GIVEN": "1"}).open()
    out = (await minimal.run("echo ${GIVEN}-${LOVIA_HOST_ONLY:-absent}", env={"PER_CALL": "2"})).stdout
    assert out.strip() == "1-absent"
    assert (await minimal.run("echo $PER_CALL", env={"PER_CALL": "2"})).stdout.strip() == "2"
    full = await Workspace.local(str(tmp_path), mode="trusted", inherit_env=True).open()
    assert (await full.run("echo $LOVIA_HOST_ONLY")).stdout.strip() == "host-value"
    await minimal.close()
    await full.close()


async def test_a_root_venv_is_activated_per_command(ws, tmp_path):
    assert "VIRTUAL_ENV" not in (await ws.run("env")).stdout
    bindir = tmp_path / ".venv" / "bin"
    bindir.mkdir(parents=True)
    os.symlink(sys.executable, bindir / "python")
    result = await ws.run("echo $VIRTUAL_ENV; command -v python")
    venv, python = result.stdout.split()
    assert venv == str(tmp_path / ".venv") and python == str(bindir / "python")
    (tmp_path / "venv").mkdir()  # a folder merely named venv is not a virtualenv
    assert (await ws.run("echo $VIRTUAL_ENV")).stdout.strip() == str(tmp_path / ".venv")


async def test_a_leftover_holding_the_output_is_killed_after_the_linger(ws):
    started = time.monotonic()
    result = await ws.run("sleep 60 & echo started")
    assert result.exit_code == 0 and "started" in result.stdout
    assert "background=true" in result.stderr
    assert time.monotonic() - started < 10


async def test_a_leftover_that_redirected_its_output_keeps_running(ws, tmp_path):
    result = await ws.run("nohup sleep 30 >/dev/null 2>&1 & echo $!")
    pid = int(result.stdout.strip())
    try:
        await ws.close()
        assert _alive(pid)
    finally:
        os.kill(pid, 9)


# ---------------------------------------------------------------------- background


async def _until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_background_output_is_incremental_and_the_exit_is_reported(ws):
    start = await ws.spawn("echo one; sleep 0.3; echo two; exit 4")
    assert start.process_id == "bg-1" and start.pid > 0
    first = await ws.read_process_output("bg-1")
    seen = first.output

    async def exited():
        nonlocal seen
        out = await ws.read_process_output("bg-1")
        seen += out.output
        return out.status == "exited"

    await _until(exited)
    assert seen.split() == ["one", "two"]
    final = await ws.read_process_output("bg-1")
    assert final.status == "exited" and final.exit_code == 4 and final.output == ""
    assert ws.background_processes()[0].exit_seen


async def test_kill_process_kills_the_whole_group(ws):
    start = await ws.spawn("sleep 60 & sleep 60 & echo ready; wait")

    async def ready():
        return "ready" in (await ws.read_process_output(start.process_id)).output

    await _until(ready)
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == start.pid]
    assert len(children) >= 2
    out = await ws.kill_process(start.process_id)
    assert out.status == "killed"
    await asyncio.sleep(0.2)
    assert not any(_alive(pid) for pid in children)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


async def test_unknown_process_ids_list_the_live_ones(ws):
    await ws.spawn("sleep 30")
    with pytest.raises(WorkspaceError, match=r"known: bg-1") as info:
        await ws.read_process_output("p9")
    assert "re-run" in (info.value.hint or "")


async def test_close_reaps_every_background_group(tmp_path):
    ws = await Workspace.local(str(tmp_path), mode="trusted").open()
    pids = [(await ws.spawn("sleep 60")).pid for _ in range(3)]
    await ws.close()
    await asyncio.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


async def test_unread_output_beyond_the_cap_is_dropped_and_announced(tmp_path):
    ws = await Workspace.local(str(tmp_path), mode="trusted", limits=WorkspaceLimits(max_shell_output_chars=500)).open()
    start = await ws.spawn("seq 1 5000; echo END")

    async def done():
        return ws.background_processes()[0].status == "exited"

    await _until(done)
    out = await ws.read_process_output(start.process_id)
    assert out.truncated and "dropped" in out.output and out.output.rstrip().endswith("END")
    await ws.close()


class RecordingExecutor:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Path]] = []

    async def run(self, command, *, cwd, env, timeout, policy, root):
        self.calls.append((command, cwd))
        return CommandResult(exit_code=0, stdout="sandboxed", stderr="")


async def test_a_shell_executor_runs_after_the_gates(tmp_path):
    executor = RecordingExecutor()
    ws = await Workspace.local(str(tmp_path), mode="trusted", executor=executor, denied_paths=("x.txt",)).open()
    assert (await ws.run("make")).stdout == "sandboxed"
    with pytest.raises(WorkspaceError):
        await ws.run("cat x.txt")
    with pytest.raises(WorkspaceError, match="ShellExecutor"):
        await ws.spawn("server")
    assert executor.calls == [("make", tmp_path.resolve())]
    await ws.close()


async def test_a_detached_child_holding_the_pipes_does_not_hang_timeout_or_kill(ws):
    # setsid puts the child in its own session: the group kill cannot reach it, and it keeps the pipes.
    started = time.monotonic()
    result = await ws.run("setsid sleep 8 & sleep 30", timeout=1)
    assert result.timed_out and time.monotonic() - started < 6
    start = await ws.spawn("setsid sleep 8 & sleep 30")
    began = time.monotonic()
    out = await ws.kill_process(start.process_id)
    assert out.status == "killed" and time.monotonic() - began < 6
