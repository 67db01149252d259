"""Worker scaling on one PostgreSQL database: lovia beside LangGraph's PostgreSQL checkpointer.

Workload: every run is a scripted model making 3 tool calls one after the other, then answering
(4 model turns, 3 tool results), checkpointed in PostgreSQL. ``P`` worker processes (1, 2, 4)
each drive ``CONCURRENCY`` runs at a time from a shared counter until ``RUNS`` runs are done.

* lovia: ``Runner.run`` with a ``PostgresSession`` and a ``PostgresCheckpointer`` with
  ``lease_ttl`` (the deployed configuration: leased, fenced saves, one session segment per run).
* LangGraph: a ``MessagesState`` graph (model node + ``ToolNode``) compiled with
  ``AsyncPostgresSaver`` (no session, no lease: LangGraph has neither).

"Saves" are the store's write calls: lovia's ``append``/``append_fenced``, LangGraph's ``aput``
and ``aput_writes``. Reported: runs/s, saves/s, the scaling ratio per step, and what the machine
was doing during each case (CPU share of the workers, of the PostgreSQL server processes and of
the whole machine, read from ``/proc``), which is what bounds scaling when it falls short.

``--model-latency-ms N`` makes every model call (on both sides) await ``N`` ms before it
answers, as a real model's network round trip would: with 0 the workload is pure CPU (the
scripted model answers at once), with e.g. 50 a run spends most of its time waiting, which is the
shape of a production worker. Each worker also reports its own CPU time against its wall time
(a process near 100% is CPU-bound) and how long its runs waited for a pooled connection.

Run: ``.venv/bin/python bench/workers.py [--model-latency-ms N] [--runs N] [--reps N]``
(``--help`` lists all; the LangGraph side needs ``langgraph`` and ``langgraph-checkpoint-postgres``:
``bench/setup_peers.sh`` puts them in ``bench/.peers``). ``LOVIA_BENCH_PG_DSN`` overrides the
server; ``LOVIA_BENCH_RUNS`` (default 400), ``LOVIA_BENCH_CONCURRENCY`` (default 4) and
``LOVIA_BENCH_REPS`` (default 3) set the defaults of the size flags.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

DSN = os.environ.get("LOVIA_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
RUNS = int(os.environ.get("LOVIA_BENCH_RUNS", "400"))
CONCURRENCY = int(os.environ.get("LOVIA_BENCH_CONCURRENCY", "4"))
REPS = int(os.environ.get("LOVIA_BENCH_REPS", "3"))
PROCESSES = (1, 2, 4)
CALLS = 3
LATENCY = 0.0
"""Seconds every model call awaits before it answers (``--model-latency-ms``)."""
TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- CPU accounting


def _proc_cpu(pid: int) -> float:
    """User + system seconds of process ``pid`` (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return float(sum(values) - idle), float(sum(values))


class CpuWindow:
    """CPU seconds used by PostgreSQL and by the whole machine between start() and stop()."""

    def start(self) -> None:
        self.pg_pids = _postgres_pids()
        self.pg0 = sum(_proc_cpu(p) for p in self.pg_pids)
        self.m0 = _machine_busy()
        self.t0 = time.perf_counter()

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self.t0
        pg_pids = set(self.pg_pids) | set(_postgres_pids())
        pg = sum(_proc_cpu(p) for p in pg_pids) - self.pg0  # backends that exited are not counted
        busy1, total1 = _machine_busy()
        busy = (busy1 - self.m0[0]) / max(total1 - self.m0[1], 1.0)
        return {"pg_cores": pg / wall, "machine_busy": busy, "cores": os.cpu_count() or 1}


class LockSampler:
    """Backends of this database waiting on a heavyweight lock, sampled four times a second."""

    def start(self) -> None:
        import threading

        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        sql = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        with psycopg.connect(DSN, autocommit=True) as conn:
            while not self._stop.wait(0.25):
                row = conn.execute(sql).fetchone()
                self.samples.append(int(row[0]) if row else 0)

    def stop(self) -> float:
        """The mean number of lock waiters over the samples."""
        self._stop.set()
        self._thread.join(timeout=10)
        return statistics.mean(self.samples) if self.samples else 0.0


class Tally:
    """Store writes of this worker process: how many, and the wall seconds spent inside them."""

    def __init__(self) -> None:
        self.saves, self.seconds = 0, 0.0

    @contextlib.asynccontextmanager
    async def save(self) -> AsyncIterator[None]:
        """Count one write and its wall time (concurrent writes each keep their own start)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.saves += 1
            self.seconds += time.perf_counter() - t0


TALLY = Tally()


# --------------------------------------------------------------------------- lovia


async def _lovia_turn(entries: list[Any], tools: Any) -> Any:
    from lovia.testing import call, text
    from lovia.transcript import ToolResultEntry

    if LATENCY:
        await asyncio.sleep(LATENCY)  # the model's network wait
    done = sum(isinstance(e, ToolResultEntry) for e in entries)
    return call("lookup", {"q": f"q{done}"}, call_id=f"c{done}") if done < CALLS else text("done")


def _pool_wait(pools: list[Any]) -> tuple[float, int]:
    """(milliseconds spent waiting for a connection, connection requests) since the last call."""
    waited, requests = 0.0, 0
    for pool in pools:
        stats = pool.pop_stats() if pool is not None else {}
        waited += float(stats.get("requests_wait_ms", 0))
        requests += int(stats.get("requests_num", 0))
    return waited, requests


async def _lovia_worker(schema: str, counter: Any, barrier: Any, out: Any) -> None:
    from lovia import Agent, CheckpointOptions, Runner, tool
    from lovia.stores import PostgresCheckpointer, PostgresSession
    from lovia.testing import ScriptedProvider

    class CountingCheckpointer(PostgresCheckpointer):
        async def append(self, *args: Any, **kwargs: Any) -> None:
            async with TALLY.save():
                await super().append(*args, **kwargs)

        async def append_fenced(self, *args: Any, **kwargs: Any) -> None:
            async with TALLY.save():
                await super().append_fenced(*args, **kwargs)

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"result for {q}"

    model = ScriptedProvider(_lovia_turn, record=False)
    agent = Agent(name="bench", instructions="Work.", model=model, tools=[lookup])
    size = CONCURRENCY + 1
    session = PostgresSession(DSN, schema=schema, min_size=size, max_size=size)
    cp = CountingCheckpointer(DSN, schema=schema, min_size=size, max_size=size)

    async def one(run_id: str) -> None:
        options = CheckpointOptions(cp, run_id, lease_ttl=30)
        await Runner.run(agent, "Do the job.", session=session, session_id=run_id, checkpoint=options)

    await one(f"warm-{uuid.uuid4().hex}")  # pools open, tables exist, imports done: outside the timing
    pools = [session._db._pool, cp._db._pool]
    await _timed(one, counter, barrier, out, lambda: _pool_wait(pools))
    await session.close()
    await cp.close()


# --------------------------------------------------------------------------- LangGraph


async def _langgraph_worker(schema: str, counter: Any, barrier: Any, out: Any) -> None:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    class CountingSaver(AsyncPostgresSaver):
        async def aput(self, *args: Any, **kwargs: Any) -> Any:
            async with TALLY.save():
                return await super().aput(*args, **kwargs)

        async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
            async with TALLY.save():
                await super().aput_writes(*args, **kwargs)

    @lc_tool
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"result for {q}"

    async def model(state: MessagesState) -> dict[str, Any]:
        if LATENCY:
            await asyncio.sleep(LATENCY)  # the model's network wait, as on the lovia side
        done = sum(isinstance(m, ToolMessage) for m in state["messages"])
        if done < CALLS:
            call = {"name": "lookup", "args": {"q": f"q{done}"}, "id": f"c{done}", "type": "tool_call"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content="done")]}

    kwargs = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": f"-c search_path={schema}",
    }
    size = CONCURRENCY + 1
    async with AsyncConnectionPool(DSN, min_size=size, max_size=size, kwargs=kwargs, open=False) as pool:
        saver = CountingSaver(pool)  # type: ignore[arg-type]
        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_node("tools", ToolNode([lookup]))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
        builder.add_edge("tools", "model")
        graph = builder.compile(checkpointer=saver)

        async def one(run_id: str) -> None:
            await graph.ainvoke({"messages": [("user", "Do the job.")]}, {"configurable": {"thread_id": run_id}})

        await one(f"warm-{uuid.uuid4().hex}")
        await _timed(one, counter, barrier, out, lambda: _pool_wait([pool]))


# --------------------------------------------------------------------------- shared driver


async def _timed(one: Any, counter: Any, barrier: Any, out: Any, pool_wait: Any) -> None:
    """Run the shared counter down with ``CONCURRENCY`` lanes, report, and wait until the parent has
    sampled CPU (closing the pools first would end PostgreSQL backends before they are counted)."""
    tag = uuid.uuid4().hex[:8]
    await asyncio.to_thread(barrier.wait)
    pool_wait()  # forget the warm-up's requests
    before, save_s, cpu0, t0 = TALLY.saves, TALLY.seconds, time.process_time(), time.time()
    done, run_s = 0, 0.0

    async def lane() -> None:
        nonlocal done, run_s
        while True:
            with counter.get_lock():
                if counter.value <= 0:
                    return
                counter.value -= 1
                n = counter.value
            start = time.perf_counter()
            await one(f"run-{tag}-{n}")
            run_s += time.perf_counter() - start
            done += 1

    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    end, cpu = time.time(), time.process_time() - cpu0
    waited, requests = pool_wait()
    out.put(
        {
            "runs": done,
            "saves": TALLY.saves - before,
            "save_s": TALLY.seconds - save_s,
            "run_s": run_s,
            "start": t0,
            "end": end,
            "cpu": cpu,
            "pool_wait_ms": waited,
            "pool_requests": requests,
        }
    )
    await asyncio.to_thread(barrier.wait)  # second use: the parent has sampled CPU


def _worker_main(kind: str, schema: str, counter: Any, barrier: Any, out: Any, sizes: tuple[float, int]) -> None:
    global LATENCY, CONCURRENCY
    LATENCY, CONCURRENCY = sizes  # a spawned process starts from the module defaults
    body = _lovia_worker if kind == "lovia" else _langgraph_worker
    asyncio.run(body(schema, counter, barrier, out))


def run_case(kind: str, processes: int, schema: str) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    counter, barrier, out = ctx.Value("i", RUNS), ctx.Barrier(processes + 1), ctx.Queue()
    args = (kind, schema, counter, barrier, out, (LATENCY, CONCURRENCY))
    procs = [ctx.Process(target=_worker_main, args=args) for _ in range(processes)]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)  # every worker is warmed up
    window, locks = CpuWindow(), LockSampler()
    window.start()
    locks.start()
    reports = [out.get(timeout=600) for _ in procs]
    cpu = window.stop()
    cpu["lock_waiters"] = locks.stop()
    barrier.wait(timeout=60)  # now the workers may close their pools
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"{kind} worker exited with {p.exitcode}")
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    runs, saves, worker_cpu = (
        sum(r["runs"] for r in reports),
        sum(r["saves"] for r in reports),
        sum(r["cpu"] for r in reports),
    )
    return {
        "runs_s": runs / wall,
        "saves_s": saves / wall,
        "saves_per_run": saves / runs,
        "worker_cores": worker_cpu / wall,
        "worker_ms_per_run": worker_cpu / runs * 1000,
        # The busiest worker's CPU over its own wall time: near 1.0, that process is CPU-bound.
        "max_worker_cpu_share": max(r["cpu"] / max(r["end"] - r["start"], 1e-9) for r in reports),
        "pool_wait_ms_per_run": sum(r["pool_wait_ms"] for r in reports) / runs,
        # Mean wall time of one run, and of the store writes inside it (both include waiting for the CPU).
        "run_ms": sum(r["run_s"] for r in reports) / runs * 1000,
        "save_ms_per_run": sum(r["save_s"] for r in reports) / runs * 1000,
        **cpu,
    }


async def _langgraph_setup(schema: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    conn = await AsyncConnection.connect(
        DSN, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-c search_path={schema}"
    )
    async with conn:
        await AsyncPostgresSaver(conn).setup()  # type: ignore[arg-type]


def _spin(seconds: float, out: Any) -> None:
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    out.put(n)


def machine_ceiling(processes: int, seconds: float = 2.0) -> float:
    """How much more pure-Python work ``processes`` spinning processes get done than one, right now.

    On an idle 2-core machine: about 2 for 2 and 4 processes. Other tenants lower it: no workload
    of ours can scale past it.
    """
    ctx = mp.get_context("spawn")

    def total(p: int) -> int:
        out = ctx.Queue()
        procs = [ctx.Process(target=_spin, args=(seconds, out)) for _ in range(p)]
        for proc in procs:
            proc.start()
        n = sum(out.get(timeout=60) for _ in procs)
        for proc in procs:
            proc.join()
        return n

    return total(processes) / total(1)


def _has_langgraph() -> bool:
    try:
        import langgraph.checkpoint.postgres.aio  # noqa: F401
    except ImportError:
        return False
    return True


def _median_case(cases: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(c[key] for c in cases) for key in cases[0]}


def _line(r: dict[str, float]) -> str:
    return f"{r['runs_s']:>7.1f} {r['saves_s']:>8.0f} {r['run_ms']:>7.0f}"


def _bound_line(r: dict[str, float]) -> str:
    pg_ms = r["pg_cores"] / r["runs_s"] * 1000
    return (
        f"{r['saves_per_run']:>5.1f} {r['worker_ms_per_run']:>6.1f} {pg_ms:>6.1f} {r['save_ms_per_run']:>7.1f} "
        f"{r['pool_wait_ms_per_run']:>7.2f} {r['lock_waiters']:>5.2f} {r['max_worker_cpu_share'] * 100:>5.0f}% "
        f"{r['machine_busy'] * 100:>4.0f}%"
    )


def cpu_ceiling(r: dict[str, float], cores: int) -> float:
    """Runs/s at which worker plus server CPU per run would fill every core of the machine."""
    return cores / (r["worker_ms_per_run"] / 1000 + r["pg_cores"] / r["runs_s"])


def our_cores(r: dict[str, float]) -> float:
    """Cores the workers and the server used together during the case."""
    return r["worker_cores"] + r["pg_cores"]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Runs/s of 1, 2 and 4 worker processes on one PostgreSQL database, lovia beside LangGraph."
    )
    parser.add_argument(
        "--model-latency-ms",
        type=float,
        default=0.0,
        help="milliseconds every model call awaits before answering, on both sides (default 0: pure CPU)",
    )
    parser.add_argument("--runs", type=int, default=RUNS, help="runs per case (env LOVIA_BENCH_RUNS; %(default)s)")
    parser.add_argument("--reps", type=int, default=REPS, help="repetitions (env LOVIA_BENCH_REPS; %(default)s)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=CONCURRENCY,
        help="runs in flight per process (env LOVIA_BENCH_CONCURRENCY; %(default)s)",
    )
    parser.add_argument("--lovia-only", action="store_true", help="skip the LangGraph side")
    return parser.parse_args(argv)


def _joined(r: dict[int, dict[str, float]], key: str, fmt: str) -> str:
    return ", ".join(fmt.format(r[p][key]) for p in PROCESSES)


def _bound(r1: dict[str, float], r2: dict[str, float], ceiling: float, processes: int) -> str:
    """What held case ``r2`` back against case ``r1`` (half its processes), from what was measured."""
    reasons = []
    if r2["max_worker_cpu_share"] > 0.85:
        reasons.append(f"CPU: the busiest worker used {r2['max_worker_cpu_share']:.0%} of a core over its wall time")
    if r2["machine_busy"] > 0.9:
        reasons.append(
            f"CPU: the machine was {r2['machine_busy']:.0%} busy, other tenants using "
            f"{max(r2['machine_busy'] * r2['cores'] - our_cores(r2), 0.0):.2f} cores of {r2['cores']:.0f} "
            f"(ceiling for {processes} processes {ceiling:.2f}x)"
        )
    if r2["worker_ms_per_run"] > 1.2 * r1["worker_ms_per_run"]:
        reasons.append(
            f"CPU: worker CPU per run rose from {r1['worker_ms_per_run']:.1f} to {r2['worker_ms_per_run']:.1f} ms "
            "(processes taking turns on the cores)"
        )
    if r2["save_ms_per_run"] > 1.3 * r1["save_ms_per_run"] and r2["save_ms_per_run"] > 0.2 * r2["run_ms"]:
        reasons.append(
            f"store: time inside saves rose from {r1['save_ms_per_run']:.0f} to {r2['save_ms_per_run']:.0f} ms "
            f"per run (of {r2['run_ms']:.0f} ms): the server, on the same cores, answers later"
        )
    if r2["pool_wait_ms_per_run"] > 1.0:
        reasons.append(f"pool: {r2['pool_wait_ms_per_run']:.1f} ms per run waiting for a connection")
    if r2["lock_waiters"] > 0.1:
        reasons.append(f"locks: {r2['lock_waiters']:.2f} server backends waiting on a lock on average")
    return "; ".join(reasons) or "no CPU, store, pool or lock limit measured"


def main(argv: list[str] | None = None) -> int:
    global RUNS, REPS, CONCURRENCY, LATENCY
    import psycopg

    args = _parse(argv)
    RUNS, REPS, CONCURRENCY, LATENCY = args.runs, args.reps, args.concurrency, args.model_latency_ms / 1000
    kinds = ["lovia", "langgraph"] if _has_langgraph() and not args.lovia_only else ["lovia"]
    schemas = {k: f"bench_{k}_{uuid.uuid4().hex[:8]}" for k in kinds}
    with psycopg.connect(DSN, autocommit=True) as conn:
        for schema in schemas.values():
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    if "langgraph" in schemas:
        asyncio.run(_langgraph_setup(schemas["langgraph"]))  # its tables, once, before the workers start
    cores = os.cpu_count() or 1
    print(
        f"worker scaling on one PostgreSQL database: {RUNS} runs per case, {CALLS} tool calls per run, "
        f"{CONCURRENCY} runs in flight per process, model latency {args.model_latency_ms:g} ms per call, "
        f"{cores} cores, median of {REPS} repetitions"
    )
    raw: dict[str, dict[int, list[dict[str, float]]]] = {k: {p: [] for p in PROCESSES} for k in kinds}
    ceilings: dict[int, list[float]] = {p: [] for p in PROCESSES}
    try:
        for _ in range(REPS):  # every size and framework once per repetition, back to back
            for processes in PROCESSES:
                for kind in kinds:
                    raw[kind][processes].append(run_case(kind, processes, schemas[kind]))
                ceilings[processes].append(machine_ceiling(processes))
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            for schema in schemas.values():
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    results = {k: {p: _median_case(raw[k][p]) for p in PROCESSES} for k in kinds}
    for k in kinds:
        for p in PROCESSES:
            r = results[k][p]
            # Runs/s if every run took only its model waits plus its own CPU: what latency allows.
            per_run = (CALLS + 1) * LATENCY + r["worker_ms_per_run"] / 1000
            r["latency_bound"] = p * CONCURRENCY / per_run
            r["latency_share"] = r["runs_s"] / r["latency_bound"] if LATENCY else 0.0
    head = "runs/s  saves/s  run.ms"
    print(f"{'procs':>5} | {'lovia ' + head:<31} | {'langgraph ' + head:<31} | ceiling")
    for p in PROCESSES:
        row = f"{p:>5} |" + "".join(f" {_line(results[k][p]):<31} |" for k in kinds)
        print(row + f" {statistics.median(ceilings[p]):.2f}x")
    print()
    print(f"{'':>9}{'procs':>6} | s/run   w.ms  pg.ms save.ms pool.ms locks w.cpu busy")
    for k in kinds:
        for p in PROCESSES:
            print(f"{k:>9}{p:>6} | {_bound_line(results[k][p])}")
    print()
    print("run.ms = mean wall time of one run; s/run = saves per run; w.ms / pg.ms = CPU ms per run in the")
    print("workers / in the PostgreSQL server; save.ms = wall ms per run spent inside store writes (LangGraph")
    print("overlaps its writes with each other, so its figure can exceed run.ms); pool.ms =")
    print("ms per run waiting for a pooled connection; locks = server backends waiting on a lock (mean of")
    print("samples); w.cpu = the busiest worker's CPU time over its wall time (near 100%: CPU-bound);")
    print("busy = the whole machine's CPU (other tenants included); ceiling = pure-Python work N spinning")
    print("processes got done vs one, right after the case: what the machine allowed then")
    for kind in kinds:
        r = results[kind]
        per_rep = [b["runs_s"] / a["runs_s"] for a, b in zip(raw[kind][1], raw[kind][2], strict=True)]
        scale2, scale4 = r[2]["runs_s"] / r[1]["runs_s"], r[4]["runs_s"] / r[2]["runs_s"]
        print(
            f"{kind}: runs/s scaling 1->2 {scale2:.2f}x "
            f"(per repetition {', '.join(f'{x:.2f}' for x in per_rep)}), 2->4 {scale4:.2f}x; "
            f"{r[1]['worker_ms_per_run']:.1f} ms worker + {r[1]['pg_cores'] / r[1]['runs_s'] * 1000:.1f} ms server CPU "
            f"per run: {cores} cores are full at {cpu_ceiling(r[1], cores):.0f} runs/s; cores used by workers + server "
            f"at 1/2/4 processes: {', '.join(f'{our_cores(r[p]):.2f}' for p in PROCESSES)}"
        )
        if LATENCY:
            print(
                f"  the model latency alone allows {_joined(r, 'latency_bound', '{:.1f}')} runs/s "
                f"at 1/2/4 processes; reached {_joined(r, 'latency_share', '{:.0%}')} of it"
            )
        met = scale2 >= 1.7 and r[4]["runs_s"] >= r[2]["runs_s"]
        print(f"  {'PASS' if met else 'MISS'} (target: >= 1.7x from 1 to 2, no fall at 4)")
        if scale2 < 1.7:
            print(f"  1->2 bounded by: {_bound(r[1], r[2], statistics.median(ceilings[2]), 2)}")
        if scale4 < 1.0:
            print(f"  the fall at 4: {_bound(r[2], r[4], statistics.median(ceilings[4]), 4)}")
    if "langgraph" in results:
        for p in PROCESSES:
            a, b = results["lovia"][p], results["langgraph"][p]
            print(
                f"{p} procs: lovia/langgraph runs/s {a['runs_s'] / b['runs_s']:.2f}x, saves/s "
                f"{a['saves_s'] / b['saves_s']:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
