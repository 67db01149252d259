"""Bundled checkpoint stores (public module path): :class:`SQLiteCheckpointer` and :class:`InMemoryCheckpointer`."""

from __future__ import annotations

from .memory import InMemoryCheckpointer
from .sqlite.checkpointer import SQLiteCheckpointer

__all__ = ["InMemoryCheckpointer", "SQLiteCheckpointer"]
