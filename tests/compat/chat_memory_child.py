"""Child process for test_chat_memory_migration_crash.py: opens a store whose migration dies or fails at one step.

Usage: python chat_memory_child.py OPENER PATH STORE VERSION MODE
OPENER names what opens PATH (see ``OPENERS``); the child applies step VERSION of STORE for real,
then, still inside the migration's transaction, kills itself with SIGKILL (MODE ``kill``) or
raises (MODE ``fail``). MODE ``none`` opens without interference.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from lovia.stores.sqlite import _schema


def _chat(path: str) -> Any:
    from lovia.stores import InMemoryCheckpointer, InMemorySession
    from lovia.web import ChatStore

    return ChatStore(InMemorySession(), meta_path=path, checkpointer=InMemoryCheckpointer(), wal=False)


class _Embedder:
    id = "fake-embedder-4"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 1.0, 0.0, 1.0] for _ in texts]


def _keyword(path: str) -> Any:
    from lovia.plugins.memory.index import KeywordIndex

    return asyncio.run(KeywordIndex(path).count())


def _vector(path: str) -> Any:
    from lovia.plugins.memory.vector import VectorIndex

    return asyncio.run(VectorIndex(path, _Embedder()).search("atlas"))


OPENERS: dict[str, Callable[[str], Any]] = {"chat": _chat, "keyword": _keyword, "vector": _vector}


def main(opener: str, path: str, store: str, version: int, mode: str) -> None:
    real = _schema._apply_step

    def step(conn: sqlite3.Connection, name: str, migration: _schema.Migration) -> None:
        real(conn, name, migration)
        if name == store and migration.version == version:
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "fail":
                raise RuntimeError(f"step {version} of {store} failed on purpose")

    _schema._apply_step = step  # type: ignore[assignment]
    OPENERS[opener](path)
    print("opened")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
