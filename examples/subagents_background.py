"""Background subagents (offline: every model is scripted).

Run it: ``python examples/subagents_background.py``.

The lead agent starts two researchers, keeps working while they run, steers one of them, and
collects both reports with ``wait_subagents``. Each child is a run of its own, checkpointed in the
same SQLite file as the parent, so a crashed parent would resume with its children.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

from lovia import Agent, Runner, SQLiteCheckpointer, Subagents, events
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry


def researcher_turn(entries, tools):
    asks = [str(e.content) for e in entries if isinstance(e, InputEntry) and e.role == "user"]
    return text(f"Findings on {asks[0]!r}" + (f" (also: {asks[1]})" if len(asks) > 1 else ""), delay=0.05)


def lead_turn(entries, tools):
    results = [e for e in entries if isinstance(e, ToolResultEntry)]
    ids = [m.group(1) for e in results if (m := re.match(r"Started subagent (\S+)", e.output))]
    step = len(results)
    if step == 0:
        return call("spawn_subagent", {"prompt": "solar panels"}, call_id="spawn-a")
    if step == 1:
        return call("spawn_subagent", {"prompt": "heat pumps"}, call_id="spawn-b")
    if step == 2:
        return call("send_to_subagent", {"id": ids[1], "message": "compare running costs"}, call_id="steer")
    if step == 3:
        return call("wait_subagents", {"ids": ids, "timeout_seconds": 10}, call_id="wait")
    return text("Both reports are in; heat pumps win on running costs.")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        checkpointer = SQLiteCheckpointer(str(Path(tmp) / "runs.db"))
        researcher = Agent(
            name="researcher", instructions="Research and report.", model=ScriptedProvider(researcher_turn)
        )
        lead = Agent(
            name="lead",
            model=ScriptedProvider(lead_turn),
            plugins=[Subagents([researcher], checkpointer=checkpointer)],
        )
        handle = Runner.stream(lead, "Compare solar panels and heat pumps.")
        async for ev in handle:
            if isinstance(ev, events.ToolCallCompleted):
                first = str(ev.result).splitlines()[0]
                print(f"{ev.call.name}: {first}")
        result = await handle.result()
        waited = [e.output for e in result.entries if isinstance(e, ToolResultEntry)][-1]
        for report in re.findall(r"<subagent-report[^>]*>\n(.*?)\n</subagent-report>", waited, re.S):
            print("report:", report)
        print("answer:", result.output)


if __name__ == "__main__":
    asyncio.run(main())
