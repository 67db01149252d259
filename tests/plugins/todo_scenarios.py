"""Crash-kit scenario for Todo: the model steers by the reminder it sees, so a lost list shows."""

from __future__ import annotations

import asyncio
import re

from lovia import Agent, RunContext, tool
from lovia.plugins.todo import Todo
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.testing.crash import CrashScenario, crash_point, record_effect
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

STEPS = ["draft", "review", "ship"]


@tool
async def step(ctx: RunContext, name: str) -> str:
    """Do one step of the plan."""
    record_effect(ctx.call_id or "", "step")
    crash_point("step")
    await asyncio.sleep(0.01)
    return f"{name} done"


def _count(entries, name: str) -> int:
    calls = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
    return sum(1 for e in entries if isinstance(e, ToolResultEntry) and calls.get(e.call_id) == name)


def _reminder(entries) -> str | None:
    for e in reversed(entries):
        if isinstance(e, InputEntry) and isinstance(e.content, str) and "<system-reminder>" in e.content:
            return e.content
    return None


def _plan(done: int) -> dict:
    todos = []
    for i, s in enumerate(STEPS):
        status = "completed" if i < done else ("in_progress" if i == done else "pending")
        todos.append({"content": s, "status": status})
    return {"todos": todos}


def planner_turn(entries, tools):
    writes, steps = _count(entries, "todo_write"), _count(entries, "step")
    if writes == 0:
        return call("todo_write", _plan(0), call_id="w0")
    if writes == steps + 1 and steps < len(STEPS):
        reminder = _reminder(entries)
        active = re.search(r"^\[~\] (\w+)$", reminder or "", re.M)
        if active is None:
            return text("I lost my todo list.")
        return call("step", {"name": active.group(1)}, call_id=f"s{steps}")
    if writes == steps:
        return call("todo_write", _plan(steps), call_id=f"w{writes}")
    return text("finished:\n" + (_reminder(entries) or "no reminder"))


def todo_scenario(store: str) -> CrashScenario:
    model = ScriptedProvider(planner_turn)
    agent = Agent(name="planner", instructions="Plan, then work.", model=model, tools=[step], plugins=[Todo()])
    return CrashScenario(
        agent=agent,
        input="Draft, review and ship the note.",
        session=SQLiteSession(store, wal=True),
        checkpointer=SQLiteCheckpointer(store, wal=True),
        model_calls=lambda: len(model.calls),
    )
