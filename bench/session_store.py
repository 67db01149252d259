"""Session store benchmark: append one 4-entry run, load a 10,000-entry session (medians).

Run with the project venv for lovia's own figures, or with the peers venv to compare against the
OpenAI Agents SDK's ``SQLiteSession`` on the same data in the same process::

    .venv/bin/python bench/session_store.py
    bench/.peers/bin/python bench/session_store.py      # venv with openai-agents (gitignored)

Loads are timed cold (the store's history cache dropped before each, so every row is read,
checksummed and decoded) and cached (what a run start in a process that served the session
costs). Cold loads are taken in rounds, each round loading lovia's two files and the SDK's once in
a rotating order, and a ratio is the median of the round-by-round ratios, so a busy moment of a
shared machine hits both sides alike. Appends are also timed against a bare ``sqlite3`` INSERT +
COMMIT of the same bytes with the same pragmas, each lovia append followed by the bare one: the
journal's own cost, which lovia's default must stay within 25% of.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lovia.stores import SQLiteSession  # noqa: E402
from lovia.stores._codec import encode_entries, encode_meta  # noqa: E402
from lovia.stores.sqlite import _db  # noqa: E402
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry  # noqa: E402

APPENDS = 400
LOADS = 31
RUNS_IN_BIG_SESSION = 2_500  # x 4 entries = 10,000
WITH_META = "lovia wal=False, runs with meta"
RESULT = ("weather in Paris: 18C, light rain, wind 12 km/h from the south-west; humidity 81%. " * 3)[:200]


def lovia_run(n: int) -> list[Any]:
    return [
        InputEntry(role="user", content=f"What is the weather in Paris? ({n})"),
        ToolCallEntry(call_id=f"call_{n}", name="weather", arguments='{"city": "Paris"}'),
        ToolResultEntry(call_id=f"call_{n}", output=RESULT),
        AssistantTextEntry(content="It is 18C with light rain in Paris."),
    ]


def peer_run(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"What is the weather in Paris? ({n})"},
        {"type": "function_call", "call_id": f"call_{n}", "name": "weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": RESULT},
        {"role": "assistant", "content": "It is 18C with light rain in Paris."},
    ]


async def timed(n: int, step: Callable[[int], Awaitable[Any]], clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds of ``n`` calls of ``step(i)`` (``clock=time.process_time``: CPU seconds of
    this process, all threads: what a busy shared machine distorts least)."""
    samples = []
    for i in range(n):
        t0 = clock()
        await step(i)
        samples.append(clock() - t0)
    return statistics.median(samples)


async def bench_appends(folder: Path, *, wal: bool) -> dict[str, float]:
    """Median seconds of one lovia append and of the bare insert+commit of the same bytes, taken
    side by side: each lovia append is followed by the bare one."""
    bare = _bare_connection(folder, wal=wal)
    meta = encode_meta({"timing": {"started_at": 1.0, "finished_at": 2.0}})
    mine, theirs = [], []
    async with SQLiteSession(folder / f"lovia-append-{wal}.db", wal=wal) as session:
        await session.load("append")  # open the file first
        for i in range(APPENDS):
            run = lovia_run(i)
            t0 = time.perf_counter()
            await session.append("append", run, meta={"timing": {"started_at": 1.0, "finished_at": 2.0}})
            mine.append(time.perf_counter() - t0)
            theirs.append(_bare_append(bare, i, encode_entries(run), meta))
    bare.close()
    return {"append": statistics.median(mine), "bare": statistics.median(theirs)}


def run_meta(n: int) -> dict[str, Any]:
    """What the runner stores with a finished run: its timing, and the context policy's state."""
    return {"timing": {"started_at": 1_765_000_000.0 + n, "finished_at": 1_765_000_001.5 + n}, "context_state": {}}


