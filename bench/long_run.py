"""History-independent costs: does a conversation's 200th run (a run's 2,000th turn) cost what its first did?

Two workloads, both with ``ScriptedProvider`` (no I/O, so the figures are framework time):

* shared session: ``--runs`` runs (default 200) of one tool call + answer, all into one
  ``SQLiteSession`` id, with the default journal (``wal=False``: each append waits for its
  ``fsync``) and with ``wal=True`` (framework time dominates); each run loads the history first.
* long run: one run of ``--turns`` turns (default 2,000), each a tool call, then the answer.

Printed: the mean cost of the first and the last 10% and their ratio (target: shared session at
most 1.5x, long run at most 2x). Ratios only compare this run with itself, on this machine::

    .venv/bin/python bench/long_run.py [--runs 200] [--turns 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lovia import Agent, Runner, tool  # noqa: E402
from lovia.stores import SQLiteSession  # noqa: E402
from lovia.testing import ScriptedProvider, call, text  # noqa: E402


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


BASE = Agent("calc", instructions="You add numbers.", tools=[add])


def tenths(samples: list[float]) -> tuple[float, float, float]:
    """Median of the first and the last 10% of ``samples`` and last / first (medians: a shared
    machine's hiccups land in single samples)."""
    k = max(1, len(samples) // 10)
    first, last = statistics.median(samples[:k]), statistics.median(samples[-k:])
    return first, last, last / first


async def shared_session(runs: int, folder: Path, *, wal: bool = False) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds (this process, all threads) per run, in order, of ``runs`` runs
    into one session id. CPU time leaves out the waits for ``fsync`` and for other processes."""
    costs, cpu = [], []
    async with SQLiteSession(folder / f"shared-{wal}.db", wal=wal) as session:
        for i in range(runs):
            agent = BASE.clone(model=ScriptedProvider([call("add", {"a": i, "b": 1}), text(f"{i + 1}")]))
            t0, c0 = time.perf_counter(), time.process_time()
            result = await Runner.run(agent, f"What is {i} + 1?", session=session, session_id="shared")
            costs.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            assert result.output == f"{i + 1}", result.output
    return costs, cpu


async def long_run(turns: int) -> list[float]:
    """Seconds per turn, in order, of one run of ``turns`` model turns."""
    stamps: list[float] = []

    def script(entries: list[Any], tools: list[Any]) -> Any:
        stamps.append(time.process_time())  # CPU time: the run does no I/O
        if len(stamps) < turns:
            return call("add", {"a": len(stamps), "b": 1}, call_id=f"c{len(stamps)}")
        return text("done")

    # record=False: a recording provider keeps a copy of every prompt (turn n's has n entries), a
    # test double's memory that grows with the square of the run, not a cost of the loop.
    agent = BASE.clone(model=ScriptedProvider(script, record=False))
    result = await Runner.run(agent, "Count.", max_turns=turns + 1)
    assert result.output == "done" and len(stamps) == turns
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


def report(name: str, samples: list[float], unit: str, target: float) -> float:
    first, last, ratio = tenths(samples)
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(
        f"{name:34} first 10% {first * 1e3:8.3f} ms/{unit}  last 10% {last * 1e3:8.3f} ms/{unit}  "
        f"last/first {ratio:5.2f}x (target <= {target}x: {verdict})"
    )
    return ratio


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        await shared_session(5, Path(tmp), wal=False)  # warm-up: imports, first connection
        for wal in (False, True):
            costs, cpu = await shared_session(args.runs, Path(tmp), wal=wal)
            report(f"shared session, {args.runs} runs, wal={wal}", costs, "run", 1.5)
            report("  the same, CPU time", cpu, "run", 1.5)
    t0 = time.perf_counter()
    per_turn = await long_run(args.turns)
    total = time.perf_counter() - t0
    report(f"one run, {args.turns} turns ({total:.1f} s)", per_turn, "turn", 2.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
