"""A hostile pattern cannot stall the process: matching runs in a worker killed at its deadline."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from lovia.workspace import LocalWorkspaceSession, WorkspaceLimits, WorkspacePolicy
from lovia.workspace.errors import WorkspaceError

# Shapes the static guard does not catch; each backtracks exponentially on "aaaa...!".
HOSTILE = ["((a+))+$", "(?:(a+))+$", "(a|a)+$", "(a|aa)+$"]


async def _heartbeat(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


@pytest.mark.parametrize("pattern", HOSTILE)
async def test_a_hostile_grep_times_out_while_the_loop_keeps_beating(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "crafted.txt").write_text("a" * 40 + "!\n")
    (tmp_path / "plain.txt").write_text("nothing here\n")
    ws = LocalWorkspaceSession(
        root=tmp_path, policy=WorkspacePolicy.coding(), limits=WorkspaceLimits(max_grep_seconds=1.5)
    )
    gaps: list[float] = []
    stop = asyncio.Event()
    beat = asyncio.create_task(_heartbeat(gaps, stop))
    started = time.monotonic()
    try:
        with pytest.raises(WorkspaceError, match="did not finish within 1.5s") as info:
            await ws.grep(pattern)
    finally:
        stop.set()
        await beat
        await ws.close()
    took = time.monotonic() - started
    assert info.value.hint
    assert took < 5.0
    assert len(gaps) > 20
    # Nine in ten beats under 100 ms apart (the machine is shared), and no stall at all.
    ordered = sorted(gaps)
    assert ordered[int(len(ordered) * 0.9)] < 0.1 and ordered[-1] < 0.75, f"the loop stalled: {ordered[-5:]}"


async def test_the_worker_is_gone_after_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "crafted.txt").write_text("a" * 40 + "!\n")
    ws = LocalWorkspaceSession(root=tmp_path, limits=WorkspaceLimits(max_grep_seconds=0.5))
    before = set(_children())
    with pytest.raises(WorkspaceError, match="did not finish"):
        await ws.grep("(a|a)+$")
    assert set(_children()) - before == set()


def _children() -> list[int]:
    me = str(os.getpid())
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                out.append(int(pid))
    return out


async def test_grep_still_finds_lines_and_honours_flags(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Alpha\nbeta\nALPHA beta\n")
    (tmp_path / "b.txt").write_text("gamma\n")
    ws = LocalWorkspaceSession(root=tmp_path)
    hits = await ws.grep("alpha", ignore_case=True)
    assert [(m.path, m.line, m.text) for m in hits] == [("a.txt", 1, "Alpha"), ("a.txt", 3, "ALPHA beta")]
    assert await ws.grep("\x00") == []
    assert [m.line for m in await ws.grep("beta", max_matches=1)] == [2]
