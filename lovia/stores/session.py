"""Bundled session stores (public module path): :class:`SQLiteSession` and :class:`InMemorySession`."""

from __future__ import annotations

from .memory import InMemorySession
from .sqlite.session import SQLiteSession

__all__ = ["InMemorySession", "SQLiteSession"]