async def big_lovia_session(folder: Path, *, wal: bool, meta: bool = False) -> SQLiteSession:
    session = SQLiteSession(folder / f"lovia-big-{wal}-{meta}.db", wal=wal)
    for i in range(RUNS_IN_BIG_SESSION):
        await session.append("big", lovia_run(i), meta=run_meta(i) if meta else None)
    assert len(await session.load("big")) == 10_000
    return session


async def lovia_cold_load(session: SQLiteSession) -> None:
    session._cache.drop("big")  # forget what this process decoded: every row is read again
    await session.load("big")


async def bench_loads(stores: dict[str, Callable[[], Awaitable[Any]]]) -> dict[str, dict[str, list[float]]]:
    """Per store, ``LOADS`` wall-clock and CPU seconds of a load, taken in rounds: each round loads
    every store once, in a rotating order, so a busy moment of the machine hits all of them alike
    and ratios can be taken round by round."""
    out: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in stores}
    names = list(stores)
    for k in range(LOADS):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            await stores[name]()
            await settle()
            out[name]["wall"].append(time.perf_counter() - t0)
            out[name]["cpu"].append(time.process_time() - c0)
    return out


async def settle() -> None:
    """Let the event loop run what a call left behind. A store that loads on an executor thread
    (the SDK's ``asyncio.to_thread``) hands its result over through callbacks that still hold it,
    so the list is only freed an iteration or two later: inside whichever load is timed next
    unless each load is charged, here, for its own clean-up."""
    for _ in range(3):
        await asyncio.sleep(0)


def paired(mine: list[float], theirs: list[float]) -> float:
    """Median of the round-by-round ratios."""
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))


def _bare_connection(folder: Path, *, wal: bool) -> sqlite3.Connection:
    """The journal's own cost: sqlite3 INSERT + COMMIT of the same bytes, same pragmas, no lovia."""
    conn = sqlite3.connect(folder / f"bare-{wal}.db", isolation_level=None)
    _db.configure(conn, wal=wal)
    conn.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, run_id TEXT, "
        "entries_json TEXT, meta_json TEXT, created_at REAL, UNIQUE (session_id, run_id))"
    )
    conn.execute("CREATE INDEX runs_sid ON runs (session_id, id)")
    return conn


def _bare_append(conn: sqlite3.Connection, i: int, text: str, meta: str | None) -> float:
    t0 = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO runs (session_id, run_id, entries_json, meta_json, created_at) VALUES (?, ?, ?, ?, ?)",
        ("append", f"r{i}", text, meta, time.time()),
    )
    conn.execute("COMMIT")
    return time.perf_counter() - t0


async def big_peer_session(folder: Path) -> Any | None:
    try:
        from agents import SQLiteSession as PeerSession  # type: ignore[import-not-found]
    except ImportError:
        return None
    big = PeerSession("big", folder / "peer.db")
    for i in range(RUNS_IN_BIG_SESSION):
        await big.add_items(peer_run(i))
    assert len(await big.get_items()) == 10_000
    return big


async def bench_peer_append(folder: Path) -> float | None:
    try:
        from agents import SQLiteSession as PeerSession
    except ImportError:
        return None
    small = PeerSession("append", folder / "peer-append.db")
    append = await timed(APPENDS, lambda i: small.add_items(peer_run(i)))
    small.close()
    return append


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


async def measure(folder: Path) -> dict[str, Any]:
    """Every figure of this benchmark, taken with files in ``folder`` (``peer_*`` are ``None``
    when the SDK is not importable). Seconds; load figures as per-round lists."""
    appends = {wal: await bench_appends(folder, wal=wal) for wal in (True, False)}
    peer_append = await bench_peer_append(folder)
    sessions = {wal: await big_lovia_session(folder, wal=wal) for wal in (True, False)}
    peer = await big_peer_session(folder)
    with_meta = await big_lovia_session(folder, wal=False, meta=True)
    stores: dict[str, Callable[[], Awaitable[Any]]] = {
        f"lovia wal={wal}": (lambda s=s: lovia_cold_load(s)) for wal, s in sessions.items()
    }
    stores[WITH_META] = lambda: lovia_cold_load(with_meta)
    if peer is not None:
        stores["peer"] = peer.get_items
    loads = await bench_loads(stores)
    cached = {wal: await timed(LOADS, lambda i, s=s: s.load("big")) for wal, s in sessions.items()}
    for s in [*sessions.values(), with_meta]:
        await s.close()
    if peer is not None:
        peer.close()
    return {"appends": appends, "peer_append": peer_append, "loads": loads, "cached": cached}


