"""The offline demo model: canned, clearly labelled replies so a newcomer can see the app work.

It is not a language model. It streams a short Markdown answer that says so, and calls its one
tool (``clock``) when the message mentions the time or a tool, to show how tool calls look.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ..agent import Agent
from ..messages import Usage
from ..providers.base import ToolDefinition
from ..providers.scripted import ScriptedProvider, ScriptedTurn
from ..tools import tool
from ..transcript import (
    FinishDelta,
    InputEntry,
    ModelDelta,
    TextDelta,
    ToolCallDelta,
    ToolResultEntry,
    TranscriptEntry,
    UsageDelta,
)

__all__ = ["DEMO_AGENT_NAME", "DemoModel", "demo_agent"]

DEMO_AGENT_NAME = "demo"
_TOOL_WORDS = ("time", "clock", "tool", "date")

_HOW_TO = (
    "To chat with a real model, stop the server and start it with a model configured, e.g.\n\n"
    "```sh\nexport LOVIA_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=sk-...\nlovia web\n```\n\n"
    "Any OpenAI-compatible server works too (`OPENAI_BASE_URL=http://localhost:11434/v1`), "
    "and `LOVIA_MODEL=anthropic:<model>` with `ANTHROPIC_API_KEY` for Anthropic."
)


@tool
def clock() -> str:
    """The server's local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


class DemoModel(ScriptedProvider):
    """A scripted provider that answers every message from a fixed script (offline, no tokens spent)."""

    def __init__(self, *, delay: float = 0.01) -> None:
        self._delay = delay
        super().__init__(self._answer, model="offline-demo", record=False)

    @property
    def name(self) -> str:
        """Provider name."""
        return "demo"

    def _answer(self, entries: list[TranscriptEntry], tools: list[ToolDefinition]) -> ScriptedTurn:
        last = entries[-1] if entries else None
        tool_names = {t.name for t in tools}
        if isinstance(last, InputEntry) and "clock" in tool_names and any(w in last.text.lower() for w in _TOOL_WORDS):
            calls: tuple[ModelDelta, ...] = (
                ToolCallDelta(index=0, call_id=f"call_{uuid.uuid4().hex[:10]}", name="clock"),
                ToolCallDelta(index=0, arguments=json.dumps({})),
                UsageDelta(Usage(input_tokens=0, output_tokens=0)),
                FinishDelta("tool_calls"),
            )
            return ScriptedTurn(calls)
        pieces: list[ModelDelta] = [TextDelta(piece) for piece in _chunks(_reply(last))]
        pieces += [UsageDelta(Usage(input_tokens=0, output_tokens=0)), FinishDelta("stop")]
        return ScriptedTurn(tuple(pieces), delay=self._delay)


def _reply(last: TranscriptEntry | None) -> str:
    if isinstance(last, ToolResultEntry):
        note = "_(Offline demo model: canned reply, no language model involved.)_"
        return f"The `clock` tool says: **{last.output}**.\n\n{note}"
    said = last.text if isinstance(last, InputEntry) else ""
    quoted = "\n".join(f"> {line}" for line in said.splitlines()[:6]) or "> (empty)"
    return (
        "**This is the offline demo model**: it does not understand you, it only shows how the app works.\n\n"
        f"You wrote:\n\n{quoted}\n\n"
        "Try asking *what time is it?* to see a tool call.\n\n" + _HOW_TO
    )


def _chunks(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def demo_agent() -> Agent[Any]:
    """The agent served as the offline demo."""
    return Agent(
        name=DEMO_AGENT_NAME,
        instructions="You are the offline demo of lovia's web app.",
        model=DemoModel(),
        tools=[clock],
    )
