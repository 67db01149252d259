"""Loop overhead of lovia alone: "one tool call, then a final answer" with a scripted model.

Needs only lovia (no peers). Run from the repository root:

    .venv/bin/python bench/loop_overhead.py            # 200 runs x 7 repetitions, no persistence
    .venv/bin/python bench/loop_overhead.py --session  # also with a file-backed SQLiteSession

Each repetition times 200 back-to-back runs with ``time.perf_counter`` and divides by 200; the
figure printed is the median of the repetitions with the min-max spread. The scripted model
(``ScriptedProvider``) does no I/O, so the figure is framework time per run: building the
request, streaming the canned deltas, validating and calling the tool, assembling the result.
Nothing is subtracted.

The helpers here (``spread``, ``machine``, ``versions``) are reused by ``run_all.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata as md
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lovia import Agent, Runner, tool
from lovia.testing import ScriptedProvider, call, text

RUNS = 200
REPEATS = 7
QUESTION = "What is 2 + 3?"
ANSWER = "2 + 3 = 5."


# --------------------------------------------------------------------------- shared helpers


@dataclass(frozen=True)
class Spread:
    """Median with min and max of a set of samples (same unit as the samples)."""

    median: float
    low: float
    high: float
    n: int

    def fmt(self, scale: float = 1e3, digits: int = 2) -> str:
        return f"{self.median * scale:.{digits}f} [{self.low * scale:.{digits}f}-{self.high * scale:.{digits}f}]"


def spread(samples: list[float]) -> Spread:
    """Median, min and max of ``samples``."""
    return Spread(statistics.median(samples), min(samples), max(samples), len(samples))


def machine() -> dict[str, Any]:
    """Cores, CPU model, OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "sqlite": __import__("sqlite3").sqlite_version,
    }


def versions(names: tuple[str, ...]) -> dict[str, str]:
    """Installed versions of ``names`` ("-" when missing)."""
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "-"
    return out


def repeat(fn: Callable[[], Awaitable[float]], repeats: int) -> list[float]:
    """Run the async measurement ``fn`` ``repeats`` times, each in a fresh event loop."""
    samples = []
    for _ in range(repeats):
        gc.collect()
        samples.append(asyncio.run(fn()))
    return samples


# --------------------------------------------------------------------------- the workload


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


BASE_AGENT: Agent[Any] = Agent("calc", instructions="You add numbers.", tools=[add])


def lovia_agent(*, fresh: bool = False) -> Agent[Any]:
    """The agent with a fresh single-use script: one call to ``add``, then the answer.

    By default the agent is configured once (``BASE_AGENT``) and only the scripted provider is
    new (``clone(model=...)``), as the peers' agent and graph are built once. ``fresh=True``
    builds a whole new ``Agent`` per run instead (new default context policy and all).
    """
    provider = ScriptedProvider([call("add", {"a": 2, "b": 3}), text(ANSWER)])
    if fresh:
        return Agent("calc", instructions="You add numbers.", model=provider, tools=[add])
    return BASE_AGENT.clone(model=provider)


async def lovia_runs(
    runs: int = RUNS,
    *,
    session_path: str | None = None,
    wal: bool = False,
    checkpoint: bool = False,
    fresh_agent: bool = False,
) -> float:
    """Seconds per run over ``runs`` sequential runs (agent construction included).

    With ``session_path`` each run is its own session id in one ``SQLiteSession`` file; with
    ``checkpoint`` too, each run also checkpoints every turn into a ``SQLiteCheckpointer`` on
    the same file. ``fresh_agent``: see :func:`lovia_agent`.
    """
    from lovia import CheckpointOptions
    from lovia.stores import SQLiteCheckpointer, SQLiteSession

    session = SQLiteSession(session_path, wal=wal) if session_path else None
    checkpointer = SQLiteCheckpointer(session_path, wal=wal) if session_path and checkpoint else None

    async def one(i: int | str) -> Any:
        return await Runner.run(
            lovia_agent(fresh=fresh_agent),
            QUESTION,
            session=session,
            session_id=f"s{i}" if session else None,
            checkpoint=CheckpointOptions(checkpointer, f"r{i}") if checkpointer else None,
        )

    try:
        await one("warm")  # untimed: imports, first connection, schema
        start = time.perf_counter()
        for i in range(runs):
            result = await one(i)
        elapsed = time.perf_counter() - start
        assert result.output == ANSWER, result.output
        return elapsed / runs
    finally:
        for store in (session, checkpointer):
            if store is not None:
                await store.close()


def measure(
    *, session: bool, wal: bool = False, fresh_agent: bool = False, runs: int = RUNS, repeats: int = REPEATS
) -> Spread:
    """Per-run seconds (median of repetitions), optionally with a file-backed SQLiteSession."""

    async def once() -> float:
        if not session:
            return await lovia_runs(runs, fresh_agent=fresh_agent)
        with tempfile.TemporaryDirectory(prefix="lovia-bench-") as tmp:
            return await lovia_runs(
                runs, session_path=os.path.join(tmp, "session.db"), wal=wal, fresh_agent=fresh_agent
            )

    return spread(repeat(once, repeats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--session", action="store_true", help="also measure with a file-backed SQLiteSession")
    args = parser.parse_args(argv)
    info = machine()
    print(f"machine: {info['cores']} cores, {info['cpu']}, {info['python']}, SQLite {info['sqlite']}")
    print(
        f"lovia {versions(('lovia',))['lovia']}; {args.runs} runs x {args.repeats} repetitions; ms per run, median "
        "[min-max]"
    )
    rows = [
        ("no persistence", measure(session=False, runs=args.runs, repeats=args.repeats)),
        (
            "no persistence, new Agent per run",
            measure(session=False, fresh_agent=True, runs=args.runs, repeats=args.repeats),
        ),
    ]
    if args.session:
        rows.append(("SQLiteSession (default journal)", measure(session=True, runs=args.runs, repeats=args.repeats)))
        rows.append(("SQLiteSession (wal=True)", measure(session=True, wal=True, runs=args.runs, repeats=args.repeats)))
    for label, s in rows:
        print(f"  {label:<34} {s.fmt()} ms/run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
