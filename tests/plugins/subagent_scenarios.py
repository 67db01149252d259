"""Crash-kit scenarios for Subagents: a parent that spawns a checkpointed child and waits for it."""

from __future__ import annotations

import asyncio
import re

from lovia import Agent, RunContext, Subagents, tool
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.testing.crash import CrashScenario, crash_point, record_effect
from lovia.transcript import ToolCallEntry, ToolResultEntry


@tool
async def dig(ctx: RunContext, site: str) -> str:
    """The child's work (the kit may kill the whole process in here)."""
    record_effect(ctx.call_id or "", "dig")
    crash_point("dig")
    await asyncio.sleep(0.01)
    return f"found a coin at {site}"


@tool
async def file_report(ctx: RunContext, summary: str) -> str:
    """The parent's last step (the kit may kill the process in here)."""
    record_effect(ctx.call_id or "", "file_report")
    crash_point("file_report")
    return "filed"


def child_turn(entries, tools):
    if not any(isinstance(e, ToolResultEntry) for e in entries):
        return call("dig", {"site": "north field"}, call_id="child-dig")
    return text("Report: " + next(e.output for e in entries if isinstance(e, ToolResultEntry)))


def _result(entries, name):
    calls = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
    return [e for e in entries if isinstance(e, ToolResultEntry) and calls.get(e.call_id) == name]


def parent_turn(entries, tools):
    spawned = _result(entries, "spawn_subagent")
    if not spawned:
        return call("spawn_subagent", {"prompt": "Dig at the north field.", "agent": "digger"}, call_id="p-spawn")
    cid = re.match(r"Started subagent (\S+)", spawned[0].output).group(1)
    waited = _result(entries, "wait_subagents")
    if not waited:
        return call("wait_subagents", {"ids": [cid], "timeout_seconds": 30}, call_id="p-wait")
    filed = _result(entries, "file_report")
    if not filed:
        return call("file_report", {"summary": waited[0].output}, call_id="p-file")
    report = re.search(r"Report: (.+)", waited[0].output)
    return text(f"Done. {report.group(1) if report else 'no report'}")


def subagent_scenario(store: str) -> CrashScenario:
    parent_model = ScriptedProvider(parent_turn)
    child_model = ScriptedProvider(child_turn)
    checkpointer = SQLiteCheckpointer(store, wal=True)
    digger = Agent(name="digger", model=child_model, tools=[dig])
    plugin = Subagents([digger], checkpointer=checkpointer)
    parent = Agent(name="lead", model=parent_model, tools=[file_report], plugins=[plugin])
    return CrashScenario(
        agent=parent,
        input="Find out what is in the north field.",
        session=SQLiteSession(store, wal=True),
        checkpointer=checkpointer,
        model_calls=lambda: len(parent_model.calls) + len(child_model.calls),
    )
