"""A scripted agent for server-in-a-subprocess tests: ``lovia web --app tests.web.app_fixture:agent``.

The model is a deterministic function of the transcript, so a restarted process continues the
same script. Tools append to ``$LOVIA_FIXTURE_LOG`` so a test can count executions across
processes; ``slow`` takes ``$LOVIA_FIXTURE_SLOW`` seconds (default 0.2), and the final answer
streams one character every ``$LOVIA_FIXTURE_TEXT_DELAY`` seconds (default 0: at once).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry


def _log(line: str) -> None:
    path = os.environ.get("LOVIA_FIXTURE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


@tool
def quick(item: str) -> str:
    """A fast tool."""
    _log("quick")
    return f"quick:{item}"


@tool
async def slow(item: str) -> str:
    """A slow, idempotent tool."""
    _log("slow:start")
    await asyncio.sleep(float(os.environ.get("LOVIA_FIXTURE_SLOW", "0.2")))
    _log("slow:done")
    return f"slow:{item}"


ANSWER = "All done: quick and slow both finished."


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    done = sum(1 for e in entries if isinstance(e, ToolResultEntry))
    if done == 0:
        return call("quick", {"item": "a"}, call_id="call_quick")
    if done == 1:
        return call("slow", {"item": "b"}, call_id="call_slow")
    return text(ANSWER, delay=float(os.environ.get("LOVIA_FIXTURE_TEXT_DELAY", "0")))


agent = Agent(name="fixture", model=ScriptedProvider(script), tools=[quick, slow])
