"""``PostgresSession``: a durable session store shared by many workers on many hosts.

Append is one ``INSERT ... ON CONFLICT (session_id, run_id) DO NOTHING`` (atomic, idempotent by
run id, safe under any number of concurrent writers); run order is the ``BIGSERIAL`` id. Reads
are one statement each (one consistent snapshot). Maintenance locks the session's rows with
``SELECT ... FOR UPDATE`` and rewrites them in the same transaction, using the same pure
functions as every bundled store (:mod:`lovia.stores._maintenance`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from ...session import Segment, SessionInfo, new_run_id
from ...transcript import TranscriptEntry
from .._codec import decode_entries, decode_meta, encode_entries, encode_meta
from .._maintenance import check_non_negative, plan_rewind, trim_entries
from ._db import Database

__all__ = ["PostgresSession"]


class PostgresSession:
    """A :class:`~lovia.session.Session` in PostgreSQL (``pip install 'lovia[postgres]'``).

    Args:
        dsn: a libpq connection string, e.g. ``"postgresql://user@db-host/app"``.
        pool: instead of ``dsn``, a ``psycopg_pool.AsyncConnectionPool`` you own (lovia never
            closes it).
        schema: PostgreSQL schema for the tables (created if missing); default: the search path.
        table_prefix: prefix for every table name, e.g. ``"agents_"``.
        min_size: minimum connections in the pool lovia creates.
        max_size: maximum connections in the pool lovia creates.

    ``schema`` and ``table_prefix`` must be plain identifiers (letters, digits, ``_``). The pool is
    opened, and the schema created or migrated, on first use; ``close()`` (or ``async with``)
    closes the pool lovia created.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: Any | None = None,
        schema: str | None = None,
        table_prefix: str = "",
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self._db = Database(
            dsn,
            pool=pool,
            schema=schema,
            table_prefix=table_prefix,
            min_size=min_size,
            max_size=max_size,
            component="session",
        )
        t = self._db.names.table("session_runs")
        from psycopg import sql

        self._select = sql.SQL(
            "SELECT id, run_id, entries_json, meta_json FROM {} WHERE session_id = %s ORDER BY id"
        ).format(t)
        self._select_locked = sql.SQL(
            "SELECT id, run_id, entries_json, meta_json FROM {} WHERE session_id = %s ORDER BY id FOR UPDATE"
        ).format(t)
        self._insert = sql.SQL(
            "INSERT INTO {} (session_id, run_id, entries_json, entry_count, meta_json, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session_id, run_id) DO NOTHING"
        ).format(t)
        self._update = sql.SQL("UPDATE {} SET entries_json = %s, entry_count = %s WHERE id = %s").format(t)
        self._cut = sql.SQL("UPDATE {} SET entries_json = %s, entry_count = %s, meta_json = NULL WHERE id = %s").format(
            t
        )
        self._delete_ids = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(t)
        self._clear = sql.SQL("DELETE FROM {} WHERE session_id = %s").format(t)
        self._list = sql.SQL(
            "SELECT session_id, COUNT(*), COALESCE(SUM(entry_count), 0), MIN(created_at), MAX(created_at), "
            "MAX(id) AS last_id FROM {} WHERE %(q)s::text IS NULL OR strpos(session_id, %(q)s::text) > 0 "
            "GROUP BY session_id ORDER BY last_id DESC LIMIT %(limit)s OFFSET %(offset)s"
        ).format(t)

    async def segments(self, session_id: str) -> list[Segment]:
        """All segments of the session, in run order."""
        async with self._db.connection("reading a session") as conn:
            cur = await conn.execute(self._select, (session_id,))
            rows = await cur.fetchall()
        return [
            Segment(
                run_id=run_id,
                entries=decode_entries(entries_json, session_id=session_id, run_id=run_id),
                meta=decode_meta(meta_json, session_id=session_id, run_id=run_id),
            )
            for _, run_id, entries_json, meta_json in rows
        ]

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat concatenation of every segment's entries."""
        return [e for seg in await self.segments(session_id) for e in seg.entries]

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
        params = (session_id, rid, encode_entries(entries), len(entries), encode_meta(meta), time.time())
        async with self._db.connection("appending to a session") as conn:
            await conn.execute(self._insert, params)
        return rid

    async def clear(self, session_id: str) -> None:
        """Delete every segment of the session."""
        async with self._db.connection("clearing a session") as conn:
            await conn.execute(self._clear, (session_id,))

    async def trim_tool_results(self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1) -> int:
        """Truncate tool outputs older than the newest ``keep_runs`` runs; return how many were trimmed.

        Same semantics as :meth:`lovia.stores.SQLiteSession.trim_tool_results`; the session's rows
        are locked (``FOR UPDATE``) and rewritten in one transaction. Idempotent.

        Raises:
            ValueError: a negative argument.
        """
        check_non_negative(keep_chars=keep_chars, keep_runs=keep_runs)
        total = 0
        async with self._db.transaction("trimming a session") as conn:
            cur = await conn.execute(self._select_locked, (session_id,))
            rows = await cur.fetchall()
            for row_id, run_id, entries_json, _ in rows[: max(len(rows) - keep_runs, 0)]:
                decoded = decode_entries(entries_json, session_id=session_id, run_id=run_id)
                entries, count = trim_entries(decoded, keep_chars)
                if count:
                    await conn.execute(self._update, (encode_entries(entries), len(entries), row_id))
                    total += count
        return total

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of ``load()``; return how many were removed.

        Same semantics as :meth:`lovia.stores.SQLiteSession.rewind`, atomic under concurrent
        writers (the session's rows are locked while the cut is planned and written).

        Raises:
            ValueError: a negative ``keep_entries``.
        """
        check_non_negative(keep_entries=keep_entries)
        async with self._db.transaction("rewinding a session") as conn:
            cur = await conn.execute(self._select_locked, (session_id,))
            rows = await cur.fetchall()
            decoded = [decode_entries(r[2], session_id=session_id, run_id=r[1]) for r in rows]
            plan = plan_rewind(decoded, keep_entries)
            if plan is None:
                return 0
            doomed = [r[0] for r in rows[plan.keep_segments :]]
            if plan.cut_entries:
                cut_id = doomed.pop(0)
                await conn.execute(self._cut, (encode_entries(plan.cut_entries), len(plan.cut_entries), cut_id))
            if doomed:
                await conn.execute(self._delete_ids, (doomed,))
        return plan.removed

    async def list_sessions(self, *, limit: int = 50, offset: int = 0, query: str | None = None) -> list[SessionInfo]:
        """Sessions, most recently appended first; ``query`` filters by substring of the id."""
        check_non_negative(limit=limit, offset=offset)
        async with self._db.connection("listing sessions") as conn:
            cur = await conn.execute(self._list, {"q": query, "limit": limit, "offset": offset})
            rows = await cur.fetchall()
        return [
            SessionInfo(sid, int(runs), int(count), float(created), float(updated))
            for sid, runs, count, created, updated, _ in rows
        ]

    async def close(self) -> None:
        """Close the pool this store created (idempotent); a caller's pool stays open."""
        await self._db.close()

    async def __aenter__(self) -> PostgresSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
