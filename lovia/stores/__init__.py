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

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .memory import InMemoryCheckpointer, InMemorySession
    from .postgres import PostgresCheckpointer, PostgresSession
    from .sqlite import SQLiteCheckpointer, SQLiteSession

# Each store is imported when first asked for; the PostgreSQL ones need the optional driver.
_LAZY = {
    "InMemoryCheckpointer": ".memory",
    "InMemorySession": ".memory",
    "PostgresCheckpointer": ".postgres",
    "PostgresSession": ".postgres",
    "SQLiteCheckpointer": ".sqlite",
    "SQLiteSession": ".sqlite",
}


__all__ = [
    "InMemoryCheckpointer",
    "InMemorySession",
    "PostgresCheckpointer",
    "PostgresSession",
    "SQLiteCheckpointer",
    "SQLiteSession",
]

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
