"""The stores the migration tests know: how to open one (which migrates its file) and what it serves.

One entry per store. ``open`` runs in the crash child and must migrate the file; ``serve`` reads
everything the store holds as plain data, so two files can be compared by what they serve.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lovia import SQLiteCheckpointer, SQLiteSession
from lovia.stores.sqlite._schema import MIGRATIONS, Migration
from lovia.transcript import entry_to_dict


@dataclass(frozen=True)
class StoreCase:
    open: Callable[[Path, bool], Awaitable[None]]
    serve: Callable[[Path, bool], Awaitable[Any]]
    migrations: Callable[[], Sequence[Migration]]
    """The store's steps (the stores outside lovia.stores keep theirs beside their code)."""


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


def _chat_store(path: Path, wal: bool) -> Any:
    from lovia.stores import InMemoryCheckpointer, InMemorySession
    from lovia.web import ChatStore

    # Only the chat index: the session and checkpoint tables in the same file are their own stores.
    return ChatStore(InMemorySession(), meta_path=path, checkpointer=InMemoryCheckpointer(), wal=wal)


async def _open_chat(path: Path, wal: bool) -> None:
    await _chat_store(path, wal).close()


async def _serve_chat(path: Path, wal: bool) -> Any:
    store = _chat_store(path, wal)
    try:
        served = {}
        for meta in await store.list(limit=500):
            runs = await store.runs(meta.id)
            served[meta.id] = (meta.to_dict(), sorted((r.run_id, r.status, r.source) for r in runs.values()))
        return served
    finally:
        await store.close()


def _chat_migrations() -> Sequence[Migration]:
    from lovia.web.store.schema import CHAT_MIGRATIONS

    return CHAT_MIGRATIONS


class BagOfWords:
    """Counts of four words, each plus 0.01: the space 0.9.119's fixture vectors live in."""

    id = "fake-embedder-4"
    words = ("atlas", "launch", "weather", "march")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[t.lower().split().count(w) + 0.01 for w in self.words] for t in texts]


async def _open_archive(path: Path, wal: bool) -> None:
    from lovia.plugins.memory.index import KeywordIndex

    await KeywordIndex(path).count()


async def _serve_archive(path: Path, wal: bool) -> Any:
    from lovia.plugins.memory.index import KeywordIndex

    hits = await KeywordIndex(path).search("Atlas launch weather", k=50)
    return sorted((h.doc.id, h.doc.text) for h in hits)


def _archive_migrations() -> Sequence[Migration]:
    from lovia.plugins.memory.index import KEYWORD_MIGRATIONS

    return KEYWORD_MIGRATIONS


async def _open_vectors(path: Path, wal: bool) -> None:
    from lovia.plugins.memory.vector import VectorIndex

    await VectorIndex(path, BagOfWords()).search("atlas", k=1)


async def _serve_vectors(path: Path, wal: bool) -> Any:
    from lovia.plugins.memory.vector import VectorIndex

    hits = await VectorIndex(path, BagOfWords()).search("atlas launch", k=50)
    return [(h.doc.id, h.doc.text) for h in hits]


def _vector_migrations() -> Sequence[Migration]:
    from lovia.plugins.memory.vector import VECTOR_MIGRATIONS

    return VECTOR_MIGRATIONS


STORES: dict[str, StoreCase] = {
    "session": StoreCase(_open_session, _serve_session, lambda: MIGRATIONS["session"]),
    "checkpoint": StoreCase(_open_checkpoint, _serve_checkpoint, lambda: MIGRATIONS["checkpoint"]),
    "chat": StoreCase(_open_chat, _serve_chat, _chat_migrations),
    "memory_archive": StoreCase(_open_archive, _serve_archive, _archive_migrations),
    "memory_vectors": StoreCase(_open_vectors, _serve_vectors, _vector_migrations),
}
