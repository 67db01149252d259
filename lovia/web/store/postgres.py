"""``PostgresChatStore``: the web app's chat index, sessions and checkpoints in one PostgreSQL database.

Several ``lovia web`` processes pointed at the same database (and schema) share everything a
browser sees: the sidebar, the transcripts, the runs in flight. The index is the ``web``
component of the PostgreSQL stores' migration record; :mod:`lovia.web.store.pg_schema` lists its
tables and steps.

The replica machinery that uses ``web_frames`` and ``web_commands`` lives in :mod:`lovia.web.replicas`.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ..._owners import OWNER
from ...stores._dsn import is_postgres_url
from ...stores.postgres._db import Database
from ..ids import PathOutside, check_chat_id, path_inside
from .base import ChatIndexBase
from .common import client_context, like_pattern, meta_or_none, new_ui_data_ref
from .delete import Doomed, SharedStores
from .pg_schema import COMPONENT, WEB_MIGRATIONS
from .records import SUBAGENT, ChatMeta, UploadRecord
from .runs import HISTORY_COLUMNS, RunRow, read_run
from .schedules import ScheduleStore

__all__ = ["DEFAULT_LEASE_TTL", "PostgresChatStore", "is_postgres_url"]

DEFAULT_LEASE_TTL = 10.0
"""Seconds a replica's lease on a run lasts without renewal (``--lease-ttl``)."""

_META = "id, title, agent, created_at, updated_at, active_run_id, pinned"
_META_C = ", ".join(f"c.{c}" for c in _META.split(", "))
_CHAT_TABLES = ("web_frames", "web_commands", "web_ui_data", "web_origins", "web_variants", "web_uploads", "web_runs")
"""The index tables keyed by ``session_id`` (``web_chats`` is keyed by ``id``)."""


