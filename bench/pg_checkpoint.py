"""Checkpoint saves on PostgreSQL: lovia's ``PostgresCheckpointer`` beside LangGraph's ``AsyncPostgresSaver``.

Workload: ``W`` concurrent writers (1, 4, 16), each driving its own run / thread for ``STEPS``
saves; every save adds one 1 KB tool result to the run, as an agent loop does after each tool
call. lovia appends the new entry (O(new entries)); LangGraph stores a checkpoint whose
``messages`` channel holds the whole list so far (a new blob version each step), which is what a
``MessagesState`` graph writes. Both use a psycopg 3 pool of ``W`` connections on the same server.

Also measures the entries column type: the same encoded batches inserted into ``TEXT`` and
``JSONB`` columns (why lovia stores ``TEXT``).

Run: ``bench/.peers/bin/python bench/pg_checkpoint.py`` (LangGraph side needs
``langgraph-checkpoint-postgres`` in ``bench/.peers``; without it only lovia is measured).
``LOVIA_BENCH_PG_DSN`` overrides the server (default ``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import statistics
import sys
import time
import uuid
from typing import Any

from lovia.checkpointer import RunHead
from lovia.stores import PostgresCheckpointer
from lovia.stores._codec import encode_entries
from lovia.transcript import ToolResultEntry

DSN = os.environ.get("LOVIA_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STEPS = int(os.environ.get("LOVIA_BENCH_STEPS", "60"))
WRITERS = (1, 4, 16)
ENTRY_BYTES = 1024


def payload(seed: str) -> str:
    out = ""
    n = 0
    while len(out) < ENTRY_BYTES:
        out += hashlib.sha256(f"{seed}:{n}".encode()).hexdigest()
        n += 1
    return out[:ENTRY_BYTES]


def summary(latencies: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[int(len(ordered) * 0.95) - 1] * 1000,
        "saves_per_s": len(ordered) / wall,
    }


async def lovia_case(writers: int, schema: str) -> dict[str, float]:
    cp = PostgresCheckpointer(DSN, schema=schema, min_size=writers, max_size=writers)
    await cp.load("warm-up")  # opens the pool and creates the tables outside the timing
    latencies: list[float] = []

    async def writer(w: int) -> None:
        run_id = f"run-{writers}-{w}-{uuid.uuid4().hex[:6]}"
        for step in range(STEPS):
            entry = ToolResultEntry(call_id=f"c{step}", output=payload(f"{run_id}:{step}"))
            head = RunHead(agent_name="bench", turns=step)
            t0 = time.perf_counter()
            await cp.append(run_id, [entry], head)
            latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    wall = time.perf_counter() - t0
    await cp.close()
    return summary(latencies, wall)


async def langgraph_case(writers: int, schema: str) -> dict[str, float] | None:
    try:
        from langgraph.checkpoint.base import empty_checkpoint
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError:
        return None
    kwargs = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": f"-c search_path={schema}",
    }
    async with AsyncConnectionPool(DSN, min_size=writers, max_size=writers, kwargs=kwargs, open=False) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        latencies: list[float] = []

        async def writer(w: int) -> None:
            thread = f"thread-{writers}-{w}-{uuid.uuid4().hex[:6]}"
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            messages: list[dict[str, str]] = []
            for step in range(STEPS):
                messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": payload(f"{thread}:{step}")})
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"messages": list(messages)}
                checkpoint["channel_versions"] = {"messages": step + 1}
                t0 = time.perf_counter()
                config = await saver.aput(config, checkpoint, {"source": "loop", "step": step}, {"messages": step + 1})
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        wall = time.perf_counter() - t0
    return summary(latencies, wall)


async def column_types(schema: str, rows: int = 2000) -> dict[str, float]:
    """Seconds to insert ``rows`` encoded one-entry batches into a TEXT and a JSONB column."""
    import psycopg

    batch = encode_entries([ToolResultEntry(call_id="c", output=payload("col"), raw={"k": [1, 2, 3]})])
    out: dict[str, float] = {}
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True, options=f"-c search_path={schema}") as conn:
        for kind in ("text", "jsonb"):
            await conn.execute(f"CREATE TABLE col_{kind} (id BIGSERIAL PRIMARY KEY, entries {kind} NOT NULL)")
            t0 = time.perf_counter()
            async with conn.transaction():
                for _ in range(rows):
                    await conn.execute(f"INSERT INTO col_{kind} (entries) VALUES (%s)", (batch,))
            out[kind] = time.perf_counter() - t0
    return out


async def main() -> int:
    import psycopg

    lovia_schema, lg_schema = f"bench_lovia_{uuid.uuid4().hex[:8]}", f"bench_lg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {lg_schema}")
    try:
        print(f"PostgreSQL checkpoint saves: {STEPS} saves per writer, one new {ENTRY_BYTES} B entry per save")
        print(
            f"{'writers':>7} | {'lovia p50/p95 ms':>17} {'saves/s':>8} | {'langgraph p50/p95 ms':>21} {'saves/s':>8} "
            "| ratio"
        )
        for writers in WRITERS:
            ours = await lovia_case(writers, lovia_schema)
            theirs = await langgraph_case(writers, lg_schema)
            line = f"{writers:>7} | {ours['p50_ms']:>7.2f} / {ours['p95_ms']:>6.2f} {ours['saves_per_s']:>8.0f} |"
            if theirs is None:
                line += " (langgraph-checkpoint-postgres not installed)"
            else:
                ratio = ours["saves_per_s"] / theirs["saves_per_s"]
                line += f" {theirs['p50_ms']:>10.2f} / {theirs['p95_ms']:>6.2f} {theirs['saves_per_s']:>8.0f}"
                line += f" | lovia {ratio:.2f}x"
            print(line, flush=True)
        cols = await column_types(lovia_schema)
        print(
            f"entries column: TEXT {cols['text']:.3f}s vs JSONB {cols['jsonb']:.3f}s for 2000 inserts (JSONB/TEXT "
            f"{cols['jsonb'] / cols['text']:.2f}x)"
        )
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            for schema in (lovia_schema, lg_schema):
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
