"""Session store benchmark: append one 4-entry run, load a 10,000-entry session (medians).

Run with the project venv for lovia's own figures, or with the peers venv to compare against the
OpenAI Agents SDK's ``SQLiteSession`` on the same data in the same process::

    .venv/bin/python bench/session_store.py
    bench/.peers/bin/python bench/session_store.py      # venv with openai-agents (gitignored)

Also compares lovia's executor choice (one dedicated worker thread per store) with
``asyncio.to_thread`` over a lock-protected shared connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lovia.stores import SQLiteSession  # noqa: E402
from lovia.stores.sqlite import _db  # noqa: E402
from lovia.stores.sqlite._schema import ensure_schema  # noqa: E402
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry  # noqa: E402

APPENDS = 300
LOADS = 15
RUNS_IN_BIG_SESSION = 2_500  # x 4 entries = 10,000
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


async def timed(n: int, step: Callable[[int], Awaitable[Any]]) -> float:
    """Median seconds of ``n`` calls of ``step(i)``."""
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        await step(i)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


async def bench_lovia(folder: Path, *, wal: bool) -> tuple[float, float]:
    async with SQLiteSession(folder / f"lovia-{wal}.db", wal=wal) as session:
        append = await timed(APPENDS, lambda i: session.append("append", lovia_run(i)))
        for i in range(RUNS_IN_BIG_SESSION):
            await session.append("big", lovia_run(i))
        assert len(await session.load("big")) == 10_000
        load = await timed(LOADS, lambda i: session.load("big"))
    return append, load


async def bench_peer(folder: Path) -> tuple[float, float] | None:
    try:
        from agents import SQLiteSession as PeerSession  # type: ignore[import-not-found]
    except ImportError:
        return None
    small = PeerSession("append", folder / "peer.db")
    append = await timed(APPENDS, lambda i: small.add_items(peer_run(i)))
    big = PeerSession("big", folder / "peer.db")
    for i in range(RUNS_IN_BIG_SESSION):
        await big.add_items(peer_run(i))
    assert len(await big.get_items()) == 10_000
    load = await timed(LOADS, lambda i: big.get_items())
    small.close()
    big.close()
    return append, load


class _SharedConnWorker(_db._Worker):
    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _db.configure(conn, wal=self.wal)
        ensure_schema(conn, self.component, path=self.path)
        return conn


async def bench_to_thread(folder: Path, *, wal: bool) -> tuple[float, float]:
    """The same store, but each call goes through asyncio.to_thread with a lock around one connection."""
    lock = threading.Lock()
    session = SQLiteSession(folder / f"to-thread-{wal}.db", wal=wal)
    worker = _SharedConnWorker(session.path, wal, "session")

    def locked_call(fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with lock:
            return worker.call(fn)

    async def run(fn: Callable[[sqlite3.Connection], Any]) -> Any:
        return await asyncio.to_thread(locked_call, fn)

    session._db.run = run  # type: ignore[method-assign]
    append = await timed(APPENDS, lambda i: session.append("append", lovia_run(i)))
    for i in range(RUNS_IN_BIG_SESSION):
        await session.append("big", lovia_run(i))
    load = await timed(LOADS, lambda i: session.load("big"))
    worker.close_connection()
    await session.close()
    return append, load


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


async def main() -> None:
    with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else None) as tmp:
        folder = Path(tmp)
        print(f"files in {folder} (sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]})")
        results = {}
        for wal in (True, False):
            results[f"lovia wal={wal}"] = await bench_lovia(folder, wal=wal)
            results[f"to_thread wal={wal}"] = await bench_to_thread(folder, wal=wal)
        peer = await bench_peer(folder)
        if peer is not None:
            results["agents.SQLiteSession (WAL)"] = peer
        print(f"{'store':28} {'append 4-entry run':>20} {'load 10k entries':>18}")
        for name, (append, load) in results.items():
            print(f"{name:28} {ms(append):>20} {ms(load):>18}")
        for wal in (True, False):
            a, b = results[f"lovia wal={wal}"], results[f"to_thread wal={wal}"]
            print(f"worker thread / to_thread (wal={wal}): append {a[0] / b[0]:.2f}x, load {a[1] / b[1]:.2f}x")
        if peer is None:
            print("agents (openai-agents) not importable: run with bench/.peers/bin/python for the peer ratio")
        else:
            mine = results["lovia wal=True"]
            print(
                f"lovia(wal=True) / peer: append {mine[0] / peer[0]:.2f}x, load {mine[1] / peer[1]:.2f}x (lower is better)"
            )


if __name__ == "__main__":
    asyncio.run(main())
