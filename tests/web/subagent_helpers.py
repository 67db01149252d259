"""A scripted agent with background subagents: "delegate <job>" spawns a child that waits on a gate."""

from __future__ import annotations

import threading
import time
from typing import Any

from lovia import Agent, tool
from lovia.plugins.subagents import Subagents
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry


def last_user(entries: list[TranscriptEntry]) -> tuple[str, int]:
    """The last user message, skipping the plugin's status reminders, and the tool results after it."""
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if isinstance(e, InputEntry) and e.role == "user" and not e.text.startswith("<system-reminder>"):
            return e.text, sum(1 for x in entries[i:] if isinstance(x, ToolResultEntry))
    return "", 0


def delegating_agent(release: threading.Event) -> Agent[Any]:
    """Parent: ``delegate <job>`` spawns a child on ``job <job>``. Child: waits for ``release``, answers.

    When the report comes back (a new run of the parent chat), the parent says so.
    """

    @tool
    async def wait_for_go() -> str:
        """Wait until the test says go."""
        import asyncio

        deadline = time.monotonic() + 60
        while not release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return "go"

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said, results = last_user(entries)
        if said.startswith("spawn and cancel"):
            if results == 0:
                return call("spawn_subagent", {"prompt": "job never done"}, call_id=f"call_spawn_{len(entries)}")
            if results == 1:
                started = next(e for e in reversed(entries) if isinstance(e, ToolResultEntry)).output
                child = started.split()[2]  # "Started subagent <id> (<agent>). ..."
                return call("cancel_subagent", {"id": child}, call_id=f"call_cancel_{len(entries)}")
            return text("Cancelled it.")
        if said.startswith("delegate and wait"):
            if results == 0:
                return call("spawn_subagent", {"prompt": "job quick"}, call_id=f"call_spawn_{len(entries)}")
            if results == 1:
                return call("wait_subagents", {"timeout_seconds": 30}, call_id=f"call_wait_sub_{len(entries)}")
            return text("Waited.")
        if said.startswith("delegate") and results == 0:
            job = said.split(maxsplit=1)[1] if " " in said else "something"
            return call("spawn_subagent", {"prompt": f"job {job}"}, call_id=f"call_spawn_{len(entries)}")
        if said.startswith("delegate"):
            return text("I started a helper on it.")
        if said.startswith("job") and results == 0:
            return call("wait_for_go", {}, call_id=f"call_wait_{len(entries)}")
        if said.startswith("job"):
            return text(f"Child finished: {said}.")
        if said.startswith("<subagent-report"):
            return text("The helper reported back.")
        return text(f"You said: {said}")

    return Agent(name="lead", model=ScriptedProvider(script), tools=[wait_for_go], plugins=[Subagents()])
