"""``PostgresChatStore``: the web app's chat index, sessions and checkpoints in one PostgreSQL database.

Several ``lovia web`` processes pointed at the same database (and schema) share everything a
browser sees: the sidebar, the transcripts, the runs in flight. The index is the ``web`` component
of the PostgreSQL stores' migration scheme:

* ``web_chats``: one row per chat (as ``chat_sessions`` in SQLite);
* ``web_runs``: per-run status, usage, the ``owner`` replica and a takeover claim;
* ``web_frames``: every frame a live run streamed, so a client on another replica can follow it;
* ``web_commands``: stop / steer requests for a run owned by another replica;
* ``web_ui_data``: the full props ``put_ui_data`` kept out of the model's context.

The replica machinery that uses the last two lives in :mod:`lovia.web.replicas`.
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..stores.postgres._db import Database
from .store import OWNER, ChatMeta, ChatStore, RunRecord, UploadRecord, _meta, _record, new_ui_data_ref

__all__ = ["DEFAULT_LEASE_TTL", "PostgresChatStore", "is_postgres_url"]

DEFAULT_LEASE_TTL = 10.0
"""Seconds a replica's lease on a run lasts without renewal (``--lease-ttl``)."""

_META = "id, title, agent, created_at, updated_at, active_run_id, pinned"
_RUNS = "run_id, session_id, status, usage_json, started_at, finished_at"


def is_postgres_url(value: str | None) -> bool:
    """Whether ``--db`` names a PostgreSQL database rather than an SQLite file."""
    return bool(value) and str(value).startswith(("postgresql://", "postgres://"))


