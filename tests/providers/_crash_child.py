"""Child process for the provider crash tests: ``python _crash_child.py '<json config>'``.

Runs one checkpointed run of a small agent whose model is real HTTP providers (or a failover of
them) pointed at the parent's local vendor servers. The ``lookup`` tool SIGKILLs this process the
first time it runs, so the parent can re-issue the same call from a fresh process and check what
the resumed run sent. Prints one JSON line: the output and the names of the events seen.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from lovia import Agent, CheckpointOptions, Runner, SQLiteCheckpointer, tool
from lovia.providers import FailoverProvider, GeminiProvider, OpenAIChatProvider, OpenAIResponsesProvider
from lovia.reliability import RetryPolicy

CFG = json.loads(sys.argv[1])
WORK = Path(CFG["work"])


@tool
def lookup(city: str) -> str:
    """Look the weather up (kills the process the first time)."""
    marker = WORK / "killed"
    if not marker.exists():
        marker.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return f"sunny in {city}"


def member(spec: dict):
    kind, url = spec["kind"], spec["base_url"]
    if kind == "responses":
        return OpenAIResponsesProvider("gpt-test", base_url=url, api_key="k")
    if kind == "gemini":
        return GeminiProvider("gemini-test", base_url=url, api_key="k")
    return OpenAIChatProvider("chat-test", base_url=url)


async def main() -> None:
    members = [member(m) for m in CFG["members"]]
    model = members[0] if len(members) == 1 else FailoverProvider(members, backoff=0.0)
    agent = Agent(name="crash", instructions="be brief", model=model, tools=[lookup], retry=RetryPolicy(max_attempts=1))
    checkpointer = SQLiteCheckpointer(CFG["db"])
    handle = Runner.stream(agent, "weather in Rome?", checkpoint=CheckpointOptions(checkpointer, CFG["run_id"]))
    seen = [type(event).__name__ async for event in handle]
    result = await handle.result()
    for m in members:
        await m.aclose()
    print(json.dumps({"output": result.output, "events": seen}))


asyncio.run(main())
