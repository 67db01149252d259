"""``SQLiteSession``: the bundled durable session store (stdlib ``sqlite3``, one worker thread).

Layout: ``session_runs(id AUTOINCREMENT, session_id, run_id, entries_json, meta_json, created_at,
UNIQUE(session_id, run_id))`` indexed on ``(session_id, id)``; run order is the autoincrement id.
Each row carries a CRC-32 of its entries and meta text (``checksum``), verified whenever the row
is decoded.

The incremental history cache (:mod:`lovia.stores._history`) learns what changed from two
counters. An append is counted by its own row: ids are ``AUTOINCREMENT`` (never reused) and SQLite
has one writer at a time, so ids grow in commit order and the session's largest id is its
append counter, written in the append's transaction by construction. Append is therefore one
``INSERT OR IGNORE`` (idempotent by run id) and touches no other table. Maintenance (rewind, trim,
clear) rewrites or deletes rows and bumps ``session_heads.epoch`` in the same ``BEGIN IMMEDIATE``
transaction; a cache built at another epoch is read again in full.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from ...session import Segment, SessionInfo, new_run_id
from ...transcript import TranscriptEntry
from .._codec import (
    checksum,
    decode_entries,
    decode_history,
    encode_entries,
    encode_meta,
    verify_checksum,
)
from .._history import EMPTY_ID, HistoryCache, HistoryState
from .._listing import session_info
from .._maintenance import check_non_negative, plan_rewind, trim_entries
from ._db import Database, read, write

__all__ = ["SQLiteSession"]

_Row = tuple[int, str, str, "str | None", "int | None"]

_SELECT_FROM = (
    "SELECT id, run_id, entries_json, meta_json, checksum FROM session_runs WHERE session_id = ? AND id > ? ORDER BY id"
)
# What a load reads: the entries and the meta as their stored UTF-8 bytes, which the checksum covers
# and the JSON parser takes as they are (no text object made, nothing encoded again to check it).
_LOAD_FROM = _SELECT_FROM.replace("entries_json", "CAST(entries_json AS BLOB)", 1).replace(
    "meta_json", "CAST(meta_json AS BLOB)", 1
)
# ``version`` is no longer read (schema version 3 counts appends by row id); it is still bumped so
# the column keeps meaning "changes made", as in the files that version 2 wrote.
_BUMP_EPOCH = (
    "INSERT INTO session_heads (session_id, version, epoch) VALUES (?, 1, 1) "
    "ON CONFLICT (session_id) DO UPDATE SET version = version + 1, epoch = epoch + 1"
)
# The session's row before the one just inserted, and its epoch, for the cache (see after_append).
_PREVIOUS = (
    "SELECT (SELECT MAX(id) FROM session_runs WHERE session_id = ?1 AND id < ?2), "
    "(SELECT epoch FROM session_heads WHERE session_id = ?1)"
)
# The session's epoch (0 before any maintenance) and its largest row id (0 when empty).
_COUNTERS = (
    "SELECT (SELECT epoch FROM session_heads WHERE session_id = ?1), "
    "(SELECT MAX(id) FROM session_runs WHERE session_id = ?1)"
)


def _select_rows(conn: sqlite3.Connection, session_id: str) -> list[_Row]:
    return conn.execute(_SELECT_FROM, (session_id, 0)).fetchall()


def _decode_row(session_id: str, row: _Row) -> list[TranscriptEntry]:
    _, run_id, entries_json, meta_json, stored = row
    verify_checksum(stored, entries_json, meta_json, session_id=session_id, run_id=run_id)
    return decode_entries(entries_json, session_id=session_id, run_id=run_id)


def _refresh(conn: sqlite3.Connection, cache: HistoryCache, session_id: str) -> HistoryState:
    """The session now, reading only what changed since the cached state (see the module docstring)."""
    with read(conn):
        epoch, last_id = conn.execute(_COUNTERS, (session_id,)).fetchone()
        epoch, last_id = epoch or 0, last_id or EMPTY_ID
        base = cache.get(session_id)
        if base is not None and base.epoch == epoch and base.version <= last_id:
            if base.version == last_id:
                return base
            rows = conn.execute(_LOAD_FROM, (session_id, base.last_id)).fetchall()
        else:
            # Never cached, maintained since, or rows removed by hand (the largest id went down).
            base = None
            rows = conn.execute(_LOAD_FROM, (session_id, 0)).fetchall()
    return cache.advance(session_id, base, decode_history(session_id, rows), epoch=epoch, version=last_id)


def _trim(conn: sqlite3.Connection, session_id: str, keep_chars: int, keep_runs: int) -> int:
    total = 0
    with write(conn):
        rows = _select_rows(conn, session_id)
        for row in rows[: max(len(rows) - keep_runs, 0)]:
            entries, count = trim_entries(_decode_row(session_id, row), keep_chars)
            if count:
                text = encode_entries(entries)
                conn.execute(
                    "UPDATE session_runs SET entries_json = ?, checksum = ? WHERE id = ?",
                    (text, checksum(text, row[3]), row[0]),
                )
                total += count
        if total:
            conn.execute(_BUMP_EPOCH, (session_id,))
    return total


def _rewind(conn: sqlite3.Connection, session_id: str, keep_entries: int) -> int:
    with write(conn):
        rows = _select_rows(conn, session_id)
        decoded = [_decode_row(session_id, r) for r in rows]
        plan = plan_rewind(decoded, keep_entries)
        if plan is None:
            return 0
        doomed = [r[0] for r in rows[plan.keep_segments :]]
        if plan.cut_entries:
            cut_id = doomed.pop(0)
            text = encode_entries(plan.cut_entries)
            conn.execute(
                "UPDATE session_runs SET entries_json = ?, meta_json = NULL, checksum = ? WHERE id = ?",
                (text, checksum(text), cut_id),
            )
        conn.executemany("DELETE FROM session_runs WHERE id = ?", [(i,) for i in doomed])
        conn.execute(_BUMP_EPOCH, (session_id,))
    return plan.removed


def clear_rows(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete a session's segments inside the caller's write transaction on a connection to the store's file.

    Another store sharing the file (the web app's chat index) uses it to delete a chat in one
    transaction; a cached history of the session sees the bumped epoch and reloads.
    """
    if conn.execute("DELETE FROM session_runs WHERE session_id = ?", (session_id,)).rowcount:
        # The head row stays: its counters must never repeat a version a cache may hold.
        conn.execute(_BUMP_EPOCH, (session_id,))


