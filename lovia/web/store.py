"""``ChatStore``: the web app's storage — a session, a checkpointer and a small chat index.

The chat index lives in two tables next to the stores' own tables (same SQLite file, WAL):

* ``chat_sessions(id, title, agent, created_at, updated_at, active_run_id, pinned)``: one row per
  chat; ``active_run_id`` names the run in flight (its checkpoint key) so a restarted server can
  resume it; pinned chats list first.
* ``chat_runs(run_id, session_id, status, usage_json, started_at, finished_at, owner)``: per-run
  usage and outcome, shown under each answer; ``owner`` is the serving process (``host:pid``).
* ``chat_ui_data(session_id, ref, payload, created_at)``: the full props of UI components kept
  out of the model's context by ``put_ui_data`` (JSON bytes), deleted with their chat.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import socket
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..checkpointer import Checkpointer
from ..exceptions import CorruptRecordError, StoreError
from ..session import Session

__all__ = ["ChatMeta", "ChatStore", "RunRecord", "UploadRecord"]

T = TypeVar("T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS chat_sessions (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        agent TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        active_run_id TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS chat_runs (
        run_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        status TEXT NOT NULL,
        usage_json TEXT,
        started_at REAL NOT NULL,
        finished_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS chat_runs_session ON chat_runs (session_id)",
)
# Columns added after the first release, each applied when an older index lacks it.
_ADDED_COLUMNS = {
    ("chat_sessions", "pinned"): "ALTER TABLE chat_sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
    ("chat_runs", "owner"): "ALTER TABLE chat_runs ADD COLUMN owner TEXT",
}
# Numbered migrations, each applied once in order; ``PRAGMA user_version`` records the last one applied.
# Append new ones at the end; never edit one that has shipped.
_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE IF NOT EXISTS chat_uploads (
                id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                name TEXT NOT NULL,
                mime_type TEXT NOT NULL,
                size INTEGER NOT NULL,
                path TEXT NOT NULL,
                created_at REAL NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS chat_uploads_session ON chat_uploads (session_id)",
            """CREATE TABLE IF NOT EXISTS chat_origins (
                session_id TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                origin_session_id TEXT NOT NULL,
                user_turn INTEGER,
                title TEXT NOT NULL DEFAULT ''
            )""",
        ),
    ),
    (
        2,
        (
            """CREATE TABLE IF NOT EXISTS chat_ui_data (
                session_id TEXT NOT NULL,
                ref TEXT NOT NULL,
                payload BLOB NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (session_id, ref)
            )""",
        ),
    ),
)


def new_ui_data_ref() -> str:
    """A fresh ref for a stored UI value (unguessable, URL-safe)."""
    return f"ud_{uuid.uuid4().hex}"


OWNER = f"{socket.gethostname()}:{os.getpid()}"
"""This server process (``host:pid``), recorded on the runs it starts so ``lovia runs ls`` can tell
a run whose server is gone (SIGKILL) from a live one."""

_META_COLUMNS = "id, title, agent, created_at, updated_at, active_run_id, pinned"


@dataclass(frozen=True, slots=True)
class ChatMeta:
    """One chat in the sidebar."""

    id: str
    title: str
    agent: str | None
    created_at: float
    updated_at: float
    active_run_id: str | None
    pinned: bool = False
    damaged: str | None = None
    """``None``, or why this chat's index row cannot be read and what to do (listed, not hidden)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        out = {
            "id": self.id,
            "title": self.title,
            "agent": self.agent,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "active_run_id": self.active_run_id,
            "pinned": self.pinned,
        }
        if self.damaged:
            out["damaged"] = self.damaged
        return out


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What the web app remembers about one run of a chat."""

    run_id: str
    session_id: str
    status: str
    usage: dict[str, int] | None
    started_at: float
    finished_at: float | None
    damaged: str | None = None
    """``None``, or why this record cannot be read and what to do (listed, not hidden)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        out = {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.status,
            "usage": self.usage,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }
        if self.damaged:
            out["damaged"] = self.damaged
        return out


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """A file uploaded into a chat, kept on disk next to the chat index until the chat is deleted."""

    id: str
    session_id: str
    name: str
    mime_type: str
    size: int
    path: str
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON the API returns (the disk path stays on the server)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "name": self.name,
            "mime_type": self.mime_type,
            "size": self.size,
            "created_at": self.created_at,
        }


_UPLOAD_COLUMNS = "id, session_id, name, mime_type, size, path, created_at"


