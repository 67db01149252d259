"""Passive views of background processes: the output tail and a kill that consumes nothing."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from lovia.workspace import Workspace, WorkspaceError, WorkspaceLimits
from lovia.workspace._proc import PEEK_TAIL_BYTES


@pytest.fixture
async def ws(tmp_path: Path):
    session = await Workspace.local(str(tmp_path), mode="trusted", shell_timeout=30).open()
    yield session
    await session.close()


async def _until(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_peek_shows_output_without_consuming_it(ws):
    start = await ws.spawn("echo one; echo two; exit 3")

    async def exited():
        return (await ws.peek_process_output(start.process_id)).status == "exited"

    await _until(exited)
    first = await ws.peek_process_output(start.process_id)
    again = await ws.peek_process_output(start.process_id)
    assert first.output.split() == ["one", "two"] and again.output == first.output
    assert first.exit_code == 3 and not first.truncated
    assert not ws.background_processes()[0].exit_seen  # peeking never delivers the exit to the model
    model = await ws.read_process_output(start.process_id)
    assert model.output.split() == ["one", "two"] and model.exit_code == 3
    # The model's read drained its buffer; the viewer's tail is still whole.
    assert (await ws.read_process_output(start.process_id)).output == ""
    assert (await ws.peek_process_output(start.process_id)).output.split() == ["one", "two"]


async def test_peek_follows_a_running_process(ws):
    start = await ws.spawn("echo first; sleep 60")

    async def printed():
        return "first" in (await ws.peek_process_output(start.process_id)).output

    await _until(printed)
    out = await ws.peek_process_output(start.process_id)
    assert out.status == "running" and out.exit_code is None


async def test_the_tail_is_bounded_and_says_so(tmp_path):
    ws = await Workspace.local(str(tmp_path), mode="trusted", limits=WorkspaceLimits(max_shell_output_chars=500)).open()
    try:
        # Multi-byte characters across the cut: the tail must still start at a whole character.
        start = await ws.spawn("python3 -c \"import sys; sys.stdout.write('é' * 50000 + 'END')\"")

        async def done():
            return ws.background_processes()[0].status == "exited"

        await _until(done)
        out = await ws.peek_process_output(start.process_id)
        assert out.truncated and out.output.endswith("END")
        assert len(out.output.encode()) <= PEEK_TAIL_BYTES and len(out.output) > 30000
        assert "\ufffd" not in out.output
        model = await ws.read_process_output(start.process_id)  # the model's own cap is independent
        assert model.truncated and "dropped" in model.output
    finally:
        await ws.close()


async def test_stop_kills_the_group_and_leaves_the_output_to_the_model(ws):
    start = await ws.spawn("sleep 60 & echo ready; wait")

    async def ready():
        return "ready" in (await ws.peek_process_output(start.process_id)).output

    await _until(ready)
    group = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == start.pid]
    assert len(group) >= 2
    status = await ws.stop_process(start.process_id)
    assert status.status == "killed" and not status.exit_seen

    async def gone():
        return not any(_alive(pid) for pid in group)

    await _until(gone)
    model = await ws.read_process_output(start.process_id)
    assert model.status == "killed" and "ready" in model.output
    assert ws.background_processes()[0].exit_seen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")  # a zombie is dead


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


async def test_unknown_ids_and_a_closed_session_raise(tmp_path):
    ws = await Workspace.local(str(tmp_path), mode="trusted").open()
    with pytest.raises(WorkspaceError, match="no background process"):
        await ws.peek_process_output("p7")
    with pytest.raises(WorkspaceError, match="no background process"):
        await ws.stop_process("p7")
    await ws.close()
    with pytest.raises(WorkspaceError, match="closed"):
        await ws.peek_process_output("bg-1")
