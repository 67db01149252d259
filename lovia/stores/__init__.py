"""Bundled session and checkpoint stores.

* :class:`SQLiteSession`, :class:`SQLiteCheckpointer`: durable, stdlib ``sqlite3``; may share a file.
* :class:`InMemorySession`, :class:`InMemoryCheckpointer`: for tests and ephemeral chat only.
* :class:`PostgresSession`, :class:`PostgresCheckpointer`: many workers on many hosts
  (``pip install 'lovia[postgres]'``; imported lazily, so ``import lovia`` never loads psycopg).

All four offer, beyond their protocols, inspection (``list_sessions`` / ``list_runs``); the
sessions offer maintenance (``trim_tool_results``, ``rewind``); the checkpointers offer run leases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .memory import InMemoryCheckpointer, InMemorySession
from .sqlite import SQLiteCheckpointer, SQLiteSession

if TYPE_CHECKING:
    from .postgres import PostgresCheckpointer, PostgresSession


def __getattr__(name: str) -> object:
    # The PostgreSQL stores need the optional driver: import them only when asked for.
    if name in ("PostgresSession", "PostgresCheckpointer"):
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module 'lovia.stores' has no attribute {name!r}")


__all__ = [
    "InMemoryCheckpointer",
    "InMemorySession",
    "PostgresCheckpointer",
    "PostgresSession",
    "SQLiteCheckpointer",
    "SQLiteSession",
]
