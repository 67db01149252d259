"""Memory across two conversations (offline: host model and curator model are scripted).

Run it: ``python examples/memory_notes.py``.

Run 1: the user states a fact; at run end the curator model promotes it into MEMORY.md and writes
an episode summary into the archive. Run 2, a new session: the notes are in the system prompt and
the model searches the archive with ``recall``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from lovia import Agent, Memory, Runner, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry


def curator(entries, tools):
    """Answers the memory side queries by their instructions."""
    system = str(entries[0].content)
    if "curate long-term notes" in system:
        return text(json.dumps({"facts": ["Is vegetarian"], "retire": [], "episode": "Planned a vegetarian dinner."}))
    if "Summarize" in system:
        return text("Earlier the user planned a vegetarian dinner party.")
    return text("dinner supper meal party")  # query expansion


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "memory"
        memory = Memory(root, model=ScriptedProvider(curator))
        chats = SQLiteSession(str(Path(tmp) / "chats.db"))

        first = ScriptedProvider([text("Great, a vegetarian menu it is.")])
        agent = Agent(name="chef", model=first, plugins=[memory])
        await Runner.run(agent, "I'm vegetarian; help me plan a dinner party.", session=chats, session_id="monday")
        print("MEMORY.md after run 1:", (root / "MEMORY.md").read_text().strip())

        second = ScriptedProvider([call("recall", {"query": "dinner"}), text("Another vegetarian menu, then.")])
        agent = Agent(name="chef", model=second, plugins=[memory])
        result = await Runner.run(agent, "What did we plan last time?", session=chats, session_id="friday")
        system = second.requests[0].entries[0]
        assert isinstance(system, InputEntry)
        print("notes in run 2's prompt:", [ln for ln in str(system.content).splitlines() if ln.startswith("- [")])
        for entry in result.entries:
            if isinstance(entry, ToolResultEntry):
                print("recall:", entry.output)


if __name__ == "__main__":
    asyncio.run(main())
