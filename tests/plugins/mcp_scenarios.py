"""Crash-kit scenario for MCP: the agent process is SIGKILLed while an MCP call is in flight.

The kill comes from the server itself (see ``create_ticket`` in mcp_server.py), so it lands
exactly while the client waits for the answer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lovia import Agent
from lovia.plugins.mcp import MCP, MCPServerStdio
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, batch, text
from lovia.testing.crash import CrashScenario
from lovia.transcript import ToolResultEntry

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def turn(entries, tools):
    if not any(isinstance(e, ToolResultEntry) for e in entries):
        return batch(("echo", {"text": "hello"}, "c-echo"), ("create_ticket", {"title": "printer"}, "c-ticket"))
    return text("done")


def mcp_scenario(store: str) -> CrashScenario:
    model = ScriptedProvider(turn)
    env = dict(os.environ, MCP_TEST_LOG=store + ".server.log")
    server = MCPServerStdio(command=sys.executable, args=[SERVER, "stdio"], env=env)
    agent = Agent(name="desk", model=model, plugins=[MCP(server)])
    return CrashScenario(
        agent=agent,
        input="Open a ticket about the printer.",
        session=SQLiteSession(store, wal=True),
        checkpointer=SQLiteCheckpointer(store, wal=True),
        model_calls=lambda: len(model.calls),
    )
