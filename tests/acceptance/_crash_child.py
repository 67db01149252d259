"""Child process for the acceptance crash tests (run with ``python _crash_child.py '<json>'``).

One run of a small agent against real SQLite stores (session and checkpointer sharing one WAL
file). Some tools SIGKILL their own process the first time they run, so the parent test can
re-issue the very same call from a fresh process and look at what survived.

Prints one JSON line: output, replayed, model calls made by this process, events seen, ...
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from lovia import Agent, CheckpointOptions, RunContext, Runner, SQLiteCheckpointer, SQLiteSession, tool
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolResultEntry

CFG = json.loads(sys.argv[1])
WORK = Path(CFG["work"])
MODEL_CALLS: dict[str, int] = {}


def effect(**fields: object) -> None:
    with open(WORK / "effects.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({**fields, "pid": os.getpid()}) + "\n")


def die_once(tag: str) -> None:
    """SIGKILL this process the first time ``tag`` is reached (across processes)."""
    marker = WORK / f"killed-{tag}"
    if not marker.exists():
        marker.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)


@tool(parallel=False)
async def charge(ctx: RunContext, amount: int) -> str:
    """Charge the customer."""
    effect(tool="charge", turn=ctx.turn, run_id=ctx.run_id, deps=ctx.deps)
    return f"charged {amount}"


@tool(parallel=False)
async def boom(ctx: RunContext) -> str:
    """A tool whose first execution kills the process."""
    effect(tool="boom", phase="start", turn=ctx.turn, run_id=ctx.run_id, deps=ctx.deps)
    die_once("boom")
    effect(tool="boom", phase="done", turn=ctx.turn, run_id=ctx.run_id, deps=ctx.deps)
    return "boom survived"


def answered(entries: list) -> set[str]:
    return {e.call_id for e in entries if isinstance(e, ToolResultEntry)}


def model(agent_name: str, decide):
    def turn(entries, tools):
        MODEL_CALLS[agent_name] = MODEL_CALLS.get(agent_name, 0) + 1
        return decide(answered(entries))

    return ScriptedProvider(turn)


def build(scenario: str) -> Agent:
    if scenario == "sequential":
        return Agent(
            name="worker",
            instructions="You work.",
            tools=[charge, boom],
            model=model(
                "worker",
                lambda done: (
                    call("charge", {"amount": 5}, call_id="c1")
                    if "c1" not in done
                    else call("boom", {}, call_id="c2")
                    if "c2" not in done
                    else text("done: charged and boomed")
                ),
            ),
        )
    if scenario == "batch":
        return Agent(
            name="worker",
            tools=[charge, boom],
            model=model(
                "worker",
                lambda done: (
                    batch(("charge", {"amount": 7}, "c1"), ("boom", {}, "c2"))
                    if "c1" not in done
                    else text("batch done")
                ),
            ),
        )
    if scenario in ("pending_handoff", "after_handoff"):
        billing = Agent(
            name="billing",
            instructions="You are billing.",
            tools=[boom],
            model=model(
                "billing",
                (lambda done: text("billing: settled"))
                if scenario == "pending_handoff"
                else (lambda done: call("boom", {}, call_id="c3") if "c3" not in done else text("billing: settled")),
            ),
        )
        return Agent(
            name="triage",
            instructions="You are triage.",
            tools=[boom],
            handoffs=[billing],
            model=model(
                "triage",
                (lambda done: batch(("transfer_to_billing", {}, "h1"), ("boom", {}, "c2")))
                if scenario == "pending_handoff"
                else (lambda done: call("transfer_to_billing", {}, call_id="h1")),
            ),
        )
    if scenario == "plain":
        return Agent(
            name="worker",
            tools=[charge],
            model=model(
                "worker",
                lambda done: call("charge", {"amount": 2}, call_id="c1") if "c1" not in done else text("plain done"),
            ),
        )
    if scenario == "session_window":
        return Agent(
            name="worker",
            tools=[charge],
            model=model(
                "worker",
                lambda done: call("charge", {"amount": 1}, call_id="c1") if "c1" not in done else text("charged once"),
            ),
        )
    raise SystemExit(f"unknown scenario {scenario}")


class DyingSession(SQLiteSession):
    """A session whose first append (across processes) kills the process before writing."""

    async def append(self, session_id, entries, *, run_id=None, meta=None):
        die_once("append")
        return await super().append(session_id, entries, run_id=run_id, meta=meta)


async def main() -> None:
    db = str(WORK / "store.db")
    session_cls = DyingSession if CFG["scenario"] == "session_window" else SQLiteSession
    session = session_cls(db, wal=True)
    cp = SQLiteCheckpointer(db, wal=True)
    try:
        handle = Runner.stream(
            build(CFG["scenario"]),
            CFG.get("input", "go"),
            deps=CFG.get("deps"),
            session=session,
            session_id="s1",
            checkpoint=CheckpointOptions(cp, CFG["run_id"]),
        )
        events = [type(ev).__name__ async for ev in handle]
        result = await handle.result()
    finally:
        await session.close()
        await cp.close()
    print(
        json.dumps(
            {
                "output": result.output,
                "replayed": result.replayed,
                "model_calls": MODEL_CALLS,
                "events": events,
                "final_agent": result.final_agent.name,
                "turns": result.turns,
                "usage": result.usage.to_dict(),
                "finish_reason": result.finish_reason,
                "run_id": result.run_id,
            }
        )
    )


asyncio.run(main())