def _clear(conn: sqlite3.Connection, session_id: str) -> None:
    with write(conn):
        clear_rows(conn, session_id)


_LIST_SQL = """
SELECT session_id, COUNT(*),
       SUM(CASE WHEN json_valid(entries_json) THEN json_array_length(entries_json) ELSE 0 END),
       MIN(created_at), MAX(created_at), MAX(id) AS last_id,
       SUM(CASE WHEN json_valid(entries_json) AND json_type(entries_json) = 'array' THEN 0 ELSE 1 END)
FROM session_runs
WHERE ? IS NULL OR instr(session_id, ?) > 0
GROUP BY session_id
ORDER BY last_id DESC
LIMIT ? OFFSET ?
"""


class SQLiteSession:
    """A :class:`~lovia.session.Session` in a SQLite file.

    Args:
        path: the database file (created when missing). It may be shared with a
            :class:`~lovia.stores.SQLiteCheckpointer` and other writers; use ``wal=True`` then.
        wal: WAL journal + ``synchronous=NORMAL`` (see ``docs/sessions.md`` for what each mode
            guarantees). Off by default.

    The file is opened, and migrated if older, on first use. ``close()`` (or ``async with``)
    releases the connection and its worker thread.
    """

    def __init__(self, path: str | os.PathLike[str], *, wal: bool = False) -> None:
        self._db = Database(path, wal=wal, component="session")
        self._cache = HistoryCache()

    @property
    def path(self) -> str:
        """The database file."""
        return self._db.path

    async def segments(self, session_id: str) -> list[Segment]:
        """All segments of the session, in run order."""
        state = await self._db.run(lambda conn: _refresh(conn, self._cache, session_id))
        return state.segment_list()

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat concatenation of every segment's entries."""
        state = await self._db.run(lambda conn: _refresh(conn, self._cache, session_id))
        return state.entry_list()

    async def _history(self, session_id: str) -> tuple[list[TranscriptEntry], dict[str, Any] | None]:
        # What a run start needs (see lovia.stores._history.history_of).
        state = await self._db.run(lambda conn: _refresh(conn, self._cache, session_id))
        return state.entry_list(), state.last_meta()

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Store one run as a segment (a no-op when ``run_id`` is already stored); return its id."""
        rid = run_id if run_id is not None else new_run_id()
        stored = list(entries)
        text, meta_json = encode_entries(stored), encode_meta(meta)
        params = (session_id, rid, text, meta_json, time.time(), checksum(text, meta_json))
        cache = self._cache

        def insert(conn: sqlite3.Connection) -> None:
            with write(conn):
                cur = conn.execute(
                    "INSERT OR IGNORE INTO session_runs "
                    "(session_id, run_id, entries_json, meta_json, created_at, checksum) VALUES (?, ?, ?, ?, ?, ?)",
                    params,
                )
                if cur.rowcount != 1:
                    return  # already stored under this run id: nothing changed
                row_id = int(cur.lastrowid or 0)
                prev_id, epoch = conn.execute(_PREVIOUS, (session_id, row_id)).fetchone()
                state = cache.after_append(
                    session_id,
                    row_id,
                    prev_id,
                    rid,
                    stored,
                    meta_json,
                    epoch=epoch or 0,
                    version=row_id,
                    previous=prev_id or EMPTY_ID,
                )
            cache.publish(session_id, state)

        await self._db.write(insert, size=len(text) + len(meta_json or ""))
        return rid

    async def clear(self, session_id: str) -> None:
        """Delete every segment of the session."""
        self._cache.drop(session_id)
        await self._db.run(lambda conn: _clear(conn, session_id))
        self._cache.drop(session_id)

    async def trim_tool_results(self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1) -> int:
        """Truncate tool outputs older than the newest ``keep_runs`` runs; return how many were trimmed.

        Trimmed outputs keep their first ``keep_chars`` characters plus a marker noting how much
        was cut and that ``recall_tool_result`` works only if the output was archived; ``raw`` is
        dropped. Entry count, order, ``call_id`` and ``is_error`` are kept. Idempotent.

        Raises:
            ValueError: a negative argument.
        """
        check_non_negative(keep_chars=keep_chars, keep_runs=keep_runs)
        try:
            return await self._db.run(lambda conn: _trim(conn, session_id, keep_chars, keep_runs))
        finally:
            self._cache.drop(session_id)

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of ``load()``; return how many were removed.

        Later runs are deleted; the run the cut lands in is truncated, kept tool-consistent and
        loses its meta. ``0`` empties the session; a count at or past the end is a no-op. Atomic.
        Delete a live checkpoint of the rewound run yourself.

        Raises:
            ValueError: a negative ``keep_entries``.
        """
        check_non_negative(keep_entries=keep_entries)
        try:
            return await self._db.run(lambda conn: _rewind(conn, session_id, keep_entries))
        finally:
            self._cache.drop(session_id)

    async def list_sessions(self, *, limit: int = 50, offset: int = 0, query: str | None = None) -> list[SessionInfo]:
        """Sessions, most recently appended first; ``query`` filters by substring of the id."""
        check_non_negative(limit=limit, offset=offset)
        rows = await self._db.run(lambda conn: conn.execute(_LIST_SQL, (query, query, limit, offset)).fetchall())
        return [
            session_info(sid, runs, count, created, updated, bad) for sid, runs, count, created, updated, _, bad in rows
        ]

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        await self._db.close()

    async def __aenter__(self) -> SQLiteSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
