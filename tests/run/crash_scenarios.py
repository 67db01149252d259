"""Scenarios for the crash kit: deterministic agents whose model is a function of the transcript."""

from __future__ import annotations

import asyncio

from lovia import Agent, RunContext, tool
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.testing.crash import CrashScenario, crash_point, record_effect
from lovia.transcript import ToolCallEntry, ToolResultEntry


@tool
async def fetch(ctx: RunContext, key: str) -> int:
    """Fetch a number."""
    record_effect(ctx.call_id or "", "fetch")
    await asyncio.sleep(0.01)
    return {"x": 20, "y": 22}[key]


@tool
async def slow_sum(ctx: RunContext, a: int, b: int) -> int:
    """Add slowly (the kit may kill the process in here)."""
    record_effect(ctx.call_id or "", "slow_sum")
    crash_point("slow_sum")
    await asyncio.sleep(0.01)
    return a + b


def _results(entries, name):
    calls = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
    return [e for e in entries if isinstance(e, ToolResultEntry) and calls.get(e.call_id) == name]


def _worker_turn(entries, tools):
    fetched = _results(entries, "fetch")
    if not fetched:
        return batch(("fetch", {"key": "x"}, "c-x"), ("fetch", {"key": "y"}, "c-y"))
    summed = _results(entries, "slow_sum")
    if not summed:
        a, b = (int(r.output) for r in sorted(fetched, key=lambda r: r.call_id))
        return call("slow_sum", {"a": a, "b": b}, call_id="c-sum")
    return text(f"The total is {summed[0].output}.")


def _triage_turn(entries, tools):
    return call("transfer_to_worker", {"reason": "needs numbers"}, call_id="c-handoff")


def sqlite_scenario(store: str) -> CrashScenario:
    """Triage hands off to a worker that fetches two numbers in parallel, then sums them slowly."""
    worker_model = ScriptedProvider(_worker_turn)
    triage_model = ScriptedProvider(_triage_turn)
    worker = Agent(name="worker", instructions="Sum numbers.", model=worker_model, tools=[fetch, slow_sum])
    triage = Agent(name="triage", instructions="Route.", model=triage_model, handoffs=[worker])
    session = SQLiteSession(store, wal=True)
    checkpointer = SQLiteCheckpointer(store, wal=True)
    return CrashScenario(
        agent=triage,
        input="Add x and y.",
        session=session,
        checkpointer=checkpointer,
        model_calls=lambda: len(worker_model.calls) + len(triage_model.calls),
    )