class _MetaDB:
    """One sqlite3 connection guarded by a lock; every call runs in a worker thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout = 5000")
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
            for statement in _SCHEMA:
                self._conn.execute(statement)
            for (table, column), statement in _ADDED_COLUMNS.items():
                if not self._conn.execute(
                    "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", (table, column)
                ).fetchone():
                    self._conn.execute(statement)
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open chat index in {path}: {exc}", hint="check the --db path and its permissions"
            ) from exc

    def _migrate(self) -> None:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        for number, statements in _MIGRATIONS:
            if number > version:
                for statement in statements:
                    self._conn.execute(statement)
                self._conn.execute(f"PRAGMA user_version = {int(number)}")

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return fn(self._conn)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self.call, fn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _meta(row: tuple[Any, ...] | None) -> ChatMeta | None:
    if row is None:
        return None
    try:
        return ChatMeta(row[0], row[1] or "", row[2], float(row[3]), float(row[4]), row[5], bool(row[6]))
    except (TypeError, ValueError) as exc:  # one damaged row must not hide the other chats
        damaged = CorruptRecordError(
            f"the index row of chat {row[0]!r} cannot be read: {exc}",
            session_id=str(row[0]),
            hint="the row was damaged outside lovia; delete the chat or restore the database from a backup",
        )
        title = row[1] if isinstance(row[1], str) else ""
        return ChatMeta(str(row[0]), title, None, 0.0, 0.0, None, False, damaged=str(damaged))


_RUN_COLUMNS = "run_id, session_id, status, usage_json, started_at, finished_at"


def _record(row: tuple[Any, ...]) -> RunRecord:
    try:
        usage = json.loads(row[3]) if row[3] else None
        if usage is not None and not isinstance(usage, dict):
            raise ValueError("usage is not a JSON object")
        finished = float(row[5]) if row[5] is not None else None
        return RunRecord(row[0], row[1], row[2], usage, float(row[4]), finished)
    except (TypeError, ValueError) as exc:  # one damaged record must not hide the others
        damaged = CorruptRecordError(
            f"the record of run {row[0]!r} cannot be read: {exc}",
            session_id=str(row[1]),
            run_id=str(row[0]),
            hint="the row was damaged outside lovia; it only holds the run's usage and timing, so it is safe to ignore",
        )
        return RunRecord(str(row[0]), str(row[1]), str(row[2]), None, 0.0, None, damaged=str(damaged))


class ChatStore:
    """A session store, a checkpointer and the chat index, used together by the web app.

    Args:
        session: where finished runs are kept (``rewind`` optional: without it the page hides
            edit and regenerate).
        checkpointer: where the run in flight is kept.
        meta_path: the SQLite file of the chat index (``":memory:"`` for a throwaway one).
    """

    def __init__(
        self, *, session: Session, checkpointer: Checkpointer, meta_path: str | os.PathLike[str] = ":memory:"
    ) -> None:
        self.session = session
        self.checkpointer = checkpointer
        self._db = _MetaDB(os.fspath(meta_path))
        self._uploads_dir: Path | None = None

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str]) -> ChatStore:
        """Everything in one SQLite file in WAL mode (created with its folder when missing)."""
        from ..stores import SQLiteCheckpointer, SQLiteSession

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return cls(
            session=SQLiteSession(path, wal=True), checkpointer=SQLiteCheckpointer(path, wal=True), meta_path=path
        )

    @classmethod
    def in_memory(cls) -> ChatStore:
        """A store that forgets everything when the process ends (tests, demos)."""
        from ..stores import InMemoryCheckpointer, InMemorySession

        return cls(session=InMemorySession(), checkpointer=InMemoryCheckpointer())

    @property
    def supports_rewind(self) -> bool:
        """Whether the session store offers ``rewind`` (edit-and-resend and regenerate)."""
        return callable(getattr(self.session, "rewind", None))

    @property
    def path(self) -> str:
        """The chat index file."""
        return self._db.path

    # ------------------------------------------------------------------ chats

    async def create(self, *, title: str = "", agent: str | None = None, session_id: str | None = None) -> ChatMeta:
        """Add a chat (a fresh id unless ``session_id`` is given; an existing row is returned)."""
        sid = session_id or f"chat_{uuid.uuid4().hex[:16]}"
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
        sql = f"SELECT {_META_COLUMNS} FROM chat_sessions WHERE id = ?"
        return _meta(await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchone()))

    async def list(self, *, query: str | None = None, limit: int = 100, offset: int = 0) -> list[ChatMeta]:
        """Chats, pinned first, then most recently updated; ``query`` matches title or id (case-insensitive)."""
        pattern = f"%{query.lower()}%" if query else None
        sql = (
            f"SELECT {_META_COLUMNS} FROM chat_sessions WHERE ? IS NULL OR lower(title) LIKE ? OR lower(id) LIKE ? "
            "ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT ? OFFSET ?"
        )
        rows = await self._db.run(lambda c: c.execute(sql, (pattern, pattern, pattern, limit, offset)).fetchall())
        return [m for m in (_meta(r) for r in rows) if m is not None]

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

    async def set_active_run(self, session_id: str, run_id: str | None) -> None:
        """Remember (or forget, with ``None``) the run in flight of a chat."""
        await self._db.run(
            lambda c: c.execute("UPDATE chat_sessions SET active_run_id = ? WHERE id = ?", (run_id, session_id))
        )

    async def delete(self, session_id: str) -> None:
        """Forget a chat: its transcript, its runs' checkpoints and its index rows."""
        meta = await self.get(session_id)
        if meta is not None and meta.active_run_id:
            await self.checkpointer.delete(meta.active_run_id)
        for run_id in await self.runs(session_id):  # failed runs keep a checkpoint: it goes with the chat
            await self.checkpointer.delete(run_id)
        await self.session.clear(session_id)

        uploads = await self.uploads(session_id)

        def drop(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM chat_sessions WHERE id = ?", (session_id,))
            conn.execute("DELETE FROM chat_runs WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM chat_uploads WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM chat_origins WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM chat_ui_data WHERE session_id = ?", (session_id,))

        await self._db.run(drop)
        for upload in uploads:  # after the rows: a crash in between leaves orphan files, never dangling rows
            with contextlib.suppress(FileNotFoundError):
                os.unlink(upload.path)

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

    async def uploads(self, session_id: str) -> builtins.list[UploadRecord]:
        """The chat's uploads, oldest first."""
        sql = f"SELECT {_UPLOAD_COLUMNS} FROM chat_uploads WHERE session_id = ? ORDER BY created_at, id"
        rows = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchall())
        return [UploadRecord(r[0], r[1], r[2], r[3], int(r[4]), r[5], float(r[6])) for r in rows]

    # ------------------------------------------------------------------ UI data

    async def put_ui_data(self, session_id: str, payload: bytes) -> str:
        """Keep one UI component's full props (JSON bytes) with the chat; the ref to fetch them by."""
        ref = new_ui_data_ref()
        values = (session_id, ref, payload, time.time())
        sql = "INSERT INTO chat_ui_data (session_id, ref, payload, created_at) VALUES (?, ?, ?, ?)"
        await self._db.run(lambda c: c.execute(sql, values))
        return ref

    async def get_ui_data(self, session_id: str, ref: str) -> bytes | None:
        """The JSON bytes stored under ``ref`` in this chat, or ``None`` (never stored, or the chat is gone)."""
        sql = "SELECT payload FROM chat_ui_data WHERE session_id = ? AND ref = ?"
        row = await self._db.run(lambda c: c.execute(sql, (session_id, ref)).fetchone())
        return bytes(row[0]) if row is not None else None

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

    async def runs(self, session_id: str) -> dict[str, RunRecord]:
        """The chat's run records by run id."""
        sql = f"SELECT {_RUN_COLUMNS} FROM chat_runs WHERE session_id = ?"
        rows = await self._db.run(lambda c: c.execute(sql, (session_id,)).fetchall())
        return {record.run_id: record for record in map(_record, rows)}

    async def run_history(
        self, *, session_id: str | None = None, since: float | None = None, limit: int = 50, offset: int = 0
    ) -> builtins.list[RunRecord]:
        """Run records, newest first, optionally of one chat and/or started at or after ``since``."""
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM chat_runs "
            "WHERE (? IS NULL OR session_id = ?) AND (? IS NULL OR started_at >= ?) "
            "ORDER BY started_at DESC, run_id DESC LIMIT ? OFFSET ?"
        )
        params = (session_id, session_id, since, since, limit, offset)
        rows = await self._db.run(lambda c: c.execute(sql, params).fetchall())
        return [_record(r) for r in rows]

    async def close(self) -> None:
        """Close the chat index and the stores that can be closed."""
        self._db.close()
        for store in (self.session, self.checkpointer):
            close = getattr(store, "close", None)
            if callable(close):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
