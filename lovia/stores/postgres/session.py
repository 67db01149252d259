"""``PostgresSession``: a durable session store shared by many workers on many hosts.

Append is one statement: it bumps the session's ``session_heads`` row (the change counters of the
incremental history cache, :mod:`lovia.stores._history`) and inserts ``ON CONFLICT (session_id,
run_id) DO NOTHING`` (atomic, idempotent by run id, safe under any number of concurrent writers);
run order is the ``BIGSERIAL`` id. Every row carries a CRC-32 of its text, verified on decode. Reads
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
from .._codec import checksum, decode_history, decode_segment, encode_entries, encode_meta
from .._history import HistoryCache, HistoryState
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
        heads = self._db.names.table("session_heads")
        from psycopg import sql

        self._cache = HistoryCache()
        self._select_locked = sql.SQL(
            "SELECT id, run_id, entries_json, meta_json, checksum FROM {} WHERE session_id = %s ORDER BY id FOR UPDATE"
        ).format(t)
        self._select_all = sql.SQL(
            "SELECT id, run_id, entries_json, meta_json, checksum FROM {} WHERE session_id = %s ORDER BY id"
        ).format(t)
        # The head row and what changed since the cached (epoch, last id), in one snapshot.
        self._refresh_sql = sql.SQL(
            "SELECT h.epoch, h.version, r.id, r.run_id, r.entries_json, r.meta_json, r.checksum "
            "FROM {heads} h LEFT JOIN {t} r ON r.session_id = h.session_id "
            "AND r.id > CASE WHEN h.epoch = %(epoch)s AND h.version <> %(version)s THEN %(after)s "
            "WHEN h.epoch = %(epoch)s THEN 9223372036854775807 ELSE 0 END "
            "WHERE h.session_id = %(sid)s ORDER BY r.id"
        ).format(heads=heads, t=t)
        # The head upsert runs first (the insert reads its row), so it holds the session's row lock
        # before the new row's id is drawn: ids of one session grow in commit order.
        self._insert = sql.SQL(
            "WITH h AS (INSERT INTO {heads} AS cur (session_id, version, epoch) VALUES (%(sid)s, 1, 0) "
            "ON CONFLICT (session_id) DO UPDATE SET version = cur.version + 1 RETURNING epoch, version), "
            "r AS (INSERT INTO {t} (session_id, run_id, entries_json, entry_count, meta_json, created_at, checksum) "
            "SELECT %(sid)s, %(rid)s, %(entries)s, %(count)s, %(meta)s, %(at)s, %(checksum)s FROM h "
            "ON CONFLICT (session_id, run_id) DO NOTHING RETURNING id) "
            "SELECT h.epoch, h.version, r.id, (SELECT MAX(p.id) FROM {t} p WHERE p.session_id = %(sid)s "
            "AND p.id < r.id) FROM h LEFT JOIN r ON true"
        ).format(heads=heads, t=t)
        self._lock_head = sql.SQL("SELECT version FROM {} WHERE session_id = %s FOR UPDATE").format(heads)
        self._bump_epoch = sql.SQL(
            "UPDATE {} SET version = version + 1, epoch = epoch + 1 WHERE session_id = %s"
        ).format(heads)
        self._update = sql.SQL("UPDATE {} SET entries_json = %s, entry_count = %s, checksum = %s WHERE id = %s").format(
            t
        )
        self._cut = sql.SQL(
            "UPDATE {} SET entries_json = %s, entry_count = %s, meta_json = NULL, checksum = %s WHERE id = %s"
        ).format(t)
        self._delete_ids = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(t)
        self._clear = sql.SQL("DELETE FROM {} WHERE session_id = %s").format(t)
        self._list = sql.SQL(
            "SELECT session_id, COUNT(*), COALESCE(SUM(entry_count), 0), MIN(created_at), MAX(created_at), "
            "MAX(id) AS last_id FROM {} WHERE %(q)s::text IS NULL OR strpos(session_id, %(q)s::text) > 0 "
            "GROUP BY session_id ORDER BY last_id DESC LIMIT %(limit)s OFFSET %(offset)s"
        ).format(t)

    async def _refresh(self, session_id: str) -> HistoryState:
        base = self._cache.get(session_id)
        params = {
            "sid": session_id,
            "epoch": base.epoch if base is not None else -1,
            "version": base.version if base is not None else -1,
            "after": base.last_id if base is not None else 0,
        }
        async with self._db.connection("reading a session") as conn:
            cur = await conn.execute(self._refresh_sql, params)
            rows = await cur.fetchall()
            if not rows:  # never appended to (or its head row was removed by hand): read, do not cache
                cur = await conn.execute(self._select_all, (session_id,))
                segments = decode_history(session_id, await cur.fetchall())
                return HistoryCache(0).advance(session_id, None, segments, epoch=-1, version=-1)
        epoch, version = int(rows[0][0]), int(rows[0][1])
        if base is not None and base.epoch == epoch and base.version == version:
            return base
        new = decode_history(session_id, [row[2:] for row in rows if row[2] is not None])
        return self._cache.advance(
            session_id, base if base is not None and base.epoch == epoch else None, new, epoch=epoch, version=version
        )

    async def segments(self, session_id: str) -> list[Segment]:
        """All segments of the session, in run order."""
        return (await self._refresh(session_id)).segment_list()

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat concatenation of every segment's entries."""
        return (await self._refresh(session_id)).entry_list()

    async def _history(self, session_id: str) -> tuple[list[TranscriptEntry], dict[str, Any] | None]:
        # What a run start needs (see lovia.stores._history.history_of).
        state = await self._refresh(session_id)
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
        params = {
            "sid": session_id,
            "rid": rid,
            "entries": text,
            "count": len(stored),
            "meta": meta_json,
            "at": time.time(),
            "checksum": checksum(text, meta_json),
        }
        async with self._db.connection("appending to a session") as conn:
            cur = await conn.execute(self._insert, params)
            row = await cur.fetchone()
        if row is not None and row[2] is not None:
            prev_id = int(row[3]) if row[3] is not None else None
            version = int(row[1])
            self._cache.publish(
                session_id,
                self._cache.after_append(
                    session_id,
                    int(row[2]),
                    prev_id,
                    rid,
                    stored,
                    meta_json,
                    epoch=int(row[0]),
                    version=version,
                    previous=version - 1,
                ),
            )
        return rid

    async def clear(self, session_id: str) -> None:
        """Delete every segment of the session."""
        self._cache.drop(session_id)
        async with self._db.transaction("clearing a session") as conn:
            await conn.execute(self._lock_head, (session_id,))
            cur = await conn.execute(self._clear, (session_id,))
            if cur.rowcount:
                # The head row stays: its counters must never repeat a version a cache may hold.
                await conn.execute(self._bump_epoch, (session_id,))
        self._cache.drop(session_id)

    async def clear_in(self, conn: Any, session_id: str) -> None:
        """Delete every segment of the session inside the caller's transaction on ``conn`` (a connection
        to this store's database): the web app's chat index deletes a chat in one transaction with it."""
        await self._db.ready()
        self._cache.drop(session_id)
        await conn.execute(self._lock_head, (session_id,))
        cur = await conn.execute(self._clear, (session_id,))
        if cur.rowcount:
            await conn.execute(self._bump_epoch, (session_id,))

    async def trim_tool_results(self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1) -> int:
        """Truncate tool outputs older than the newest ``keep_runs`` runs; return how many were trimmed.

        Same semantics as :meth:`lovia.stores.SQLiteSession.trim_tool_results`; the session's rows
        are locked (``FOR UPDATE``) and rewritten in one transaction. Idempotent.

        Raises:
            ValueError: a negative argument.
        """
        check_non_negative(keep_chars=keep_chars, keep_runs=keep_runs)
        total = 0
        try:
            async with self._db.transaction("trimming a session") as conn:
                await conn.execute(self._lock_head, (session_id,))
                cur = await conn.execute(self._select_locked, (session_id,))
                rows = await cur.fetchall()
                for row_id, run_id, entries_json, meta_json, stored in rows[: max(len(rows) - keep_runs, 0)]:
                    decoded = decode_segment(session_id, row_id, run_id, entries_json, meta_json, stored)[1].entries
                    entries, count = trim_entries(decoded, keep_chars)
                    if count:
                        new_text = encode_entries(entries)
                        await conn.execute(
                            self._update, (new_text, len(entries), checksum(new_text, meta_json), row_id)
                        )
                        total += count
                if total:
                    await conn.execute(self._bump_epoch, (session_id,))
        finally:
            self._cache.drop(session_id)
        return total

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of ``load()``; return how many were removed.

        Same semantics as :meth:`lovia.stores.SQLiteSession.rewind`, atomic under concurrent
        writers (the session's rows are locked while the cut is planned and written).

        Raises:
            ValueError: a negative ``keep_entries``.
        """
        check_non_negative(keep_entries=keep_entries)
        try:
            async with self._db.transaction("rewinding a session") as conn:
                await conn.execute(self._lock_head, (session_id,))
                cur = await conn.execute(self._select_locked, (session_id,))
                rows = await cur.fetchall()
                decoded = [decode_segment(session_id, *r)[1].entries for r in rows]
                plan = plan_rewind(decoded, keep_entries)
                if plan is None:
                    return 0
                doomed = [r[0] for r in rows[plan.keep_segments :]]
                if plan.cut_entries:
                    cut_id = doomed.pop(0)
                    new_text = encode_entries(plan.cut_entries)
                    await conn.execute(self._cut, (new_text, len(plan.cut_entries), checksum(new_text), cut_id))
                if doomed:
                    await conn.execute(self._delete_ids, (doomed,))
                await conn.execute(self._bump_epoch, (session_id,))
        finally:
            self._cache.drop(session_id)
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
