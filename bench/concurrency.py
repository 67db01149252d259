"""Concurrency: 16 runs at once on one event loop, all sharing one SQLite store.

Each run is the loop-overhead workload ("one tool call, then a final answer", scripted model)
with its own conversation key, persisted to one file shared by all 16:

* lovia: one ``SQLiteSession`` and one ``SQLiteCheckpointer`` on the same file, ``wal=True``;
  every run has a session id and a ``CheckpointOptions`` run id (history + per-turn checkpoints).
* OpenAI Agents SDK: one ``SQLiteSession(session_id, path)`` per run on the same file (WAL, its
  default).
* LangGraph: one ``AsyncSqliteSaver`` on the file, one ``thread_id`` per run (checkpoint every
  superstep, its default).

A repetition runs ``BATCHES`` batches of 16 ``asyncio.gather``-ed runs on a fresh file and reports
seconds per batch; afterwards the store is checked to hold every run. Run standalone inside
``bench/.peers`` (``bench/.peers/bin/python bench/concurrency.py``) or through ``run_all.py``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from typing import Any

from loop_overhead import ANSWER, QUESTION, lovia_agent, repeat, spread

WIDTH = 16
BATCHES = 5
REPEATS = 5


async def lovia_batches(path: str, batches: int = BATCHES, width: int = WIDTH) -> float:
    from lovia import CheckpointOptions, Runner
    from lovia.stores import SQLiteCheckpointer, SQLiteSession

    session = SQLiteSession(path, wal=True)
    checkpointer = SQLiteCheckpointer(path, wal=True)

    async def one(key: str) -> Any:
        return await Runner.run(
            lovia_agent(), QUESTION, session=session, session_id=key, checkpoint=CheckpointOptions(checkpointer, key)
        )

    try:
        await one("warm")
        start = time.perf_counter()
        for b in range(batches):
            results = await asyncio.gather(*(one(f"b{b}-{i}") for i in range(width)))
        elapsed = time.perf_counter() - start
        assert all(r.output == ANSWER for r in results)
        listed = await session.list_sessions(limit=10_000)
        assert len(listed) == batches * width + 1, len(listed)
    finally:
        await session.close()
        await checkpointer.close()
    return elapsed / batches


async def oai_batches(path: str, batches: int = BATCHES, width: int = WIDTH) -> float:
    from agents import RunConfig, Runner, SQLiteSession
    from peers import oai_agent

    agent = oai_agent()
    config = RunConfig(tracing_disabled=True)

    async def one(key: str) -> Any:
        session = SQLiteSession(key, path)
        try:
            return await Runner.run(agent, QUESTION, run_config=config, session=session)
        finally:
            session.close()

    await one("warm")
    start = time.perf_counter()
    for b in range(batches):
        results = await asyncio.gather(*(one(f"b{b}-{i}") for i in range(width)))
    elapsed = time.perf_counter() - start
    assert all(r.final_output == ANSWER for r in results)
    with sqlite3.connect(path) as conn:
        (count,) = conn.execute("SELECT COUNT(DISTINCT session_id) FROM agent_messages").fetchone()
    assert count == batches * width + 1, count
    return elapsed / batches


async def lg_batches(path: str, batches: int = BATCHES, width: int = WIDTH) -> float:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from peers import lg_react_graph

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        graph = lg_react_graph(saver)

        async def one(key: str) -> Any:
            config = {"configurable": {"thread_id": key}, "recursion_limit": 25}
            return await graph.ainvoke({"messages": [HumanMessage(QUESTION)]}, config)

        await one("warm")
        start = time.perf_counter()
        for b in range(batches):
            results = await asyncio.gather(*(one(f"b{b}-{i}") for i in range(width)))
        elapsed = time.perf_counter() - start
        assert all(r["messages"][-1].content == ANSWER for r in results)
    with sqlite3.connect(path) as conn:
        (count,) = conn.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()
    assert count == batches * width + 1, count
    return elapsed / batches


RUNNERS = {"lovia": lovia_batches, "openai-agents": oai_batches, "langgraph": lg_batches}


def measure_one(name: str, batches: int = BATCHES) -> float:
    """Seconds per batch of 16 for one framework, on a fresh file."""

    async def once() -> float:
        with tempfile.TemporaryDirectory(prefix="lovia-bench-") as tmp:
            return await RUNNERS[name](os.path.join(tmp, "shared.db"), batches)

    return repeat(once, 1)[0]


def main() -> int:
    for name in RUNNERS:
        try:
            s = spread([measure_one(name) for _ in range(REPEATS)])
        except ImportError as exc:
            print(f"  {name:<14} skipped ({exc.name} not installed)")
            continue
        print(f"  {name:<14} {s.fmt()} ms per batch of {WIDTH} concurrent runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
