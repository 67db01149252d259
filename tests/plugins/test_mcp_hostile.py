"""MCP servers that fight back: listings that fail, hang or never end, and servers that fork.

Real servers built with the official SDK (mcp_hostile.py) run as child processes; whether a
process is still there is read from /proc, while the event loop keeps running (a cleanup that
only happens when the loop shuts down does not count).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from lovia import Agent, MCPError, Runner  # noqa: E402
from lovia.plugins.mcp import MCP, MCPServerStdio, render_mcp_content  # noqa: E402
from lovia.testing import ScriptedProvider, text  # noqa: E402
from tests.plugins.test_mcp import alive, log_lines, pids, wait_for_line  # noqa: E402

HOSTILE = str(Path(__file__).resolve().with_name("mcp_hostile.py"))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "server.log"


def hostile(log: Path, mode: str, **env: str) -> MCPServerStdio:
    return MCPServerStdio(
        command=sys.executable, args=[HOSTILE, mode], env=dict(os.environ, MCP_TEST_LOG=str(log), **env)
    )


async def still_alive_after(pid_list: list[int], seconds: float = 6.0) -> list[int]:
    """The processes still running after ``seconds`` (polling, with the event loop free to work)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pid_list):
            return []
        await asyncio.sleep(0.05)
    return [p for p in pid_list if alive(p)]


def grandchildren(log: Path) -> list[int]:
    return [int(line.split()[1]) for line in log_lines(log) if line.startswith("grandchild ")]


async def test_a_listing_that_fails_closes_the_server_process(log: Path) -> None:
    with pytest.raises(MCPError, match="listing tools failed") as err:
        await hostile(log, "list-fails").open()
    assert err.value.hint
    assert pids(log), "the server never started"
    assert await still_alive_after(pids(log)) == [], "the server outlived its failed listing"


async def test_runs_whose_listing_fails_leave_no_server_behind(log: Path) -> None:
    # What `lovia web` does per message: a run opens the server in setup; the listing fails.
    agent = Agent(name="a", model=ScriptedProvider([text("never")]), plugins=[MCP(hostile(log, "list-fails"))])
    for _ in range(3):
        with pytest.raises(MCPError):
            await Runner.run(agent, "hello")
    assert len(pids(log)) == 3
    assert await still_alive_after(pids(log)) == [], "one orphaned server per run"


async def test_a_cancelled_listing_closes_the_server_process(log: Path) -> None:
    opening = asyncio.ensure_future(hostile(log, "list-hangs").open())
    await wait_for_line(log, "list start")
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    assert await still_alive_after(pids(log)) == [], "the server outlived the cancelled listing"


async def test_a_server_whose_cursor_never_ends_hits_the_page_cap(log: Path) -> None:
    started = time.monotonic()
    with pytest.raises(MCPError, match="more than 100 pages") as err:
        await hostile(log, "endless").open()
    assert time.monotonic() - started < 20
    assert err.value.hint and "cursor" in err.value.hint
    assert await still_alive_after(pids(log)) == []


async def test_a_slow_endless_listing_ends_at_the_listing_deadline(log: Path) -> None:
    # open_timeout bounds the handshake, then the whole listing again (not each page).
    conn = hostile(log, "endless", MCP_TEST_PAGE_DELAY="1.0").connection()
    conn.open_timeout = 6.0
    opening = asyncio.ensure_future(conn.open())
    await wait_for_line(log, "list start")
    started = time.monotonic()  # the handshake is over, the listing has begun
    with pytest.raises(MCPError, match="did not finish within 6s") as err:
        await opening
    assert time.monotonic() - started < 7.5
    assert err.value.hint and "open_timeout" in err.value.hint
    assert await still_alive_after(pids(log)) == []


async def test_a_process_the_server_started_is_gone_after_close(log: Path) -> None:
    async with await hostile(log, "grandchild").open() as conn:
        result = await conn.call_tool("echo", {"text": "hi"})
        assert render_mcp_content(result.content) == "echo: hi"
        [sleeper] = grandchildren(log)
        assert alive(sleeper)
    assert await still_alive_after(pids(log) + [sleeper]) == [], "the server's child outlived the connection"


PARENT = """
import asyncio, sys
from lovia.plugins.mcp import MCPServerStdio
async def main():
    await MCPServerStdio(command=sys.executable, args=[sys.argv[1], "grandchild"]).open()
    print("ready", flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


async def test_when_the_client_is_sigkilled_the_servers_children_go_too(log: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, HOSTILE],
        env=dict(os.environ, MCP_TEST_LOG=str(log)),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        [server], [sleeper] = pids(log), grandchildren(log)
        assert alive(server) and alive(sleeper)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        parent.stdout.close()  # type: ignore[union-attr]
    assert await still_alive_after([server, sleeper]) == [], "the server or its child survived the client's SIGKILL"
