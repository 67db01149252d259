"""SQLite stores: :class:`SQLiteSession` and :class:`SQLiteCheckpointer` (stdlib ``sqlite3``).

Both may share one file; each keeps its schema version in the file's ``lovia_schema`` table.
"""

from __future__ import annotations

from .checkpointer import SQLiteCheckpointer
from .session import SQLiteSession

__all__ = ["SQLiteCheckpointer", "SQLiteSession"]
