"""A scripted side-query model for Memory tests, and a crash-kit scenario.

The curator answers by the helper's system prompt: digest (facts are user lines starting with
``FACT:``), dream (drops notes containing ``one-off`` and merges case-insensitive duplicates),
query expansion (a tiny synonym table) and recall summaries.
"""

from __future__ import annotations

import asyncio
import json
import re

from lovia import Agent, Memory, RunContext, tool
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.testing.crash import CrashScenario, crash_point, record_effect
from lovia.transcript import InputEntry, ToolResultEntry

SYNONYMS = {"car": "automobile vehicle", "holiday": "vacation trip", "猫": "cat"}


def curator_turn(entries, tools):
    system = str(entries[0].content)
    prompt = next(str(e.content) for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")
    if "curate long-term notes" in system:
        facts = re.findall(r"^USER: FACT: (.+)$", prompt, re.M)
        retire = re.findall(r"^USER: WRONG: (.+)$", prompt, re.M)
        first = re.search(r"^USER: (.+)$", prompt, re.M)
        episode = f"Episode: {first.group(1)}" if first else ""
        return text(json.dumps({"facts": facts, "retire": retire, "episode": episode}))
    if "tidy a list" in system:
        seen, notes = set(), []
        for line in prompt.splitlines():
            note = line[2:].strip() if line.startswith("- ") else ""
            key = re.sub(r"^\[[\d-]+\]\s*", "", note).lower()
            if note and "one-off" not in note and key not in seen:
                seen.add(key)
                notes.append(note)
        return text(json.dumps({"notes": notes}))
    if "Rewrite a search query" in system:
        return text(" ".join(SYNONYMS.get(w, "") for w in prompt.split()).strip() or prompt)
    if "Summarize" in system:
        return text(f"SUMMARY of {prompt.count(chr(10) + '- (')} excerpt(s)")
    return text("?")


def curator() -> ScriptedProvider:
    return ScriptedProvider(curator_turn)


@tool
async def step(ctx: RunContext, name: str) -> str:
    """One slow step (the crash kit may kill the process here)."""
    record_effect(ctx.call_id or "", "step")
    crash_point("step")
    await asyncio.sleep(0.01)
    return f"{name} ok"


def host_turn(entries, tools):
    results = [e for e in entries if isinstance(e, ToolResultEntry)]
    if not results:
        return call("remember", {"fact": "Drinks green tea"}, call_id="r1")
    if len(results) == 1:
        return call("step", {"name": "brew"}, call_id="s1")
    return text("Tea is brewing.")


def memory_scenario(store: str) -> CrashScenario:
    host = ScriptedProvider(host_turn)
    memory = Memory(root=store + ".memory", model=curator(), dream_every_days=None)
    agent = Agent(name="host", model=host, tools=[step], plugins=[memory])
    return CrashScenario(
        agent=agent,
        input="FACT: Lives in Lisbon",
        session=SQLiteSession(store, wal=True),
        checkpointer=SQLiteCheckpointer(store, wal=True),
        model_calls=lambda: len(host.calls),
    )