def ratios(figures: dict[str, Any]) -> dict[str, float]:
    """The ratios the targets name (those against the SDK only when it ran)."""
    appends, loads, peer_append = figures["appends"], figures["loads"], figures["peer_append"]
    out = {f"append wal={wal} / bare": appends[wal]["append"] / appends[wal]["bare"] for wal in (True, False)}
    if peer_append is not None and "peer" in loads:
        out["append wal=True / peer"] = appends[True]["append"] / peer_append
        out["append wal=False / peer"] = appends[False]["append"] / peer_append
        for name in ("lovia wal=True", "lovia wal=False", WITH_META):
            out[f"{name} cold load / peer"] = paired(loads[name]["wall"], loads["peer"]["wall"])
            out[f"{name} cold load / peer, CPU time"] = paired(loads[name]["cpu"], loads["peer"]["cpu"])
    return out


def print_report(figures: dict[str, Any]) -> None:
    appends, loads, cached, peer_append = (figures[k] for k in ("appends", "loads", "cached", "peer_append"))
    r = ratios(figures)
    print(f"{'store':34} {'append 4-entry run':>20} {'load 10k (cold)':>17} {'load 10k (cached)':>19}")
    for wal in (True, False):
        cold = statistics.median(loads[f"lovia wal={wal}"]["wall"])
        print(f"{f'lovia wal={wal}':34} {ms(appends[wal]['append']):>20} {ms(cold):>17} {ms(cached[wal]):>19}")
        print(f"{f'bare sqlite3 insert+commit wal={wal}':34} {ms(appends[wal]['bare']):>20}")
    print(f"{WITH_META:34} {'':>20} {ms(statistics.median(loads[WITH_META]['wall'])):>17}")
    if "append wal=True / peer" in r:
        peer_load = statistics.median(loads["peer"]["wall"])
        print(f"{'agents.SQLiteSession (WAL)':34} {ms(peer_append):>20} {ms(peer_load):>17}")
    print()
    print(f"append wal=True / bare insert+commit: {r['append wal=True / bare']:.2f}x")
    print(f"append wal=False / bare insert+commit: {r['append wal=False / bare']:.2f}x  (target <= 1.25x)")
    if "append wal=True / peer" not in r:
        print("agents (openai-agents) not importable: run with bench/.peers/bin/python for the peer ratios")
        return
    print(f"append wal=True / peer:  {r['append wal=True / peer']:.2f}x  (target <= 0.5x)")
    print(f"append wal=False / peer: {r['append wal=False / peer']:.2f}x")
    peer_load = statistics.median(loads["peer"]["wall"])
    for wal in (True, False):
        name = f"lovia wal={wal}"
        print(
            f"load 10k cold wal={wal} / peer: {r[f'{name} cold load / peer']:.2f}x  (target <= 0.5x), "
            f"in CPU time {r[f'{name} cold load / peer, CPU time']:.2f}x; cached: {cached[wal] / peer_load:.3f}x"
        )
    print(
        f"load 10k cold, every run with its meta (the runner's timing) / peer: "
        f"{r[f'{WITH_META} cold load / peer']:.2f}x (the SDK stores no per-run meta)"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else None) as tmp:
        print(f"files in {tmp} (sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]})")
        print_report(await measure(Path(tmp)))


if __name__ == "__main__":
    asyncio.run(main())
