"""A real MCP server built with the official SDK, started by the tests as a child process.

Usage: ``python mcp_server.py stdio`` or ``python mcp_server.py http PORT``. Optional env:
``MCP_TEST_LOG`` (a file the server appends events to: its pid, cancelled calls) and
``MCP_TEST_MODE=badschema`` (one listed tool carries an invalid input schema).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

LOG = os.environ.get("MCP_TEST_LOG")


def log(event: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as fh:
            fh.write(event + "\n")


server = MCPServer("lovia-test")
calls = {"n": 0}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
async def create_ticket(title: str) -> str:
    """Create a ticket (a side effect: not idempotent)."""
    calls["n"] += 1
    log(f"ticket {title}")
    if os.environ.get("LOVIA_CRASH_AT") == "in_tool:mcp":  # the crash kit's run: SIGKILL our client
        os.kill(os.getppid(), signal.SIGKILL)
        await asyncio.sleep(3600)
    return f"ticket #{calls['n']}: {title}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails inside the tool (the server answers isError)."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def crash() -> str:
    """The server process dies mid-call."""
    log("crash")
    os._exit(3)


@server.tool()
async def hang(seconds: float = 3600.0) -> str:
    """Sleeps; records a cancellation that reaches the server."""
    log("hang start")
    try:
        await asyncio.sleep(seconds)
    except BaseException:
        log("hang cancelled")
        raise
    return "woke up"


@server.tool()
async def slow_echo(text: str, delay: float = 0.05) -> str:
    """Echo after a short delay (for concurrency tests)."""
    await asyncio.sleep(delay)
    return f"slow: {text}"


@server.tool()
def garbage() -> str:
    """Its answer is replaced on the wire by a line that is not JSON (see mcp_corrupt.py)."""
    return "CORRUPT_ME"


@server.tool()
def malformed() -> str:
    """Its answer is replaced on the wire by a result of the wrong shape (see mcp_corrupt.py)."""
    return "MALFORM_ME"


@server.tool()
def picture() -> Any:
    """Returns an image and a resource link alongside text."""
    from mcp.types import ImageContent, ResourceLink, TextContent

    return [
        TextContent(type="text", text="a chart"),
        ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
        ResourceLink(type="resource_link", uri="file:///tmp/chart.png", name="chart"),
    ]


if os.environ.get("MCP_TEST_MODE") == "badschema":
    broken = server._tool_manager._tools["add"]  # an invalid schema, as a careless server would list it
    broken.parameters = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "a number, please"}},
        "required": ["a", "b"],
    }


def main() -> None:
    log(f"pid {os.getpid()}")
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))


if __name__ == "__main__":
    main()
