"""Give an agent the tools of an MCP server (offline: the server is local, the model scripted).

Run it: ``pip install 'lovia[mcp]'`` then ``python examples/mcp_tools.py``.

The script writes a two-tool MCP server with the official SDK, starts it over stdio through
``MCP(MCPServerStdio(...))``, and lets a scripted model call ``units__convert``. The read-only
tool is marked idempotent (safe to re-run after a crash); the other is gated by approval.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from lovia import Agent, Runner
from lovia.plugins.mcp import MCP, MCPServerStdio
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry

SERVER = '''
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("units")

@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def convert(km: float) -> str:
    """Convert kilometres to miles."""
    return f"{km} km = {km * 0.621371:.2f} mi"

@server.tool()
def order_map(city: str) -> str:
    """Order a paper map (a side effect)."""
    return f"map of {city} ordered"

server.run("stdio")
'''


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "units_server.py"
        script.write_text(SERVER, encoding="utf-8")
        server = MCPServerStdio(
            command=sys.executable,
            args=[str(script)],
            name="units",
            needs_approval=lambda args, ctx: "city" in args,  # only order_map takes a city
        )
        model = ScriptedProvider(
            [
                call("units__convert", {"km": 42.195}),
                call("units__order_map", {"city": "Boston"}),
                text("A marathon is about 26.2 miles."),
            ]
        )
        agent = Agent(
            name="runner",
            model=model,
            plugins=[MCP(server)],
            approval_handler=lambda call, ctx: False,  # deny everything that asks
        )
        result = await Runner.run(agent, "How long is a marathon in miles?")
        offered = sorted(t.name for t in model.requests[0].tools if t.name.startswith("units__"))
        print("tools offered:", ", ".join(offered))
        for entry in result.entries:
            if isinstance(entry, ToolResultEntry):
                print(f"tool result: {entry.output}" + (" (error)" if entry.is_error else ""))
        print("answer:", result.output)


if __name__ == "__main__":
    asyncio.run(main())
