"""A scripted agent that asks the user through ``ask_human`` (for the agent-views tests)."""

from __future__ import annotations

from typing import Any

from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.tools import HumanChannel, ask_human
from lovia.transcript import ToolResultEntry, TranscriptEntry

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
