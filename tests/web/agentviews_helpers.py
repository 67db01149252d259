"""A scripted agent that asks the user through ``ask_human`` (for the agent-views tests)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from lovia import Agent, Todo, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.tools import HumanChannel, ask_human
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry

from .helpers import last_user


def asking_agent(channel: HumanChannel) -> Agent[Any]:
    """``ask ...`` asks which colour (two options), then repeats the answer; other messages are echoed."""

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said, results = last_user(entries)
        if said.startswith("ask") and results == 0:
            options = [{"label": "Red"}, {"label": "Blue", "description": "the calm one"}]
            return call("ask_human", {"question": "Which colour?", "options": options}, call_id="call_ask_1")
        if results:
            last = next(e for e in reversed(entries) if isinstance(e, ToolResultEntry))
            return text(f"You picked {last.output}.")
        return text(f"You said: {said}")

    return Agent(name="asker", model=ScriptedProvider(script), tools=[ask_human(channel)])


def todo_agent(release: threading.Event) -> Agent[Any]:
    """``plan ...`` writes a two-item list, waits for ``release``, completes both items and answers."""

    @tool
    async def wait_here() -> str:
        """Wait until the test lets the run go on."""
        while not release.is_set():
            await asyncio.sleep(0.02)
        return "released"

    first = [
        {"content": "Fetch data", "status": "in_progress", "active_form": "Fetching data"},
        {"content": "Write report", "status": "pending"},
    ]
    done = [{"content": "Fetch data", "status": "completed"}, {"content": "Write report", "status": "completed"}]

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        # the plugin's per-turn reminder is a user entry too: read the conversation without it
        real = [e for e in entries if not (isinstance(e, InputEntry) and e.text.startswith("<system-reminder>"))]
        said, results = last_user(real)
        if not said.startswith("plan"):
            return text(f"You said: {said}")
        steps = [
            lambda: call("todo_write", {"todos": first}, call_id=f"call_todo_a_{len(entries)}"),
            lambda: call("wait_here", {}, call_id=f"call_wait_{len(entries)}"),
            lambda: call("todo_write", {"todos": done}, call_id=f"call_todo_b_{len(entries)}"),
        ]
        return steps[results]() if results < len(steps) else text("All done.")

    return Agent(name="planner", model=ScriptedProvider(script), tools=[wait_here], plugins=[Todo()])
