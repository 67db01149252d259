"""``SQLiteSession``: the bundled durable session store (stdlib ``sqlite3``, one worker thread).

Layout: ``session_runs(id AUTOINCREMENT, session_id, run_id, entries_json, meta_json, created_at,
UNIQUE(session_id, run_id))`` indexed on ``(session_id, id)``; run order is the autoincrement id.
Append is ``INSERT OR IGNORE`` (idempotent by run id). Maintenance reads and rewrites the affected
rows inside one ``BEGIN IMMEDIATE`` transaction.
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
from .._codec import decode_entries, decode_meta, encode_entries, encode_meta
from .._listing import session_info
from .._maintenance import check_non_negative, plan_rewind, trim_entries
from ._db import Database, read, write

__all__ = ["SQLiteSession"]

_Row = tuple[int, str, str, "str | None"]


def _select_rows(conn: sqlite3.Connection, session_id: str) -> list[_Row]:
    return conn.execute(
        "SELECT id, run_id, entries_json, meta_json FROM session_runs WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()


def _segments(conn: sqlite3.Connection, session_id: str) -> list[Segment]:
    with read(conn):
        rows = _select_rows(conn, session_id)
    return [
        Segment(
            run_id=run_id,
            entries=decode_entries(entries_json, session_id=session_id, run_id=run_id),
            meta=decode_meta(meta_json, session_id=session_id, run_id=run_id),
        )
        for _, run_id, entries_json, meta_json in rows
    ]


def _load(conn: sqlite3.Connection, session_id: str) -> list[TranscriptEntry]:
    # load() skips the meta column entirely: it is the hot path of every run start.
    with read(conn):
        rows = conn.execute(
            "SELECT run_id, entries_json FROM session_runs WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
    out: list[TranscriptEntry] = []
    for run_id, entries_json in rows:
        out += decode_entries(entries_json, session_id=session_id, run_id=run_id)
    return out


def _trim(conn: sqlite3.Connection, session_id: str, keep_chars: int, keep_runs: int) -> int:
    total = 0
    with write(conn):
        rows = _select_rows(conn, session_id)
        for row_id, run_id, entries_json, _ in rows[: max(len(rows) - keep_runs, 0)]:
            entries, count = trim_entries(
                decode_entries(entries_json, session_id=session_id, run_id=run_id), keep_chars
            )
            if count:
                conn.execute("UPDATE session_runs SET entries_json = ? WHERE id = ?", (encode_entries(entries), row_id))
                total += count
    return total


def _rewind(conn: sqlite3.Connection, session_id: str, keep_entries: int) -> int:
    with write(conn):
        rows = _select_rows(conn, session_id)
        decoded = [decode_entries(r[2], session_id=session_id, run_id=r[1]) for r in rows]
        plan = plan_rewind(decoded, keep_entries)
        if plan is None:
            return 0
        doomed = [r[0] for r in rows[plan.keep_segments :]]
        if plan.cut_entries:
            cut_id = doomed.pop(0)
            conn.execute(
                "UPDATE session_runs SET entries_json = ?, meta_json = NULL WHERE id = ?",
                (encode_entries(plan.cut_entries), cut_id),
            )
        conn.executemany("DELETE FROM session_runs WHERE id = ?", [(i,) for i in doomed])
    return plan.removed


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

    @property
    def path(self) -> str:
        """The database file."""
        return self._db.path

    async def segments(self, session_id: str) -> list[Segment]:
        """All segments of the session, in run order."""
        return await self._db.run(lambda conn: _segments(conn, session_id))

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat concatenation of every segment's entries."""
        return await self._db.run(lambda conn: _load(conn, session_id))

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
        params = (session_id, rid, encode_entries(entries), encode_meta(meta), time.time())

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO session_runs (session_id, run_id, entries_json, meta_json, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                params,
            )

        await self._db.run(insert)
        return rid

    async def clear(self, session_id: str) -> None:
        """Delete every segment of the session."""
        await self._db.run(lambda conn: conn.execute("DELETE FROM session_runs WHERE session_id = ?", (session_id,)))

    async def trim_tool_results(self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1) -> int:
        """Truncate tool outputs older than the newest ``keep_runs`` runs; return how many were trimmed.

        Trimmed outputs keep their first ``keep_chars`` characters plus a marker noting how much
        was cut and that ``recall_tool_result`` works only if the output was archived; ``raw`` is
        dropped. Entry count, order, ``call_id`` and ``is_error`` are kept. Idempotent.

        Raises:
            ValueError: a negative argument.
        """
        check_non_negative(keep_chars=keep_chars, keep_runs=keep_runs)
        return await self._db.run(lambda conn: _trim(conn, session_id, keep_chars, keep_runs))

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of ``load()``; return how many were removed.

        Later runs are deleted; the run the cut lands in is truncated, kept tool-consistent and
        loses its meta. ``0`` empties the session; a count at or past the end is a no-op. Atomic.
        Delete a live checkpoint of the rewound run yourself.

        Raises:
            ValueError: a negative ``keep_entries``.
        """
        check_non_negative(keep_entries=keep_entries)
        return await self._db.run(lambda conn: _rewind(conn, session_id, keep_entries))

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