class PostgresChatStore(ChatStore):
    """A :class:`ChatStore` whose session, checkpointer and chat index all live in PostgreSQL.

    Args:
        dsn: ``postgresql://user@host/db``.
        schema: the PostgreSQL schema of every table (created if missing); default: the search path.
        lease_ttl: seconds a replica's lease on a live run lasts; a dead replica's runs are taken
            over by another one once it expires.
        max_size: connections per pool (the session, the checkpointer and the index each have one).
    """

    def __init__(
        self, dsn: str, *, schema: str | None = None, lease_ttl: float = DEFAULT_LEASE_TTL, max_size: int = 5
    ) -> None:
        from ..stores import PostgresCheckpointer, PostgresSession

        self.pg_session = PostgresSession(dsn, schema=schema, max_size=max_size)
        self.pg_checkpointer = PostgresCheckpointer(dsn, schema=schema, max_size=max_size)
        self.session = self.pg_session
        self.checkpointer = self.pg_checkpointer
        self.dsn = dsn
        self.schema = schema
        self.lease_ttl = float(lease_ttl)
        self.db = Database(
            dsn, pool=None, schema=schema, table_prefix="", min_size=1, max_size=max_size, component="web"
        )
        n = self.db.names
        tables = ("web_chats", "web_runs", "web_frames", "web_commands", "web_ui_data", "run_leases")
        self.tables = {t: n.regclass(t) for t in tables}  # validated identifiers, quoted
        self.channel = f"lovia_web_{schema or 'public'}"
        """The ``LISTEN/NOTIFY`` channel the replicas of this namespace share."""

    @property
    def path(self) -> str:
        """Where the index is (the password, if any, is not shown)."""
        ns = self.schema or "public"
        return f"{self.dsn.rsplit('@', 1)[-1]} (schema {ns})"

    async def fetch(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        """Rows of one query (``{web_chats}``-style names are filled in)."""
        async with self.db.connection("reading the chat index") as conn:
            cur = await conn.execute(sql.format(**self.tables), params)
            return list(await cur.fetchall()) if cur.description else []

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """Run one statement; the number of rows it touched."""
        async with self.db.connection("writing the chat index") as conn:
            cur = await conn.execute(sql.format(**self.tables), params)
            return int(cur.rowcount or 0)

    # ------------------------------------------------------------------ chats

    async def create(self, *, title: str = "", agent: str | None = None, session_id: str | None = None) -> ChatMeta:
        """Add a chat (a fresh id unless ``session_id`` is given; an existing row is returned)."""
        sid = session_id or f"chat_{uuid.uuid4().hex[:16]}"
        stamp = time.time()
        await self.execute(
            "INSERT INTO {web_chats} (id, title, agent, created_at, updated_at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (sid, title, agent, stamp, stamp),
        )
        meta = await self.get(sid)
        assert meta is not None
        return meta

    async def get(self, session_id: str) -> ChatMeta | None:
        """One chat, or ``None``."""
        rows = await self.fetch(f"SELECT {_META} FROM {{web_chats}} WHERE id = %s", (session_id,))
        return _meta(rows[0]) if rows else None

    async def list(self, *, query: str | None = None, limit: int = 100, offset: int = 0) -> builtins.list[ChatMeta]:
        """Chats, pinned first, then most recently updated; ``query`` matches title or id."""
        pattern = f"%{query.lower()}%" if query else None
        rows = await self.fetch(
            f"SELECT {_META} FROM {{web_chats}} WHERE %s::text IS NULL OR lower(title) LIKE %s OR lower(id) LIKE %s "
            "ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT %s OFFSET %s",
            (pattern, pattern, pattern, limit, offset),
        )
        return [m for m in (_meta(r) for r in rows) if m is not None]

    async def update(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None, touch: bool = True
    ) -> None:
        """Rename, pin or unpin, and/or bump ``updated_at``."""
        if title is not None:
            await self.execute("UPDATE {web_chats} SET title = %s WHERE id = %s", (title, session_id))
        if pinned is not None:
            await self.execute("UPDATE {web_chats} SET pinned = %s WHERE id = %s", (bool(pinned), session_id))
        if touch:
            await self.execute("UPDATE {web_chats} SET updated_at = %s WHERE id = %s", (time.time(), session_id))

    async def ids(self) -> builtins.list[str]:
        """Every chat id."""
        return [str(r[0]) for r in await self.fetch("SELECT id FROM {web_chats}")]

    async def set_active_run(self, session_id: str, run_id: str | None) -> None:
        """Remember (or forget, with ``None``) the run in flight of a chat."""
        await self.execute("UPDATE {web_chats} SET active_run_id = %s WHERE id = %s", (run_id, session_id))

    async def delete(self, session_id: str) -> None:
        """Forget a chat: its transcript, its runs' checkpoints, frames and index rows."""
        meta = await self.get(session_id)
        if meta is not None and meta.active_run_id:
            await self.checkpointer.delete(meta.active_run_id)
        for run_id in await self.runs(session_id):
            await self.checkpointer.delete(run_id)
        await self.session.clear(session_id)
        for table in ("web_frames", "web_commands", "web_ui_data", "web_runs"):
            await self.execute(f"DELETE FROM {{{table}}} WHERE session_id = %s", (session_id,))
        await self.execute("DELETE FROM {web_chats} WHERE id = %s", (session_id,))

    # ------------------------------------------------------------------ uploads and forks (not in PostgreSQL yet)

    @property
    def uploads_dir(self) -> Path:
        """Uploads are not kept for replicas yet: refused with the next step."""
        raise UserError(
            "file uploads are not supported with a PostgreSQL --db yet",
            hint="serve with an SQLite --db to attach files, or send the content as text",
        )

    async def add_upload(self, record: UploadRecord) -> None:
        """Refused: see :attr:`uploads_dir`."""
        _ = self.uploads_dir

    async def set_origin(
        self, session_id: str, *, kind: str, origin_session_id: str, user_turn: int | None, title: str
    ) -> None:
        """Forks are not recorded for replicas yet: refused with the next step."""
        raise UserError(
            "forking a chat is not supported with a PostgreSQL --db yet", hint="serve with an SQLite --db to fork"
        )

    async def origin(self, session_id: str) -> dict[str, Any] | None:
        """No chat on PostgreSQL comes from a fork (forks are refused)."""
        return None

    async def uploads(self, session_id: str) -> builtins.list[UploadRecord]:
        """No chat on PostgreSQL has uploads (uploads are refused)."""
        return []

    # ------------------------------------------------------------------ UI data

    async def put_ui_data(self, session_id: str, payload: bytes) -> str:
        """Keep one UI component's full props (JSON bytes) with the chat; the ref to fetch them by."""
        ref = new_ui_data_ref()
        await self.execute(
            "INSERT INTO {web_ui_data} (session_id, ref, payload, created_at) VALUES (%s, %s, %s, %s)",
            (session_id, ref, payload, time.time()),
        )
        return ref

    async def get_ui_data(self, session_id: str, ref: str) -> bytes | None:
        """The JSON bytes stored under ``ref`` in this chat, or ``None``."""
        rows = await self.fetch(
            "SELECT payload FROM {web_ui_data} WHERE session_id = %s AND ref = %s", (session_id, ref)
        )
        return bytes(rows[0][0]) if rows else None

    async def copy_ui_data(self, from_session_id: str, to_session_id: str) -> None:
        """Give a branched chat the UI data of the chat it came from."""
        await self.execute(
            "INSERT INTO {web_ui_data} (session_id, ref, payload, created_at) "
            "SELECT %s, ref, payload, created_at FROM {web_ui_data} WHERE session_id = %s ON CONFLICT DO NOTHING",
            (to_session_id, from_session_id),
        )

    # ------------------------------------------------------------------ runs

    async def record_run(
        self, run_id: str, session_id: str, *, status: str, usage: dict[str, int] | None = None, finished: bool = False
    ) -> None:
        """Insert or update a run's row (the owner becomes this process)."""
        stamp = time.time()
        usage_json = json.dumps(usage) if usage is not None else None
        await self.execute(
            "INSERT INTO {web_runs} (run_id, session_id, status, usage_json, started_at, finished_at, owner) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
            "owner = excluded.owner, usage_json = COALESCE(excluded.usage_json, {web_runs}.usage_json), "
            "finished_at = excluded.finished_at",
            (run_id, session_id, status, usage_json, stamp, stamp if finished else None, OWNER),
        )

    async def runs(self, session_id: str) -> dict[str, RunRecord]:
        """The chat's run records by run id."""
        rows = await self.fetch(f"SELECT {_RUNS} FROM {{web_runs}} WHERE session_id = %s", (session_id,))
        return {record.run_id: record for record in map(_record, rows)}

    async def run_history(
        self, *, session_id: str | None = None, since: float | None = None, limit: int = 50, offset: int = 0
    ) -> builtins.list[RunRecord]:
        """Run records, newest first, optionally of one chat and/or started at or after ``since``."""
        rows = await self.fetch(
            f"SELECT {_RUNS} FROM {{web_runs}} WHERE (%s::text IS NULL OR session_id = %s) "
            "AND (%s::float8 IS NULL OR started_at >= %s) ORDER BY started_at DESC, run_id DESC LIMIT %s OFFSET %s",
            (session_id, session_id, since, since, limit, offset),
        )
        return [_record(r) for r in rows]

    async def close(self) -> None:
        """Close the three connection pools."""
        await self.db.close()
        await self.pg_session.close()
        await self.pg_checkpointer.close()
