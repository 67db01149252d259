"""Hostile input cannot poison a run: a lone surrogate, a buggy provider, a damaged row.

Run it: ``python examples/hostile_input.py`` (offline: the model is scripted).

1. The model sends a lone UTF-16 surrogate in its tool arguments and its answer. The run
   completes and SQLite stores U+FFFD in their place.
2. A provider with a bug raises ``KeyError``. The caller gets a ``LoviaError`` with a hint
   (still a ``KeyError`` too), and the checkpoint says ``failed``, not ``running``.
3. One checkpoint row is damaged by hand. ``list_runs()`` still lists every run and names the
   damaged one with its hint.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path

from lovia import Agent, CheckpointOptions, LoviaError, Runner, SQLiteCheckpointer, tool
from lovia.testing import ScriptedProvider, call, fail, text


@tool
def echo(s: str) -> str:
    """Echo the text back."""
    return f"you said {s}"


async def main(db: Path) -> None:
    async with SQLiteCheckpointer(db) as cp:
        model = ScriptedProvider([call("echo", {"s": "x\ud800y"}), text("done \udfff")])
        agent = Agent(name="echo", model=model, tools=[echo])
        result = await Runner.run(agent, "hi", checkpoint=CheckpointOptions(cp, "surrogates"))
        snap = await cp.load("surrogates")
        assert snap is not None
        print(f"1. status={snap.status} answer={result.output!r} tool result={snap.entries[-2].output!r}")

        buggy = Agent(name="buggy", model=ScriptedProvider([fail(KeyError("choices"))]), retry=None)
        try:
            await Runner.run(buggy, "hi", checkpoint=CheckpointOptions(cp, "buggy"))
        except LoviaError as exc:
            snap = await cp.load("buggy")
            assert snap is not None
            print(f"2. caught {type(exc).__name__} (a KeyError too: {isinstance(exc, KeyError)}), status={snap.status}")
            print(f"   hint: {exc.hint}")

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE snapshot_heads SET head_json = '{damaged' WHERE run_id = 'buggy'")
    async with SQLiteCheckpointer(db) as cp:
        for info in await cp.list_runs():
            print(f"3. {info.run_id}: {'DAMAGED ' + info.damaged if info.damaged else info.status}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "runs.db"))
