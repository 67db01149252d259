"""The web chat index's SQLite schema: numbered steps of store ``"chat"`` in ``lovia_schema``.

Applied by :func:`migrate_chat_index` through the stores' shared
:func:`~lovia.stores.sqlite._schema.ensure_schema`: every pending step and its version record
commit in one transaction, so a failure or a crash leaves the file as it was.

Three kinds of file arrive here:

* a new file: dated 3 (below), so steps 4 onwards create the tables;
* a chat index our earlier releases wrote before it had a row in ``lovia_schema``: the steps'
  ``legacy_version`` (:func:`_date_earlier_file`) dates it by the layout it has, and only the
  steps after that run, so the file is adopted in place;
* lovia 0.9.119's chat file, which records ``('chat', 2)``: its layout differs from ours (runs
  keyed by ``id``, origins and the parent chat as columns of ``chat_sessions``, UI data blobs
  zlib-compressed, schedules in ``chat_schedules``). Versions 1 and 2 are the numbers 0.9.119
  gave its own layout; they do nothing here. Step 3 converts that layout to ours (and moves
  its schedules to the schedule store's ``web_schedules``); no other file reaches it.

Our latest version is above 2, so 0.9.119 refuses a file we migrated with its own "upgrade
lovia" error instead of misreading it. Append new steps at the end; never edit a released one.
"""

from __future__ import annotations

import sqlite3

from ...stores.sqlite._schema import Migration, Steps, ensure_schema
from .schedules import SCHEDULE_MIGRATIONS as _SCHEDULE_STEPS

__all__ = ["CHAT_MIGRATIONS", "STORE", "migrate_chat_index"]

STORE = "chat"

# The schedule store's steps as they were when step 3 was released (it records this version).
_SCHEDULE_VERSION_AT_ADOPTION = 3

_SESSIONS = """CREATE TABLE IF NOT EXISTS chat_sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    agent TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    active_run_id TEXT
)"""
_RUNS = """CREATE TABLE IF NOT EXISTS chat_runs (
    run_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    usage_json TEXT,
    started_at REAL NOT NULL,
    finished_at REAL
)"""
# The same two tables with every column steps 5 to 14 add (what step 3 builds).
_SESSIONS_AT_14 = """CREATE TABLE chat_sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    agent TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    active_run_id TEXT,
    pinned INTEGER NOT NULL DEFAULT 0,
    active_context TEXT,
    origin_ref TEXT
)"""
_RUNS_AT_14 = """CREATE TABLE chat_runs (
    run_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    usage_json TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    owner TEXT,
    agent TEXT,
    source TEXT,
    error TEXT
)"""
_RUNS_INDEX = "CREATE INDEX IF NOT EXISTS chat_runs_session ON chat_runs (session_id)"
_UPLOADS = (
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
)
_ORIGINS = """CREATE TABLE IF NOT EXISTS chat_origins (
    session_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    origin_session_id TEXT NOT NULL,
    user_turn INTEGER,
    title TEXT NOT NULL DEFAULT ''
)"""
_UI_DATA = """CREATE TABLE IF NOT EXISTS chat_ui_data (
    session_id TEXT NOT NULL,
    ref TEXT NOT NULL,
    payload BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, ref)
)"""
_VARIANTS = """CREATE TABLE IF NOT EXISTS chat_variants (
    session_id TEXT NOT NULL,
    user_turn INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    entries_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, user_turn, seq)
)"""


def _add_column(version: int, name: str, table: str, column: str, kind: str) -> Migration:
    """A step adding one column."""
    return Migration(version, name, (f"ALTER TABLE {table} ADD COLUMN {column} {kind}",))


_LAYOUT: tuple[tuple[int, str, str | None], ...] = (
    (4, "chat_sessions", None),
    (4, "chat_runs", None),
    (5, "chat_sessions", "pinned"),
    (6, "chat_runs", "owner"),
    (7, "chat_runs", "agent"),
    (8, "chat_runs", "source"),
    (9, "chat_runs", "error"),
    (10, "chat_uploads", None),
    (11, "chat_ui_data", None),
    (12, "chat_variants", None),
    (13, "chat_sessions", "active_context"),
    (14, "chat_sessions", "origin_ref"),
)
"""What each of steps 4 to 14 leaves in a file: tables, or a column of a table."""


def _date_earlier_file(conn: sqlite3.Connection) -> int:
    """The version of a chat index our releases wrote before its row in ``lovia_schema``: the last
    of steps 4 to 14 whose layout the file has, counting in order (3 for a file without one).

    The layout decides, not the file's own numbering: the columns of steps 7 to 9 came after the
    tables of steps 10 to 12 had been numbered, so an early file can have those tables without
    these columns. The steps after the date create their tables ``IF NOT EXISTS``.
    """
    for step, table, column in _LAYOUT:
        found = conn.execute(
            "SELECT 1 FROM pragma_table_info(?) WHERE ? IS NULL OR name = ?", (table, column, column)
        ).fetchone()
        if found is None:
            return step - 1  # 3 at the least: nothing of 0.9.119's to convert (that file records its version)
    return _LAYOUT[-1][0]


