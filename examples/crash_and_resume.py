"""Crash a run with SIGKILL in the middle of a tool, then re-issue the same call and get the answer.

Run it: ``python examples/crash_and_resume.py`` (offline: the model is scripted).

The worker process is killed while the second tool call runs. The first call's result was
checkpointed, so when the same ``run_id`` is re-issued from a fresh process only the dangling
call runs again, and a third re-issue replays the stored answer without touching the model.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile

from lovia import Agent, CheckpointOptions, RunContext, Runner, SQLiteCheckpointer, SQLiteSession, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry


@tool
def measure(ctx: RunContext, site: str) -> int:
    """Measure a site (pretend this is slow and costly)."""
    print(f"    [tool] measuring {site} (call {ctx.call_id})", flush=True)
    if site == "b" and os.environ.get("CRASH_IN_TOOL") == "1":
        print("    [tool] ... and the worker is killed (SIGKILL) mid-tool", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return {"a": 17, "b": 25}[site]


def model_turn(entries, tools):
    """A scripted model: measure a, measure b, then answer with the sum."""
    results = [e for e in entries if isinstance(e, ToolResultEntry)]
    if len(results) == 0:
        return call("measure", {"site": "a"}, call_id="m-a")
    if len(results) == 1:
        return call("measure", {"site": "b"}, call_id="m-b")
    return text(f"Total: {sum(int(r.output) for r in results)}.")


async def worker(db: str, run_id: str) -> None:
    """One attempt at the run; every attempt is the very same call."""
    model = ScriptedProvider(model_turn)
    agent = Agent(name="surveyor", instructions="Measure both sites.", model=model, tools=[measure])
    result = await Runner.run(
        agent,
        "Measure sites a and b and add them up.",
        session=SQLiteSession(db, wal=True),
        session_id="survey",
        checkpoint=CheckpointOptions(SQLiteCheckpointer(db, wal=True), run_id),
    )
    how = "replayed from the checkpoint" if result.replayed else "finished"
    print(f"    [worker] {how}: {result.output!r} (model calls in this process: {len(model.calls)})", flush=True)


def main() -> None:
    if len(sys.argv) == 3:
        asyncio.run(worker(sys.argv[1], sys.argv[2]))
        return
    db = os.path.join(tempfile.mkdtemp(), "runs.db")
    run_id = "survey-2026-001"
    for attempt, crash in enumerate(["1", "0", "0"], start=1):
        print(f"attempt {attempt}:", flush=True)
        env = {**os.environ, "CRASH_IN_TOOL": crash}
        proc = subprocess.run([sys.executable, __file__, db, run_id], env=env, check=False)
        if proc.returncode == -signal.SIGKILL:
            print("    [main] worker died; re-issuing the same call", flush=True)

    async def show() -> None:
        snap = await SQLiteCheckpointer(db).load(run_id)
        segments = await SQLiteSession(db).segments("survey")
        assert snap is not None
        print(f"checkpoint: status={snap.status}, {len(snap.entries)} entries; session: {len(segments)} run(s)")

    asyncio.run(show())


if __name__ == "__main__":
    main()
