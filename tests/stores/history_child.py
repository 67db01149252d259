"""Child process for test_history_cache.py: changes a session through its own store, then exits.

Usage: python history_child.py BACKEND TARGET SESSION_ID OP [ARG]
BACKEND is ``sqlite`` (TARGET: file path) or ``postgres`` (TARGET: ``dsn|schema``); OP is one of
``append`` (ARG: run id), ``rewind`` (ARG: keep_entries), ``trim``, ``clear``, ``append_forever``
(appends until killed, printing each committed run id) or ``serve`` (reads ``OP [ARG]`` lines
from stdin, runs each and answers ``ok``: one process for many changes).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry


def run_entries(tag: str) -> list[Any]:
    return [
        InputEntry(role="user", content=f"question {tag}"),
        ToolCallEntry(call_id=f"c-{tag}", name="lookup", arguments="{}"),
        ToolResultEntry(call_id=f"c-{tag}", output=f"result {tag} " + "x" * 600),
        AssistantTextEntry(content=f"answer {tag}"),
    ]


def open_store(backend: str, target: str) -> Any:
    if backend == "sqlite":
        from lovia.stores import SQLiteSession

        return SQLiteSession(target)
    from lovia.stores import PostgresSession

    dsn, schema = target.split("|")
    return PostgresSession(dsn, schema=schema)


async def change(store: Any, sid: str, op: str, arg: str | None) -> None:
    if op == "append":
        await store.append(sid, run_entries(str(arg)), run_id=str(arg), meta={"by": "child", "run": arg})
    elif op == "rewind":
        await store.rewind(sid, keep_entries=int(str(arg)))
    elif op == "trim":
        await store.trim_tool_results(sid, keep_chars=20, keep_runs=1)
    elif op == "clear":
        await store.clear(sid)
    else:
        raise SystemExit(f"unknown op {op}")


async def main(backend: str, target: str, sid: str, op: str, arg: str | None) -> None:
    async with open_store(backend, target) as store:
        if op == "serve":
            for line in sys.stdin:
                name, *rest = line.split()
                await change(store, sid, name, rest[0] if rest else None)
                print("ok", flush=True)
        elif op == "append_forever":
            n = 0
            while True:
                await store.append(sid, run_entries(f"k{n}"), run_id=f"k{n}")
                print(f"k{n}", flush=True)
                n += 1
        else:
            await change(store, sid, op, arg)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5], sys.argv[5] if len(sys.argv) > 5 else None))
