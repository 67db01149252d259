"""A small base for the memory stores that live in one SQLite file (stdlib ``sqlite3``).

One connection per store, used from worker threads under a lock, so the event loop never blocks
on disk and concurrent runs sharing a store are serialized.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["SQLiteStore"]

T = TypeVar("T")


class SQLiteStore:
    """Owns one SQLite connection; subclasses define ``_schema(conn)``.

    ``_schema`` brings the file up to date (the indexes apply their numbered steps with
    :func:`lovia.stores.sqlite._schema.ensure_schema`, each file's steps in one transaction).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _schema(self, conn: sqlite3.Connection) -> None:  # pragma: no cover - overridden
        return None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
            try:
                # Migrate first: a migration that fails or dies then leaves the file as it was.
                self._schema(conn)
                conn.commit()
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connection()
            try:
                out = fn(conn)
                conn.commit()
                return out
            except BaseException:
                conn.rollback()
                raise

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._locked, fn)

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
