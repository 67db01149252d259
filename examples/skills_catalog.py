"""Skills with progressive disclosure (offline: the model is scripted).

Run it: ``python examples/skills_catalog.py``.

The agent's prompt carries only the index line of ``examples/skills/refund-policy``. The scripted
model loads the skill's body with ``load_skill`` and its tier table with ``read_skill_file``, and
a path that tries to leave the skill's directory comes back as an error the model can read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lovia import Agent, Runner, Skills
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry

SKILLS = Path(__file__).resolve().parent / "skills"


async def main() -> None:
    model = ScriptedProvider(
        [
            call("load_skill", {"name": "refund-policy"}),
            call("read_skill_file", {"name": "refund-policy", "relpath": "references/tiers.md"}),
            call("read_skill_file", {"name": "refund-policy", "relpath": "../../skills_catalog.py"}),
            text("Silver customers have 30 days, so this refund is fine."),
        ]
    )
    agent = Agent(name="support", instructions="Help customers.", model=model, plugins=[Skills(SKILLS)])
    result = await Runner.run(agent, "I'm on silver and bought this 20 days ago. Refund?")
    index = [ln for ln in str(model.requests[0].entries[0].content).splitlines() if ln.startswith("- `")]
    print("index in the prompt:", *index, sep="\n  ")
    for entry in result.entries:
        if isinstance(entry, ToolResultEntry):
            print("tool result:", entry.output.splitlines()[0], "...")
    print("answer:", result.output)


if __name__ == "__main__":
    asyncio.run(main())
