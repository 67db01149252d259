"""An MCP server (official SDK) that misbehaves on purpose while listing or while running.

Usage: ``python mcp_hostile.py MODE`` over stdio. ``MCP_TEST_LOG`` names a file the server
appends events to (``pid N`` first, like mcp_server.py). Modes:

- ``list-fails``: tools/list answers a JSON-RPC error.
- ``list-hangs``: tools/list never answers (logs ``list start``).
- ``endless``: every tools/list page carries a next cursor, so the listing never ends
  (``MCP_TEST_PAGE_DELAY`` seconds per page, default 0).
- ``grandchild``: at start-up spawns a long-sleeping child of its own (logs ``grandchild N``),
  then serves normally.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ListToolsResult, Tool

LOG = os.environ.get("MCP_TEST_LOG")
MODE = sys.argv[1]


def log(event: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as fh:
            fh.write(event + "\n")


class Hostile(MCPServer):
    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        log("list start")
        if MODE == "list-fails":
            raise RuntimeError("the tool registry is corrupt")
        if MODE == "list-hangs":
            await asyncio.sleep(3600)
        if MODE == "endless":
            page = int(params.cursor) if params is not None and params.cursor else 0
            await asyncio.sleep(float(os.environ.get("MCP_TEST_PAGE_DELAY", "0")))
            tool = Tool(name=f"tool_{page}", description="x" * 1000, input_schema={"type": "object"})
            return ListToolsResult(tools=[tool], next_cursor=str(page + 1))
        return await super()._handle_list_tools(ctx, params)


server = Hostile("lovia-hostile")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


def main() -> None:
    log(f"pid {os.getpid()}")
    if MODE == "grandchild":
        # stays in the server's process group, and outlives the server unless someone ends it
        sleeper = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        log(f"grandchild {sleeper.pid}")
    server.run("stdio")


if __name__ == "__main__":
    main()