class PostgresChatStore(ChatIndexBase):
    """A chat store whose session, checkpointer and chat index all live in PostgreSQL.

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
        from ...stores import PostgresCheckpointer, PostgresSession

        self.pg_session = PostgresSession(dsn, schema=schema, max_size=max_size)
        self.pg_checkpointer = PostgresCheckpointer(dsn, schema=schema, max_size=max_size)
        self.session = self.pg_session
        self.checkpointer = self.pg_checkpointer
        self.dsn = dsn
        self.schema = schema
        self.lease_ttl = float(lease_ttl)
        self.db = Database(
            dsn,
            pool=None,
            schema=schema,
            table_prefix="",
            min_size=1,
            max_size=max_size,
            component=COMPONENT,
            migrations=WEB_MIGRATIONS,
        )
        n = self.db.names
        tables: tuple[str, ...] = ("web_chats", "web_runs", "web_frames", "web_commands", "web_ui_data", "run_leases")
        tables += ("web_origins", "web_variants", "web_uploads", "web_schedules", "web_schedule_claims")
        self.tables = {t: n.regclass(t) for t in tables}  # validated identifiers, quoted
        self._pg_uploads_dir: Path | None = None
        self.channel = f"lovia_web_{schema or 'public'}"
        """The ``LISTEN/NOTIFY`` channel the replicas of this namespace share."""
        self._uploads_dir = None

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

    # ------------------------------------------------------------------ the base's hooks

    def _open_schedule_store(self) -> ScheduleStore:
        from .schedules import PostgresScheduleStore

        return PostgresScheduleStore(self.dsn, schema=self.schema)

    async def _runs_fetch(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        return await self.fetch(_pg_sql(sql), params)

    async def _runs_execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        return await self.execute(_pg_sql(sql), params)

    # ------------------------------------------------------------------ chats

    _SELECT_META = (
        f"SELECT {_META_C}, o.kind, o.origin_session_id, c.origin_ref FROM {{web_chats}} c "
        "LEFT JOIN {web_origins} o ON o.session_id = c.id"
    )
    """What :meth:`ChatMeta.from_row` reads: a chat row with its origin."""

    # ------------------------------------------------------------------ chats

    async def upsert(
        self,
        session_id: str,
        *,
        agent: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        spawned_from: str | None = None,
    ) -> None:
        """Add the chat if it is new, else set the ``agent`` and ``title`` given and bump ``updated_at``."""
        check_chat_id(session_id)
        stamp = time.time()
        await self.execute(
            "INSERT INTO {web_chats} (id, title, agent, created_at, updated_at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, "
            "agent = COALESCE(%s, {web_chats}.agent), title = COALESCE(%s, {web_chats}.title)",
            (session_id, title or "", agent, stamp, stamp, agent, title),
        )
        await self._link(session_id, parent_id=parent_id, spawned_from=spawned_from)

    async def create(self, *, title: str = "", agent: str | None = None, session_id: str | None = None) -> ChatMeta:
        """Add a chat (a fresh id unless ``session_id`` is given; an existing row is returned)."""
        sid = check_chat_id(session_id) if session_id is not None else f"chat_{uuid.uuid4().hex[:16]}"
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
        rows = await self.fetch(f"{self._SELECT_META} WHERE c.id = %s", (session_id,))
        return meta_or_none(rows[0]) if rows else None

    async def list(self, *, limit: int = 200, offset: int = 0, query: str | None = None) -> builtins.list[ChatMeta]:
        """Chats, pinned first, then most recently updated; ``query`` matches title or id."""
        pattern = like_pattern(query) if query else None
        rows = await self.fetch(
            f"{self._SELECT_META} WHERE (o.kind IS NULL OR o.kind != %s) AND (%s::text IS NULL "
            "OR lower(c.title) LIKE %s ESCAPE '\\' OR lower(c.id) LIKE %s ESCAPE '\\') "
            "ORDER BY c.pinned DESC, c.updated_at DESC, c.id DESC LIMIT %s OFFSET %s",
            (SUBAGENT, pattern, pattern, pattern, limit, offset),
        )
        return [m for m in (meta_or_none(r) for r in rows) if m is not None]

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

    async def set_title_if_unchanged(self, session_id: str, title: str, *, expected: str | None) -> None:
        """Rename a chat only while its title is still ``expected`` (``None``: still untitled)."""
        await self.execute(
            "UPDATE {web_chats} SET title = %s WHERE id = %s AND COALESCE(title, '') = %s",
            (title, session_id, expected or ""),
        )

    async def ids(self) -> builtins.list[str]:
        """Every chat id."""
        return [str(r[0]) for r in await self.fetch("SELECT id FROM {web_chats}")]

    async def set_active_run_id(self, session_id: str, run_id: str, *, context: dict[str, Any] | None = None) -> None:
        """Remember the chat's run in flight and the client context it started with (for a resume)."""
        body = json.dumps(context) if context else None
        await self.execute(
            "UPDATE {web_chats} SET active_run_id = %s, active_context = %s WHERE id = %s", (run_id, body, session_id)
        )

    async def get_active_context(self, session_id: str) -> dict[str, Any] | None:
        """The client context the chat's run in flight started with, or ``None``."""
        rows = await self.fetch("SELECT active_context FROM {web_chats} WHERE id = %s", (session_id,))
        return client_context(rows[0][0] if rows else None)

    async def clear_active_run_id(self, session_id: str, *, expected: str | None = None) -> None:
        """Forget the chat's run in flight (only while it is still ``expected``, when given)."""
        await self.execute(
            "UPDATE {web_chats} SET active_run_id = NULL, active_context = NULL "
            "WHERE id = %s AND (%s::text IS NULL OR active_run_id = %s)",
            (session_id, expected, expected),
        )

    async def _set_origin_ref(self, session_id: str, ref: str | None) -> None:
        await self.execute("UPDATE {web_chats} SET origin_ref = %s WHERE id = %s", (ref, session_id))

    async def list_children(self, parent_id: str) -> builtins.list[ChatMeta]:
        """The subagent tasks of a chat, oldest first."""
        rows = await self.fetch(
            f"{self._SELECT_META} WHERE o.kind = %s AND o.origin_session_id = %s ORDER BY c.created_at, c.id",
            (SUBAGENT, parent_id),
        )
        return [m for m in (meta_or_none(r) for r in rows) if m is not None]

    async def delete(self, session_id: str, *, schedules: bool = True) -> None:
        """Forget a chat and its subagent tasks at any depth, all or nothing: one transaction removes
        their transcripts, checkpoints, run records, frames, uploads, UI data, index rows and (with
        ``schedules``) the schedules bound to them. A chat it spawned stays."""
        shared = self._shared_stores(schedules)
        async with self.db.transaction("deleting a chat") as conn:
            doomed = await self._delete_tree(conn, session_id, shared)
        await self._after_delete(doomed, shared, schedules=schedules)
        for chat_id in doomed.chats:
            self._drop_local_uploads(chat_id)

    def _shared_stores(self, schedules: bool) -> SharedStores:
        from .schedules import PostgresScheduleStore

        handle = self._schedule_handle
        same_schedules = handle is None or (
            isinstance(handle, PostgresScheduleStore)
            and handle.dsn == self.dsn
            and handle.names.schema == self.schema
            and handle.names.prefix == ""
        )
        return SharedStores(
            session=self.session is self.pg_session,
            checkpointer=self.checkpointer is self.pg_checkpointer,
            schedules=schedules and same_schedules,
        )

    async def _delete_tree(self, conn: Any, root: str, shared: SharedStores) -> Doomed:
        """The delete of :meth:`delete` on ``conn``, inside its transaction."""

        async def rows(sql: str, params: tuple[Any, ...]) -> builtins.list[tuple[Any, ...]]:
            cur = await conn.execute(sql.format(**self.tables), params)
            return list(await cur.fetchall()) if cur.description else []

        doomed = Doomed(chats=[root])
        frontier = [root]
        while frontier:
            found = await rows(
                "SELECT o.session_id FROM {web_origins} o JOIN {web_chats} c ON c.id = o.session_id "
                "WHERE o.kind = %s AND o.origin_session_id = ANY(%s) ORDER BY c.created_at, c.id",
                (SUBAGENT, frontier),
            )
            frontier = [str(r[0]) for r in found if str(r[0]) not in doomed.chats]
            doomed.chats += frontier
        found = await rows("SELECT to_regclass(%s)", (self.tables["web_schedules"],))
        has_schedules = found[0][0] is not None
        for chat_id in reversed(doomed.chats):  # the deepest tasks first
            runs = [str(r[0]) for r in await rows("SELECT run_id FROM {web_runs} WHERE session_id = %s", (chat_id,))]
            active = await rows("SELECT active_run_id FROM {web_chats} WHERE id = %s", (chat_id,))
            if active and active[0][0] and active[0][0] not in runs:
                runs.insert(0, str(active[0][0]))
            doomed.run_ids += runs
            if shared.checkpointer:
                for run_id in runs:
                    await self.pg_checkpointer.delete_in(conn, run_id)
            if shared.session:
                await self.pg_session.clear_in(conn, chat_id)
            if shared.schedules and has_schedules:
                await rows(
                    "DELETE FROM {web_schedule_claims} WHERE schedule_id IN "
                    "(SELECT id FROM {web_schedules} WHERE session_id = %s)",
                    (chat_id,),
                )
                await rows("DELETE FROM {web_schedules} WHERE session_id = %s", (chat_id,))
            for table in _CHAT_TABLES:
                await rows(f"DELETE FROM {{{table}}} WHERE session_id = %s", (chat_id,))
            await rows("DELETE FROM {web_chats} WHERE id = %s", (chat_id,))
        return doomed

    # ------------------------------------------------------------------ uploads (bytes in the database)

    @property
    def uploads_dir(self) -> Path:
        """This process's local copy of uploaded files (a temp folder): the database holds the bytes.

        The upload route writes a file here, :meth:`add_upload` stores its bytes in ``web_uploads``,
        and :meth:`uploads` writes back any file this replica has not seen yet, so a chat's files
        reach the model whichever replica runs it.
        """
        if self._pg_uploads_dir is None:
            self._pg_uploads_dir = Path(tempfile.mkdtemp(prefix="lovia-pg-uploads-"))
        return self._pg_uploads_dir

    async def add_upload(self, record: UploadRecord) -> None:
        """Store an upload whose file is complete at ``record.path``: its bytes and metadata in one row."""
        content = await asyncio.to_thread(Path(record.path).read_bytes)
        await self.execute(
            "INSERT INTO {web_uploads} (id, session_id, name, mime_type, size, content, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (record.id, record.session_id, record.name, record.mime_type, len(content), content, record.created_at),
        )

    async def uploads(self, session_id: str) -> builtins.list[UploadRecord]:
        """The chat's uploads, oldest first, each with a local file (fetched from the database when missing)."""
        rows = await self.fetch(
            "SELECT id, name, mime_type, size, created_at FROM {web_uploads} WHERE session_id = %s "
            "ORDER BY created_at, id",
            (session_id,),
        )
        out: builtins.list[UploadRecord] = []
        for upload_id, name, mime, size, created_at in rows:
            local = self._local_upload_path(session_id, str(upload_id), str(name))
            if not local.exists():
                await self._materialize(str(upload_id), local)
            out.append(UploadRecord(str(upload_id), session_id, name, mime, int(size), str(local), float(created_at)))
        return out

    def _local_upload_path(self, session_id: str, upload_id: str, name: str) -> Path:
        # The name only lends its suffix; a row from before the chat id rule cannot point outside.
        return path_inside(self.uploads_dir, session_id, f"{upload_id}{Path(name).suffix.lower()}")

    async def _materialize(self, upload_id: str, local: Path) -> None:
        rows = await self.fetch("SELECT content FROM {web_uploads} WHERE id = %s", (upload_id,))
        if not rows:
            return
        content = bytes(rows[0][0])

        def write() -> None:
            local.parent.mkdir(parents=True, exist_ok=True)
            partial = local.with_name(f".{local.name}.{uuid.uuid4().hex[:8]}.partial")
            partial.write_bytes(content)
            os.replace(partial, local)  # a reader never sees half a file

        await asyncio.to_thread(write)

    def _drop_local_uploads(self, session_id: str) -> None:
        if self._pg_uploads_dir is None:
            return
        try:
            folder = path_inside(self._pg_uploads_dir, session_id)
        except PathOutside:
            return  # an id from before the chat id rule: its files never left this folder's tree
        shutil.rmtree(folder, ignore_errors=True)

    # ------------------------------------------------------------------ origins (forks, spawned and subagent chats)

    async def set_origin(
        self, session_id: str, *, kind: str, origin_session_id: str, user_turn: int | None, title: str
    ) -> None:
        """Record where a chat came from (``kind="fork"``: branched off ``origin_session_id``)."""
        await self.execute(
            "INSERT INTO {web_origins} (session_id, kind, origin_session_id, user_turn, title) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET kind = excluded.kind, "
            "origin_session_id = excluded.origin_session_id, user_turn = excluded.user_turn, title = excluded.title",
            (session_id, kind, origin_session_id, user_turn, title),
        )

    async def origin(self, session_id: str) -> dict[str, Any] | None:
        """``{kind, session_id, user_turn, title, exists}`` of a chat that came from another, else ``None``."""
        rows = await self.fetch(
            "SELECT o.kind, o.origin_session_id, o.user_turn, o.title, c.id FROM {web_origins} o "
            "LEFT JOIN {web_chats} c ON c.id = o.origin_session_id WHERE o.session_id = %s",
            (session_id,),
        )
        if not rows:
            return None
        kind, origin_id, user_turn, title, found = rows[0]
        return {
            "kind": kind,
            "session_id": origin_id,
            "user_turn": None if user_turn is None else int(user_turn),
            "title": title,
            "exists": found is not None,
        }

    @property
    def supports_origins(self) -> bool:
        """Origins (forks, spawned chats, subagent tasks) are recorded in ``web_origins``."""
        return True

    async def children(self, session_id: str) -> builtins.list[tuple[ChatMeta, str]]:
        """The chats that came from this one by ``spawn`` or as a ``subagent`` task, oldest first, with the kind."""
        cols = ", ".join(f"c.{c.strip()}" for c in _META.split(","))
        rows = await self.fetch(
            f"SELECT {cols}, o.kind FROM {{web_origins}} o JOIN {{web_chats}} c ON c.id = o.session_id "
            "WHERE o.origin_session_id = %s AND o.kind IN ('spawn', 'subagent') ORDER BY c.created_at, c.id",
            (session_id,),
        )
        out = []
        for row in rows:
            meta = meta_or_none(tuple(row[:-1]))
            if meta is not None:
                out.append((meta, str(row[-1])))
        return out

    # ------------------------------------------------------------------ answer variants

    @property
    def supports_variants(self) -> bool:
        """A regenerate keeps the answer it replaces, in ``web_variants``."""
        return True

    async def variants(self, session_id: str) -> dict[int, builtins.list[dict[str, Any]]]:
        """Kept answers by user turn, oldest first: ``{turn: [{entries, created_at}, ...]}``."""
        rows = await self.fetch(
            "SELECT user_turn, entries_json, created_at FROM {web_variants} WHERE session_id = %s "
            "ORDER BY user_turn, seq",
            (session_id,),
        )
        out: dict[int, builtins.list[dict[str, Any]]] = {}
        for turn, body, created in rows:
            out.setdefault(int(turn), []).append({"entries": json.loads(body), "created_at": float(created)})
        return out

    async def add_variant(self, session_id: str, user_turn: int, entries: builtins.list[dict[str, Any]]) -> None:
        """Keep an answer a regenerate replaced: the entries that followed user message ``user_turn``."""
        await self.execute(
            "INSERT INTO {web_variants} (session_id, user_turn, entries_json, created_at) VALUES (%s, %s, %s, %s)",
            (session_id, user_turn, json.dumps(entries, default=str), time.time()),
        )

    async def drop_variants(self, session_id: str, *, from_turn: int) -> None:
        """Forget the kept answers of user messages ``from_turn`` and later (a rewind removed them)."""
        await self.execute(
            "DELETE FROM {web_variants} WHERE session_id = %s AND user_turn >= %s", (session_id, from_turn)
        )

    # ------------------------------------------------------------------ UI data

    async def put_ui_data(self, session_id: str, payload: bytes) -> str | None:
        """Keep one UI component's full props (JSON bytes) with the chat; the ref to fetch them by
        (``None`` when there is no such chat)."""
        ref = new_ui_data_ref()
        stored = await self.execute(
            "INSERT INTO {web_ui_data} (session_id, ref, payload, created_at) "
            "SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM {web_chats} WHERE id = %s)",
            (session_id, ref, payload, time.time(), session_id),
        )
        return ref if stored else None

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

    async def runs(self, session_id: str) -> dict[str, RunRow]:
        """The chat's run records by run id."""
        rows = await self.fetch(f"SELECT {HISTORY_COLUMNS} FROM {{web_runs}} WHERE session_id = %s", (session_id,))
        return {record.run_id: record for record in map(read_run, rows)}

    async def run_history(
        self,
        *,
        session_id: str | None = None,
        source: str | None = None,
        since: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[RunRow]:
        """Run records, newest first: of one chat, of one ``source``, and/or finished at or after ``since``."""
        rows = await self.fetch(
            f"SELECT {HISTORY_COLUMNS} FROM {{web_runs}} WHERE (%s::text IS NULL OR session_id = %s) "
            "AND (%s::text IS NULL OR COALESCE(source, 'user') = %s) "
            "AND (%s::float8 IS NULL OR finished_at >= %s) ORDER BY started_at DESC, run_id DESC LIMIT %s OFFSET %s",
            (session_id, session_id, source, source, since, since, limit, offset),
        )
        return [read_run(r) for r in rows]

    async def close(self) -> None:
        """Close the three connection pools and the schedule store; drop the local copies of uploads."""
        await self.close_schedule_store()
        if self._pg_uploads_dir is not None:
            shutil.rmtree(self._pg_uploads_dir, ignore_errors=True)
        await self.db.close()
        await self.pg_session.close()
        await self.pg_checkpointer.close()


def _pg_sql(sql: str) -> str:
    """``?`` placeholders and ``{runs}`` in this store's spelling (``%s``, ``{web_runs}``)."""
    return sql.replace("?", "%s").replace("{runs}", "{web_runs}")
