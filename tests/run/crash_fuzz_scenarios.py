"""A richer deterministic scenario for the crash fuzzer (``tests/run/test_crash_fuzz.py``).

The model is a pure function of the transcript, so an interrupted run, resumed any number of
times, must reach the very answer an uninterrupted run reaches. The run covers:

* a handoff (``triage`` -> ``worker``);
* a parallel batch of three calls (``fetch`` x, y, z);
* a mixed batch: ``fetch`` w, the ``parallel=False`` barrier ``audit``, and two non-idempotent
  tools, ``charge`` (with a reconciler) and ``notify`` (without: a dangling started call gets
  "outcome unknown");
* a structured final answer (``Report``) whose first attempt is prose, so one repair turn runs.

Non-idempotent side effects go to a file next to the store (``<store>.effects``, one line per
applied effect, keyed by ``ctx.idempotency_key``), so "applied at most once" is checked on the effects themselves. Every
checkpoint save is logged to ``<store>.saves`` (one JSON line per save, with the pid), which is how
the fuzzer counts the saves of a run. ``LOVIA_FUZZ_KILL_AFTER=<seconds>`` makes the child SIGKILL
itself after that delay (a timer thread started when the scenario is built).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from lovia import Agent, RunContext, tool
from lovia.checkpointer import Checkpointer, RunHead, RunSnapshot
from lovia.hooks import AgentHooks
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.testing.crash import CrashScenario, crash_point, record_effect
from lovia.tools import RERUN
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

ENV_KILL_AFTER = "LOVIA_FUZZ_KILL_AFTER"
ENV_WAL = "LOVIA_FUZZ_WAL"

VALUES = {"x": 10, "y": 12, "z": 20, "w": 5}


class Report(BaseModel):
    total: int
    receipt: str


# ---------------------------------------------------------------------- effects


_effects: list[str] = []  # the effects file of the scenario built last in this process


def effects_path() -> str | None:
    return _effects[-1] if _effects else None


def _write_line(path: str, row: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_lines(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _applied(key: str) -> dict[str, Any] | None:
    path = effects_path()
    if path is None:
        return None
    for row in read_lines(path):
        if row["key"] == key:
            return row
    return None


def _apply(tool_name: str, ctx: RunContext, detail: str) -> None:
    """Apply a non-idempotent effect: blindly, so a second execution shows up as a duplicate."""
    path = effects_path()
    if path is not None:
        _write_line(path, {"key": ctx.idempotency_key, "call_id": ctx.call_id, "tool": tool_name, "detail": detail})


# ---------------------------------------------------------------------- tools


@tool
async def fetch(ctx: RunContext, key: str) -> int:
    """Fetch a number."""
    record_effect(ctx.call_id or "", "fetch")
    await asyncio.sleep(0.01 + 0.005 * "xyzw".index(key))
    return VALUES[key]


@tool(parallel=False)
async def audit(ctx: RunContext, subject: str) -> str:
    """Audit the numbers (a barrier: runs alone)."""
    record_effect(ctx.call_id or "", "audit")
    await asyncio.sleep(0.01)
    return f"audit of {subject}: ok"


@tool(idempotent=False)
async def charge(ctx: RunContext, cents: int) -> str:
    """Charge the customer (not idempotent)."""
    record_effect(ctx.call_id or "", "charge")
    await asyncio.sleep(0.01)
    _apply("charge", ctx, str(cents))
    crash_point("charge")  # after the effect, before the result is stored
    await asyncio.sleep(0.01)
    return f"rcpt-{(ctx.idempotency_key or '')[:10]}"


@charge.reconciler
def _charge_reconcile(args: dict[str, Any], ctx: RunContext) -> Any:
    return f"rcpt-{(ctx.idempotency_key or '')[:10]}" if _applied(ctx.idempotency_key or "") else RERUN


@tool(idempotent=False)
async def notify(ctx: RunContext, message: str) -> str:
    """Notify the customer (not idempotent, no reconciler)."""
    record_effect(ctx.call_id or "", "notify")
    await asyncio.sleep(0.015)
    _apply("notify", ctx, message)
    crash_point("notify")
    await asyncio.sleep(0.01)
    return "sent"


# ---------------------------------------------------------------------- the model


def _results(entries: list[TranscriptEntry], name: str) -> list[ToolResultEntry]:
    calls = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
    return [e for e in entries if isinstance(e, ToolResultEntry) and calls.get(e.call_id) == name]


def _triage_turn(entries: list[TranscriptEntry], tools: Any) -> Any:
    return call("transfer_to_worker", {"reason": "needs numbers"}, call_id="c-handoff")


def _worker_turn(entries: list[TranscriptEntry], tools: Any) -> Any:
    fetched = {r.call_id: int(r.output) for r in _results(entries, "fetch")}
    if not {"c-x", "c-y", "c-z"} <= fetched.keys():
        return batch(("fetch", {"key": "x"}, "c-x"), ("fetch", {"key": "y"}, "c-y"), ("fetch", {"key": "z"}, "c-z"))
    subtotal = fetched["c-x"] + fetched["c-y"] + fetched["c-z"]
    charged = _results(entries, "charge")
    if not charged:
        return batch(
            ("fetch", {"key": "w"}, "c-w"),
            ("audit", {"subject": "x+y+z"}, "c-audit"),
            ("charge", {"cents": subtotal}, "c-charge"),
            ("notify", {"message": f"charged {subtotal}"}, "c-notify"),
        )
    total = subtotal + fetched["c-w"]
    last_result = max(i for i, e in enumerate(entries) if isinstance(e, ToolResultEntry))
    repaired = any(isinstance(e, InputEntry) and e.role == "user" for e in entries[last_result + 1 :])
    if not repaired:
        return text(f"The total is {total}.")  # prose: fails the Report contract, one repair turn
    return text(json.dumps({"total": total, "receipt": charged[0].output}))


# ---------------------------------------------------------------------- the save log


class SaveLog:
    """Checkpointer proxy that logs every save (one JSON line, fsynced) before returning."""

    def __init__(self, inner: Checkpointer, path: str) -> None:
        self.inner = inner
        self.path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load(self, run_id: str) -> RunSnapshot | None:
        return await self.inner.load(run_id)

    async def delete(self, run_id: str) -> None:
        await self.inner.delete(run_id)

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        await self.inner.append(run_id, entries, head)
        _write_line(
            self.path,
            {
                "pid": os.getpid(),
                "entries": [type(e).__name__ + (f":{e.call_id}" if hasattr(e, "call_id") else "") for e in entries],
                "status": head.status,
                "agent": head.agent_name,
                "turns": head.turns,
                "started": list(head.started_calls),
                "pending_handoff": head.pending_handoff,
            },
        )


def _arm_timer(seconds: float) -> None:
    def fire() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def fuzz_scenario(store: str) -> CrashScenario:
    """The kit's factory: ``LOVIA_FUZZ_WAL=0`` for the rollback journal, ``LOVIA_FUZZ_KILL_AFTER``
    for a timed SIGKILL."""
    kill_after = os.environ.get(ENV_KILL_AFTER)
    if kill_after:
        _arm_timer(float(kill_after))
    return build(store, wal=os.environ.get(ENV_WAL, "1") != "0")


def build(store: str, *, wal: bool = True, hooks: AgentHooks | None = None) -> CrashScenario:
    """Build the scenario on a SQLite file (``hooks`` go on both agents, for in-process tests)."""
    started = time.monotonic()
    _effects.append(store + ".effects")
    worker_model = ScriptedProvider(_worker_turn)
    triage_model = ScriptedProvider(_triage_turn)
    worker = Agent(
        name="worker",
        instructions="Sum numbers and charge.",
        model=worker_model,
        tools=[fetch, audit, charge, notify],
        output_type=Report,
        hooks=hooks,
    )
    triage = Agent(name="triage", instructions="Route.", model=triage_model, handoffs=[worker], hooks=hooks)
    session = SQLiteSession(store, wal=wal)
    checkpointer = SQLiteCheckpointer(store, wal=wal)

    async def close() -> None:
        _write_line(store + ".duration", {"pid": os.getpid(), "seconds": time.monotonic() - started})
        await checkpointer.close()
        await session.close()

    return CrashScenario(
        agent=triage,
        input="Add x, y, z and w; charge the customer.",
        session=session,
        checkpointer=SaveLog(checkpointer, store + ".saves"),  # type: ignore[arg-type]
        model_calls=lambda: len(worker_model.calls) + len(triage_model.calls),
        close=close,
    )
