"""SQLite stores: :class:`SQLiteSession` and :class:`SQLiteCheckpointer` (stdlib ``sqlite3``).

Both may share one file; each keeps its schema version in the file's ``lovia_schema`` table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .checkpointer import SQLiteCheckpointer
    from .session import SQLiteSession

_LAZY = {
    "SQLiteCheckpointer": ".checkpointer",
    "SQLiteSession": ".session",
}

__all__ = ["SQLiteCheckpointer", "SQLiteSession"]

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
