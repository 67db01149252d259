"""Bundled session and checkpoint stores.

* :class:`SQLiteSession`, :class:`SQLiteCheckpointer`: durable, stdlib ``sqlite3``; may share a file.
* :class:`InMemorySession`, :class:`InMemoryCheckpointer`: for tests and ephemeral chat only.

All four offer, beyond their protocols, inspection (``list_sessions`` / ``list_runs``); the
sessions offer maintenance (``trim_tool_results``, ``rewind``); the checkpointers offer run leases.
"""

from __future__ import annotations

from .memory import InMemoryCheckpointer, InMemorySession
from .sqlite import SQLiteCheckpointer, SQLiteSession

__all__ = ["InMemoryCheckpointer", "InMemorySession", "SQLiteCheckpointer", "SQLiteSession"]
