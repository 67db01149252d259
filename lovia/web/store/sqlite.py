"""``ChatStore``: the web app's storage — a session, a checkpointer and a small chat index.

The chat index lives in two tables next to the stores' own tables (same SQLite file, WAL):

* ``chat_sessions(id, title, agent, created_at, updated_at, active_run_id, pinned, active_context,
  origin_ref)``: one row per chat; ``active_run_id`` names the run in flight (its checkpoint key)
  so a restarted server can resume it, with ``active_context`` the client context it started with
  (JSON); ``origin_ref`` is the ``"<run_id>:<n>"`` ref of the user message a fork was cut before;
  pinned chats list first.
* ``chat_origins(session_id, kind, origin_session_id, user_turn, title)``: where a chat came from:
  ``fork`` (a branch), ``spawn`` (started by another chat's agent) or ``subagent`` (a task of its
  parent chat, deleted with it).
* ``chat_runs(run_id, session_id, status, usage_json, started_at, finished_at, owner)``: per-run
  usage and outcome, shown under each answer; ``owner`` is the serving process (``host:pid``).
* ``chat_ui_data(session_id, ref, payload, created_at)``: the full props of UI components kept
  out of the model's context by ``put_ui_data`` (JSON bytes; zlib-compressed in a file lovia
  0.9.119 wrote, read either way), deleted with their chat.

The tables are versioned as store ``"chat"`` in ``lovia_schema`` and migrated by the numbered
steps of :mod:`lovia.web.store.schema`, which also adopt lovia 0.9.119's chat file.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..._owners import OWNER
from ...checkpointer import Checkpointer
from ...exceptions import StoreError
from ...session import Session
from ..ids import check_chat_id, unlink_inside
from .base import ChatIndexBase
from .common import client_context, like_pattern, meta_or_none, new_ui_data_ref, ui_payload
from .delete import SharedStores, same_file, sqlite_delete_tree
from .records import SUBAGENT, ChatMeta, UploadRecord
from .runs import HISTORY_COLUMNS, RunRow, read_run
from .schedules import ScheduleStore
from .schema import migrate_chat_index

__all__ = ["ChatStore"]


T = TypeVar("T")


_META_COLUMNS = (
    "s.id, s.title, s.agent, s.created_at, s.updated_at, s.active_run_id, s.pinned, o.kind, o.origin_session_id, "
    "s.origin_ref"
)
"""What :meth:`ChatMeta.from_row` reads, from ``chat_sessions s LEFT JOIN chat_origins o``."""
_META_FROM = "chat_sessions s LEFT JOIN chat_origins o ON o.session_id = s.id"


_UPLOAD_COLUMNS = "id, session_id, name, mime_type, size, path, created_at"


class _MetaDB:
    """One sqlite3 connection guarded by a lock; every call runs in a worker thread."""

    def __init__(self, path: str, *, wal: bool = True) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout = 5000")
            if path != ":memory:" and wal:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
            migrate_chat_index(self._conn, path)
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open chat index in {path}: {exc}", hint="check the --db path and its permissions"
            ) from exc

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return fn(self._conn)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self.call, fn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class ChatStore(ChatIndexBase):
    """A session store, a checkpointer and the chat index, used together by the web app.

    Args:
        session: where finished runs are kept (``rewind`` optional: without it the page hides
            edit and regenerate).
        meta_path: the SQLite file of the chat index (``":memory:"`` for a throwaway one).
        checkpointer: where the run in flight is kept; default: the index file itself (an
            in-memory checkpointer with ``":memory:"``).
        wal: open the index file in WAL mode (the stores sharing the file then do not queue
            behind each other's writes).
    """

    def __init__(
        self,
        session: Session,
        *,
        meta_path: str | os.PathLike[str],
        checkpointer: Checkpointer | None = None,
        wal: bool = False,
    ) -> None:
        path = os.fspath(meta_path)
        if checkpointer is None:
            from ...stores import InMemoryCheckpointer, SQLiteCheckpointer

            checkpointer = InMemoryCheckpointer() if path == ":memory:" else SQLiteCheckpointer(path, wal=wal)
        self.session = session
        self.checkpointer = checkpointer
        self._db = _MetaDB(path, wal=wal)
        self._uploads_dir: Path | None = None

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str], *, wal: bool = True) -> ChatStore:
        """Everything in one SQLite file (created with its folder when missing), in WAL mode unless ``wal=False``."""
        from ...stores import SQLiteCheckpointer, SQLiteSession

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return cls(
            SQLiteSession(path, wal=wal), checkpointer=SQLiteCheckpointer(path, wal=wal), meta_path=path, wal=wal
        )

    @classmethod
    def in_memory(cls) -> ChatStore:
        """A store that forgets everything when the process ends (tests, demos)."""
        from ...stores import InMemoryCheckpointer, InMemorySession

        return cls(InMemorySession(), checkpointer=InMemoryCheckpointer(), meta_path=":memory:")

    @property
    def path(self) -> str:
        """The chat index file."""
        return self._db.path

    # ------------------------------------------------------------------ the base's hooks

    def _open_schedule_store(self) -> ScheduleStore:
        from .schedules import SQLiteScheduleStore

        return SQLiteScheduleStore(self.path)

    async def _runs_fetch(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        text = sql.format(runs="chat_runs")
        return await self._db.run(lambda c: c.execute(text, params).fetchall())

    async def _runs_execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        text = sql.format(runs="chat_runs")
        return int(await self._db.run(lambda c: c.execute(text, params).rowcount))

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
        """Add the chat if it is new, else set the ``agent`` and ``title`` given and bump ``updated_at``.

        ``parent_id`` records the chat as a subagent task of that chat (listed by
        :meth:`list_children`, deleted with it); ``spawned_from`` as started by that chat's agent
        (``origin_kind == "spawn"``). ``session_id`` must follow the chat id rule (else ``UserError``).
        """
        check_chat_id(session_id)
        stamp = time.time()

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO chat_sessions (id, title, agent, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at, "
                "agent = COALESCE(?, chat_sessions.agent), title = COALESCE(?, chat_sessions.title)",
                (session_id, title or "", agent, stamp, stamp, agent, title),
            )

        await self._db.run(write)
        await self._link(session_id, parent_id=parent_id, spawned_from=spawned_from)

    async def create(self, *, title: str = "", agent: str | None = None, session_id: str | None = None) -> ChatMeta:
        """Add a chat (a fresh id unless ``session_id`` is given; an existing row is returned as it is).

        Raises:
            UserError: ``session_id`` breaks the chat id rule (:func:`lovia.web.ids.check_chat_id`).
        """
        sid = check_chat_id(session_id) if session_id is not None else f"chat_{uuid.uuid4().hex[:16]}"
        stamp = time.time()

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO chat_sessions (id, title, agent, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (sid, title, agent, stamp, stamp),
            )

        await self._db.run(insert)
        meta = await self.get(sid)
        assert meta is not None
        return meta

    async def get(self, session_id: str) -> ChatMeta | None:
        """One chat, or ``None``."""
        sql = f"SELECT {_META_COLUMNS} FROM {_META_FROM} WHERE s.id = ?"
        return meta_or_none(await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchone()))

    async def list(self, *, limit: int = 200, offset: int = 0, query: str | None = None) -> builtins.list[ChatMeta]:
        """Chats, pinned first, then most recently updated; ``query`` as in :meth:`search`.

        Subagent task chats are left out: :meth:`list_children` lists a chat's tasks.
        """
        pattern = like_pattern(query) if query else None
        sql = (
            f"SELECT {_META_COLUMNS} FROM {_META_FROM} "
            "WHERE (o.kind IS NULL OR o.kind != ?) "
            "AND (? IS NULL OR lower(s.title) LIKE ? ESCAPE '\\' OR lower(s.id) LIKE ? ESCAPE '\\') "
            "ORDER BY s.pinned DESC, s.updated_at DESC, s.id DESC LIMIT ? OFFSET ?"
        )
        params = (SUBAGENT, pattern, pattern, pattern, limit, offset)
        rows = await self._db.run(lambda c: c.execute(sql, params).fetchall())
        return [m for m in (meta_or_none(r) for r in rows) if m is not None]

    async def set_title_if_unchanged(self, session_id: str, title: str, *, expected: str | None) -> None:
        """Rename a chat only while its title is still ``expected`` (``None``: still untitled).

        An automatic title computed in the background uses it, so a rename the user made in the
        meantime is kept.
        """
        sql = "UPDATE chat_sessions SET title = ? WHERE id = ? AND COALESCE(title, '') = ?"
        await self._db.run(lambda c: c.execute(sql, (title, session_id, expected or "")))

    async def update(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None, touch: bool = True
    ) -> None:
        """Rename, pin or unpin, and/or bump ``updated_at``."""
        stamp = time.time()

        def write(conn: sqlite3.Connection) -> None:
            if title is not None:
                conn.execute("UPDATE chat_sessions SET title = ? WHERE id = ?", (title, session_id))
            if pinned is not None:
                conn.execute("UPDATE chat_sessions SET pinned = ? WHERE id = ?", (int(pinned), session_id))
            if touch:
                conn.execute("UPDATE chat_sessions SET updated_at = ? WHERE id = ?", (stamp, session_id))

        await self._db.run(write)

    async def ids(self) -> builtins.list[str]:
        """Every chat id."""
        rows = await self._db.run(lambda c: c.execute("SELECT id FROM chat_sessions").fetchall())
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------------ the run in flight

    async def set_active_run_id(self, session_id: str, run_id: str, *, context: dict[str, Any] | None = None) -> None:
        """Remember the chat's run in flight and the client context it started with (for a resume)."""
        body = json.dumps(context) if context else None
        sql = "UPDATE chat_sessions SET active_run_id = ?, active_context = ? WHERE id = ?"
        await self._db.run(lambda c: c.execute(sql, (run_id, body, session_id)))

    async def get_active_context(self, session_id: str) -> dict[str, Any] | None:
        """The client context the chat's run in flight started with, or ``None``."""
        sql = "SELECT active_context FROM chat_sessions WHERE id = ?"
        row = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchone())
        return client_context(row[0] if row is not None else None)

    async def clear_active_run_id(self, session_id: str, *, expected: str | None = None) -> None:
        """Forget the chat's run in flight (only while it is still ``expected``, when given)."""
        sql = (
            "UPDATE chat_sessions SET active_run_id = NULL, active_context = NULL "
            "WHERE id = ? AND (? IS NULL OR active_run_id = ?)"
        )
        await self._db.run(lambda c: c.execute(sql, (session_id, expected, expected)))

    # ------------------------------------------------------------------ forks and tasks

    async def _set_origin_ref(self, session_id: str, ref: str | None) -> None:
        sql = "UPDATE chat_sessions SET origin_ref = ? WHERE id = ?"
        await self._db.run(lambda c: c.execute(sql, (ref, session_id)))

    async def list_children(self, parent_id: str) -> builtins.list[ChatMeta]:
        """The subagent tasks of a chat (``parent_id`` set), oldest first."""
        sql = (
            f"SELECT {_META_COLUMNS} FROM {_META_FROM} WHERE o.kind = ? AND o.origin_session_id = ? "
            "ORDER BY s.created_at, s.id"
        )
        rows = await self._db.run(lambda c: c.execute(sql, (SUBAGENT, parent_id)).fetchall())
        return [m for m in (meta_or_none(r) for r in rows) if m is not None]

    # ------------------------------------------------------------------ delete

    async def delete(self, session_id: str, *, schedules: bool = True) -> None:
        """Forget a chat and its subagent tasks at any depth (:meth:`task_tree`): their transcripts,
        their runs' checkpoints and records, uploads, UI data and index rows, all or nothing.

        With ``schedules`` (the default) the schedules bound to them go too (see
        :meth:`bind_schedules`). A chat it spawned with ``start_session`` stays.

        Everything kept in the index's own file (the session and checkpointer of :meth:`sqlite`, the
        schedule store opened beside the chats) is deleted in one transaction: on an error nothing
        is. A store kept elsewhere is cleared after that transaction commits, so a failure there
        leaves unreachable rows, never a listed chat with half its data gone.
        """
        shared = self._shared_stores(schedules)
        doomed = await self._db.run(lambda conn: sqlite_delete_tree(conn, session_id, shared))
        await self._after_delete(doomed, shared, schedules=schedules)
        for upload in doomed.uploads:  # after the rows: a crash in between leaves orphan files, never dangling rows
            unlink_inside(self.uploads_dir, upload)  # a file outside the uploads folder stays

    def _shared_stores(self, schedules: bool) -> SharedStores:
        """Which of the stores beside the index live in its SQLite file (deleted from in its transaction)."""
        from ...stores import SQLiteCheckpointer, SQLiteSession
        from .schedules import SQLiteScheduleStore

        def same(store: object, kind: type) -> bool:
            path = getattr(store, "path", None) if isinstance(store, kind) else None
            return path is not None and same_file(path, self.path)

        handle = self._schedule_handle
        return SharedStores(
            session=same(self.session, SQLiteSession),
            checkpointer=same(self.checkpointer, SQLiteCheckpointer),
            schedules=schedules and (handle is None and self.path != ":memory:" or same(handle, SQLiteScheduleStore)),
        )

    # ------------------------------------------------------------------ uploads

    @property
    def uploads_dir(self) -> Path:
        """Where uploaded files are kept: ``uploads/`` next to the chat index (a temp folder when in memory)."""
        if self._uploads_dir is None:
            if self._db.path == ":memory:":
                self._uploads_dir = Path(tempfile.mkdtemp(prefix="lovia-uploads-"))
            else:
                self._uploads_dir = Path(self._db.path).resolve().parent / "uploads"
        return self._uploads_dir

    async def add_upload(self, record: UploadRecord) -> None:
        """Index an upload whose file is already complete at ``record.path``."""
        values = (
            record.id,
            record.session_id,
            record.name,
            record.mime_type,
            record.size,
            record.path,
            record.created_at,
        )
        sql = f"INSERT INTO chat_uploads ({_UPLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
        await self._db.run(lambda c: c.execute(sql, values))

    async def set_origin(
        self, session_id: str, *, kind: str, origin_session_id: str, user_turn: int | None, title: str
    ) -> None:
        """Record where a chat came from (``kind="fork"``: branched off ``origin_session_id``)."""
        values = (session_id, kind, origin_session_id, user_turn, title)
        sql = "INSERT OR REPLACE INTO chat_origins VALUES (?, ?, ?, ?, ?)"
        await self._db.run(lambda c: c.execute(sql, values))

    async def origin(self, session_id: str) -> dict[str, Any] | None:
        """``{kind, session_id, user_turn, title, exists}`` of a chat that came from another, else ``None``."""
        sql = (
            "SELECT o.kind, o.origin_session_id, o.user_turn, o.title, s.id FROM chat_origins o "
            "LEFT JOIN chat_sessions s ON s.id = o.origin_session_id WHERE o.session_id = ?"
        )
        row = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchone())
        if row is None:
            return None
        return {
            "kind": row[0],
            "session_id": row[1],
            "user_turn": row[2],
            "title": row[3],
            "exists": row[4] is not None,
        }

    @property
    def supports_origins(self) -> bool:
        """Whether the store records where a chat came from (:meth:`set_origin`)."""
        return True

    async def children(self, session_id: str) -> builtins.list[tuple[ChatMeta, str]]:
        """The chats that came from this one by ``spawn`` or as a ``subagent`` task, oldest first, with the kind."""
        sql = (
            f"SELECT {_META_COLUMNS}, o.kind FROM chat_origins o JOIN chat_sessions s ON s.id = o.session_id "
            "WHERE o.origin_session_id = ? AND o.kind IN ('spawn', 'subagent') ORDER BY s.created_at, s.id"
        )
        rows = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchall())
        out = []
        for row in rows:
            meta = meta_or_none(tuple(row[:-1]))
            if meta is not None:
                out.append((meta, str(row[-1])))
        return out

    # ------------------------------------------------------------------ answer variants

    @property
    def supports_variants(self) -> bool:
        """Whether a regenerate can keep the answer it replaces (:meth:`add_variant`)."""
        return True

    async def add_variant(self, session_id: str, user_turn: int, entries: builtins.list[dict[str, Any]]) -> None:
        """Keep an answer a regenerate replaced: the entries that followed user message ``user_turn``."""
        body = json.dumps(entries, default=str)

        def insert(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM chat_variants WHERE session_id = ? AND user_turn = ?",
                (session_id, user_turn),
            ).fetchone()
            conn.execute(
                "INSERT INTO chat_variants VALUES (?, ?, ?, ?, ?)", (session_id, user_turn, row[0], body, time.time())
            )

        await self._db.run(insert)

    async def drop_variants(self, session_id: str, *, from_turn: int) -> None:
        """Forget the kept answers of user messages ``from_turn`` and later (a rewind removed them)."""
        sql = "DELETE FROM chat_variants WHERE session_id = ? AND user_turn >= ?"
        await self._db.run(lambda c: c.execute(sql, (session_id, from_turn)))

    async def variants(self, session_id: str) -> dict[int, builtins.list[dict[str, Any]]]:
        """Kept answers by user turn, oldest first: ``{turn: [{entries, created_at}, ...]}``."""
        sql = (
            "SELECT user_turn, entries_json, created_at FROM chat_variants WHERE session_id = ? ORDER BY user_turn, seq"
        )
        rows = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchall())
        out: dict[int, builtins.list[dict[str, Any]]] = {}
        for turn, body, created in rows:
            out.setdefault(int(turn), []).append({"entries": json.loads(body), "created_at": float(created)})
        return out

    async def uploads(self, session_id: str) -> builtins.list[UploadRecord]:
        """The chat's uploads, oldest first."""
        sql = f"SELECT {_UPLOAD_COLUMNS} FROM chat_uploads WHERE session_id = ? ORDER BY created_at, id"
        rows = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchall())
        return [UploadRecord(r[0], r[1], r[2], r[3], int(r[4]), r[5], float(r[6])) for r in rows]

    # ------------------------------------------------------------------ UI data

    async def put_ui_data(self, session_id: str, payload: bytes) -> str | None:
        """Keep one UI component's full props (JSON bytes) with the chat; the ref to fetch them by.

        ``None`` when there is no such chat (nothing is stored).
        """
        ref = new_ui_data_ref()
        values = (session_id, ref, payload, time.time(), session_id)
        sql = (
            "INSERT INTO chat_ui_data (session_id, ref, payload, created_at) "
            "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM chat_sessions WHERE id = ?)"
        )
        stored = await self._db.run(lambda c: c.execute(sql, values).rowcount)
        return ref if stored else None

    async def get_ui_data(self, session_id: str, ref: str) -> bytes | None:
        """The JSON bytes stored under ``ref`` in this chat, or ``None`` (never stored, or the chat is gone)."""
        sql = "SELECT payload FROM chat_ui_data WHERE session_id = ? AND ref = ?"
        row = await self._db.run(lambda c: c.execute(sql, (session_id, ref)).fetchone())
        return ui_payload(bytes(row[0])) if row is not None else None

    async def copy_ui_data(self, from_session_id: str, to_session_id: str) -> None:
        """Give a branched chat the UI data of the chat it came from (its envelopes name the same refs)."""
        sql = (
            "INSERT OR IGNORE INTO chat_ui_data (session_id, ref, payload, created_at) "
            "SELECT ?, ref, payload, created_at FROM chat_ui_data WHERE session_id = ?"
        )
        await self._db.run(lambda c: c.execute(sql, (to_session_id, from_session_id)))

    # ------------------------------------------------------------------ runs

    async def record_run(
        self, run_id: str, session_id: str, *, status: str, usage: dict[str, int] | None = None, finished: bool = False
    ) -> None:
        """Insert or update a run's row."""
        stamp = time.time()
        usage_json = json.dumps(usage) if usage is not None else None

        def upsert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO chat_runs (run_id, session_id, status, usage_json, started_at, finished_at, owner) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET status = excluded.status, owner = excluded.owner, "
                "usage_json = COALESCE(excluded.usage_json, chat_runs.usage_json), finished_at = excluded.finished_at",
                (run_id, session_id, status, usage_json, stamp, stamp if finished else None, OWNER),
            )

        await self._db.run(upsert)

    async def runs(self, session_id: str) -> dict[str, RunRow]:
        """The chat's run records by run id."""
        sql = f"SELECT {HISTORY_COLUMNS} FROM chat_runs WHERE session_id = ?"
        rows = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchall())
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
        sql = (
            f"SELECT {HISTORY_COLUMNS} FROM chat_runs "
            "WHERE (? IS NULL OR session_id = ?) AND (? IS NULL OR COALESCE(source, 'user') = ?) "
            "AND (? IS NULL OR finished_at >= ?) "
            "ORDER BY started_at DESC, run_id DESC LIMIT ? OFFSET ?"
        )
        params = (session_id, session_id, source, source, since, since, limit, offset)
        rows = await self._db.run(lambda c: c.execute(sql, params).fetchall())
        return [read_run(r) for r in rows]

    async def close(self) -> None:
        """Close the chat index, the schedule store and the stores that can be closed."""
        await self.close_schedule_store()
        self._db.close()
        for store in (self.session, self.checkpointer):
            close = getattr(store, "close", None)
            if callable(close):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
