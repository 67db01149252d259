"""The stores the migration tests know: how to open one (which migrates its file) and what it serves.

One entry per store. ``open`` runs in the crash child and must migrate the file; ``serve`` reads
everything the store holds as plain data, so two files can be compared by what they serve.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lovia import SQLiteCheckpointer, SQLiteSession
from lovia.transcript import entry_to_dict


@dataclass(frozen=True)
class StoreCase:
    open: Callable[[Path, bool], Awaitable[None]]
    serve: Callable[[Path, bool], Awaitable[Any]]


async def _open_session(path: Path, wal: bool) -> None:
    async with SQLiteSession(path, wal=wal) as session:
        await session.load("-")


async def _serve_session(path: Path, wal: bool) -> Any:
    async with SQLiteSession(path, wal=wal) as session:
        return {
            info.session_id: [
                (s.run_id, [entry_to_dict(e) for e in s.entries], s.meta)
                for s in await session.segments(info.session_id)
            ]
            for info in await session.list_sessions(limit=1000)
        }


async def _open_checkpoint(path: Path, wal: bool) -> None:
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        await checkpointer.load("-")


async def _serve_checkpoint(path: Path, wal: bool) -> Any:
    async with SQLiteCheckpointer(path, wal=wal) as checkpointer:
        served = {}
        for info in await checkpointer.list_runs(limit=1000):
            snap = await checkpointer.load(info.run_id)
            assert snap is not None
            served[info.run_id] = ([entry_to_dict(e) for e in snap.entries], dataclasses.asdict(snap.head))
        return served


STORES: dict[str, StoreCase] = {
    "session": StoreCase(_open_session, _serve_session),
    "checkpoint": StoreCase(_open_checkpoint, _serve_checkpoint),
}
