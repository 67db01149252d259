"""A model that plans with a todo list, and a list that outlives the run (offline, scripted model).

Run it: ``python examples/todo_list.py``.

The first run writes a three-step plan with ``todo_write`` and finishes one step. Each turn, the
model's view ends with a reminder of the current list; that reminder is never stored. A second
run in the same session starts with the list rebuilt from the stored ``todo_write`` calls.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from lovia import Agent, Runner, SQLiteSession, Todo, events
from lovia.plugins import render_todos, todos_from_entries
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry


def plan(done: int) -> dict:
    steps = ["Outline the talk", "Write the slides", "Rehearse"]
    todos = [
        {"content": s, "status": "completed" if i < done else "in_progress" if i == done else "pending"}
        for i, s in enumerate(steps)
    ]
    return {"todos": todos}


def last_reminder(model: ScriptedProvider) -> str:
    view = model.requests[-1].entries
    found = [e.content for e in view if isinstance(e, InputEntry) and "<system-reminder>" in str(e.content)]
    return str(found[-1]) if found else "(none)"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        session = SQLiteSession(str(Path(tmp) / "chat.db"))
        first = ScriptedProvider([call("todo_write", plan(0)), call("todo_write", plan(1)), text("Outline done.")])
        agent = Agent(name="speaker", model=first, plugins=[Todo()])
        handle = Runner.stream(agent, "Prepare my talk.", session=session, session_id="talk")
        async for ev in handle:
            if isinstance(ev, events.ToolCallCompleted) and ev.call.name == "todo_write":
                print("list after a write:\n" + render_todos(ev.result))
        await handle.result()
        print("reminder in the last view of run 1:\n" + last_reminder(first))

        second = ScriptedProvider([text("Back to the slides.")])
        agent = Agent(name="speaker", model=second, plugins=[Todo()])
        await Runner.run(agent, "Where were we?", session=session, session_id="talk")
        print("reminder in the first view of run 2:\n" + last_reminder(second))
        stored = todos_from_entries(await session.load("talk"))
        print("rebuilt from the session:", [f"{t.content}={t.status}" for t in stored])


if __name__ == "__main__":
    asyncio.run(main())