def _adopt_0_9_119() -> tuple[str, ...]:
    """0.9.119's layout (version 2) to ours as of step 14, data kept; the schedules move to ``web_schedules``."""
    schedule_steps = [m for m in _SCHEDULE_STEPS if m.version <= _SCHEDULE_VERSION_AT_ADOPTION]
    return (
        "ALTER TABLE chat_sessions RENAME TO chat_sessions_0_9_119",
        _SESSIONS_AT_14,
        """INSERT INTO chat_sessions
               (id, title, agent, created_at, updated_at, active_run_id, pinned, active_context, origin_ref)
           SELECT id, COALESCE(title, ''), agent, created_at, updated_at, active_run_id, COALESCE(pinned, 0),
                  active_context_json, CASE WHEN origin_kind = 'fork' THEN origin_ref END
           FROM chat_sessions_0_9_119""",
        _ORIGINS,
        # A task chat's parent (deleted with it), else where it came from: a fork or a spawn.
        """INSERT INTO chat_origins (session_id, kind, origin_session_id, user_turn, title)
           SELECT c.id, 'subagent', c.parent_id, NULL, COALESCE(p.title, '')
           FROM chat_sessions_0_9_119 c LEFT JOIN chat_sessions_0_9_119 p ON p.id = c.parent_id
           WHERE c.parent_id IS NOT NULL""",
        """INSERT OR IGNORE INTO chat_origins (session_id, kind, origin_session_id, user_turn, title)
           SELECT c.id, c.origin_kind, c.origin_session_id, NULL, COALESCE(p.title, '')
           FROM chat_sessions_0_9_119 c LEFT JOIN chat_sessions_0_9_119 p ON p.id = c.origin_session_id
           WHERE c.origin_kind IS NOT NULL AND c.origin_session_id IS NOT NULL""",
        "DROP TABLE chat_sessions_0_9_119",
        "ALTER TABLE chat_runs RENAME TO chat_runs_0_9_119",
        _RUNS_AT_14,
        """INSERT INTO chat_runs
               (run_id, session_id, status, usage_json, started_at, finished_at, owner, agent, source, error)
           SELECT id, COALESCE(session_id, ''), status, usage_json, started_at, finished_at, NULL, agent, source, error
           FROM chat_runs_0_9_119""",
        "DROP TABLE chat_runs_0_9_119",
        _RUNS_INDEX,
        # Blobs keep 0.9.119's zlib compression: the store reads compressed and plain payloads.
        "ALTER TABLE chat_ui_data RENAME TO chat_ui_data_0_9_119",
        _UI_DATA,
        """INSERT INTO chat_ui_data (session_id, ref, payload, created_at)
           SELECT session_id, id, payload, created_at FROM chat_ui_data_0_9_119""",
        "DROP TABLE chat_ui_data_0_9_119",
        *(statement for step in schedule_steps for statement in step.statements),
        """INSERT INTO web_schedules
               (id, session_id, agent, input, trigger_kind, trigger_expr, next_fire, active, fire_count, max_fires,
                expires_at, finished_reason, last_session_id, created_at, updated_at, client_context, until)
           SELECT id, session_id, agent, input, trigger_kind, trigger_expr, next_fire, active, fire_count, max_fires,
                  expires_at, finished_reason, last_session_id, created_at, updated_at, context_json, until
           FROM chat_schedules""",
        "DROP TABLE chat_schedules",
        # The schedule store then finds its tables current and runs no step of its own.
        f"""INSERT INTO lovia_schema (store, version, migration, applied_at)
           VALUES ('schedule', {_SCHEDULE_VERSION_AT_ADOPTION}, '{schedule_steps[-1].name}',
                   (julianday('now') - 2440587.5) * 86400.0)""",
    )


CHAT_MIGRATIONS = Steps(
    (
        # 1 and 2: the versions lovia 0.9.119 recorded for its own layout; nothing to do here.
        Migration(1, "chat_layout_0_9_119_v1", ()),
        Migration(2, "chat_layout_0_9_119_v2", ()),
        # Runs for 0.9.119's file only (it records version 2; ours are dated past 3). It builds
        # the columns steps 5 to 9, 13 and 14 add: they are then recorded without running.
        Migration(3, "adopt_0_9_119_chat_file", _adopt_0_9_119(), covers=(5, 6, 7, 8, 9, 13, 14)),
        Migration(4, "create_chat_index", (_SESSIONS, _RUNS, _RUNS_INDEX)),
        _add_column(5, "add_chat_pinned", "chat_sessions", "pinned", "INTEGER NOT NULL DEFAULT 0"),
        _add_column(6, "add_run_owner", "chat_runs", "owner", "TEXT"),
        _add_column(7, "add_run_agent", "chat_runs", "agent", "TEXT"),
        _add_column(8, "add_run_source", "chat_runs", "source", "TEXT"),
        _add_column(9, "add_run_error", "chat_runs", "error", "TEXT"),
        Migration(10, "create_uploads_and_origins", (*_UPLOADS, _ORIGINS)),
        Migration(11, "create_ui_data", (_UI_DATA,)),
        Migration(12, "create_answer_variants", (_VARIANTS,)),
        _add_column(13, "add_active_context", "chat_sessions", "active_context", "TEXT"),
        _add_column(14, "add_fork_origin_ref", "chat_sessions", "origin_ref", "TEXT"),
    ),
    legacy_version=_date_earlier_file,
)


def migrate_chat_index(conn: sqlite3.Connection, path: str) -> None:
    """Bring the chat index in ``conn`` to the latest version in one transaction (or refuse a newer file)."""
    ensure_schema(conn, STORE, path=path, migrations=CHAT_MIGRATIONS)
