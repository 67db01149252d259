"""What a command starts in a new session (``setsid``) or leaves orphaned dies with it, or is named."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest

from lovia.workspace import LocalWorkspaceSession, WorkspacePolicy

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")


def _marked() -> tuple[str, str]:
    """A marker, and a command starting two new-session children that redirect their output away."""
    marker = f"lovia-setsid-{uuid.uuid4().hex[:8]}"
    children = (
        f"setsid bash -c 'exec -a {marker} sleep 300' </dev/null >/dev/null 2>&1 & "
        f"setsid sh -c 'bash -c \"exec -a {marker} sleep 300\"; :' </dev/null >/dev/null 2>&1 & "
    )
    return marker, children


def _alive(marker: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline.startswith(marker.encode()) and state != "Z":
            out.append(int(pid))
    return out


async def _until_running(marker: str, count: int = 2) -> None:
    deadline = time.monotonic() + 10
    while len(_alive(marker)) < count:
        assert time.monotonic() < deadline, "the setsid children never started"
        await asyncio.sleep(0.05)


async def _gone(marker: str) -> bool:
    deadline = time.monotonic() + 3
    while _alive(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _cleanup(marker: str) -> None:
    for pid in _alive(marker):
        os.kill(pid, 9)


@pytest.fixture
async def ws(tmp_path: Path):
    session = LocalWorkspaceSession(root=tmp_path, policy=WorkspacePolicy.trusted())
    yield session
    await session.close()


async def test_a_timeout_kills_setsid_children(ws: LocalWorkspaceSession) -> None:
    marker, children = _marked()
    try:
        result = await ws.run(children + "sleep 300", timeout=1.5)
        assert result.timed_out
        assert await _gone(marker), f"survivors: {_alive(marker)}"
        assert "every process it started were killed" in result.stderr
        assert "could NOT kill" not in result.stderr
    finally:
        _cleanup(marker)


async def test_kill_process_kills_setsid_children(ws: LocalWorkspaceSession) -> None:
    marker, children = _marked()
    try:
        start = await ws.spawn(children + "sleep 300")
        await _until_running(marker)
        out = await ws.kill_process(start.process_id)
        assert out.status == "killed"
        assert await _gone(marker), f"survivors: {_alive(marker)}"
        assert "could NOT kill" not in out.output
    finally:
        _cleanup(marker)


async def test_close_kills_setsid_children_of_a_background_command(tmp_path: Path) -> None:
    marker, children = _marked()
    ws = LocalWorkspaceSession(root=tmp_path, policy=WorkspacePolicy.trusted())
    try:
        await ws.spawn(children + "sleep 300")
        await _until_running(marker)
        await ws.close()
        assert await _gone(marker), f"survivors: {_alive(marker)}"
    finally:
        _cleanup(marker)


async def test_kill_process_finds_setsid_daemons_whose_shell_already_exited(ws: LocalWorkspaceSession) -> None:
    marker, children = _marked()
    try:
        start = await ws.spawn(children + "echo started")
        await _until_running(marker)
        deadline = time.monotonic() + 10
        while (await ws.read_process_output(start.process_id)).status == "running":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        # The shell is gone; its setsid children were re-parented away from it.
        await ws.kill_process(start.process_id)
        assert await _gone(marker), f"survivors: {_alive(marker)}"
    finally:
        _cleanup(marker)


async def test_a_setsid_child_holding_the_output_is_killed_after_the_linger(ws: LocalWorkspaceSession) -> None:
    marker = f"lovia-setsid-{uuid.uuid4().hex[:8]}"
    try:
        result = await ws.run(f"setsid bash -c 'exec -a {marker} sleep 300' & echo started")
        assert "started" in result.stdout and "it was killed" in result.stderr
        assert await _gone(marker), f"survivors: {_alive(marker)}"
    finally:
        _cleanup(marker)
