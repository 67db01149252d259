"""Child process for the workspace crash test: runs one checkpointed agent run, maybe dies mid-tool.

argv: scenario (write|edit|shell), db path, workspace root, "kill" or "resume".
With "kill", a watchdog thread SIGKILLs this process as soon as the tool's side effect is under
way (the write's temporary file appears); the shell scenario's command kills its parent itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from lovia import Agent, CheckpointOptions, Runner, SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import Workspace, WorkspaceLimits

BIG = "".join(f"row {i:08d}\n" for i in range(1_500_000))  # ~19 MB: the write takes a moment


def watchdog(directory: Path, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(p.name.startswith(f".{name}.lovia-") for p in directory.iterdir()):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.0005)


def turn_for(scenario: str, root: Path):
    def decide(entries, tools):
        done = [e for e in entries if isinstance(e, ToolResultEntry)]
        if done:
            return text("RESULT " + done[-1].output)
        if scenario == "write":
            return call("write_file", {"path": "big.txt", "content": BIG}, call_id="c-write")
        if scenario == "edit":
            return call("edit_file", {"path": "big.txt", "old": "MARKER-OLD", "new": "MARKER-NEW"}, call_id="c-edit")
        command = f"echo ran >> {root / 'ledger.txt'}; kill -9 $PPID; sleep 1"
        return call("shell", {"command": command}, call_id="c-shell")

    return decide


async def main(scenario: str, db: str, root: str, phase: str) -> None:
    root_path = Path(root)
    if phase == "kill" and scenario in ("write", "edit"):
        sys.setswitchinterval(0.0005)  # let the watchdog thread in often while the write runs
        threading.Thread(target=watchdog, args=(root_path, "big.txt"), daemon=True).start()
    model = ScriptedProvider(turn_for(scenario, root_path))
    agent = Agent(
        name="coder",
        model=model,
        workspace=Workspace.local(root, mode="trusted", limits=WorkspaceLimits(max_file_read_bytes=100_000_000)),
    )
    result = await Runner.run(agent, "go", checkpoint=CheckpointOptions(SQLiteCheckpointer(db, wal=True), "run-1"))
    print(json.dumps({"output": result.output}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
