"""The web app's chat index on PostgreSQL: the ``web`` component's steps in the stores' ``lovia_schema`` record.

:class:`~lovia.web.store.postgres.PostgresChatStore` passes these steps to the PostgreSQL stores'
:func:`~lovia.stores.postgres._schema.ensure_schema` through its connection code, which applies the
pending ones with their record in one transaction under the namespace's advisory lock. Version 1
creates the tables ``IF NOT EXISTS``, so a database whose tables an earlier release made is
adopted as it is. Never edit a released step; append a new one.

The tables:

* ``web_chats``: one row per chat (as ``chat_sessions`` in SQLite, with the run in flight's
  ``active_context`` and a fork's ``origin_ref``);
* ``web_runs``: per-run status, usage, the ``owner`` replica and a takeover claim;
* ``web_frames``: every frame a live run streamed, so a client on another replica can follow it;
* ``web_commands``: stop / steer requests for a run owned by another replica;
* ``web_ui_data``: the full props ``put_ui_data`` kept out of the model's context;
* ``web_origins``: where a chat came from (a fork, a ``start_session`` chat, a subagent task);
* ``web_variants``: the earlier answers a regenerate kept (as ``chat_variants`` in SQLite);
* ``web_uploads``: the files uploaded into a chat, bytes included, so any replica can send them.
"""

from __future__ import annotations

from ...stores.postgres._schema import Migration

__all__ = ["COMPONENT", "WEB_INDEXES", "WEB_MIGRATIONS", "WEB_TABLES"]

COMPONENT = "web"
"""The chat index's name in ``lovia_schema``."""

WEB_TABLES = (
    "web_chats",
    "web_runs",
    "web_frames",
    "web_commands",
    "web_ui_data",
    "web_origins",
    "web_variants",
    "web_uploads",
)
WEB_INDEXES = (
    "web_runs_session",
    "web_frames_run",
    "web_origins_origin",
    "web_variants_session",
    "web_uploads_session",
)


def _step(version: int, name: str, statements: tuple[str, ...]) -> Migration:
    return Migration(version, name, statements, indexes=WEB_INDEXES)


WEB_MIGRATIONS: tuple[Migration, ...] = (
    _step(
        1,
        "create_web_tables",
        (
            """CREATE TABLE IF NOT EXISTS {web_chats} (
                id TEXT PRIMARY KEY,
                title TEXT NOT NULL DEFAULT '',
                agent TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                active_run_id TEXT,
                pinned BOOLEAN NOT NULL DEFAULT FALSE
            )""",
            """CREATE TABLE IF NOT EXISTS {web_runs} (
                run_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                status TEXT NOT NULL,
                usage_json TEXT,
                started_at DOUBLE PRECISION NOT NULL,
                finished_at DOUBLE PRECISION,
                owner TEXT,
                claimed_until DOUBLE PRECISION
            )""",
            "CREATE INDEX IF NOT EXISTS {web_runs_session} ON {web_runs} (session_id)",
            """CREATE TABLE IF NOT EXISTS {web_frames} (
                seq BIGSERIAL PRIMARY KEY,
                session_id TEXT NOT NULL,
                run_id TEXT NOT NULL,
                event TEXT NOT NULL,
                data_json TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS {web_frames_run} ON {web_frames} (run_id, seq)",
            """CREATE TABLE IF NOT EXISTS {web_commands} (
                id BIGSERIAL PRIMARY KEY,
                session_id TEXT NOT NULL,
                run_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                payload_json TEXT NOT NULL,
                done BOOLEAN NOT NULL DEFAULT FALSE
            )""",
        ),
    ),
    # Bulk UI data (lovia.web.components.put_ui_data): JSON bytes per chat, deleted with it.
    _step(
        2,
        "create_web_ui_data",
        (
            """CREATE TABLE IF NOT EXISTS {web_ui_data} (
                session_id TEXT NOT NULL,
                ref TEXT NOT NULL,
                payload BYTEA NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (session_id, ref)
            )""",
        ),
    ),
    # Links between chats (forks, spawned and subagent chats) and the answers a regenerate kept.
    _step(
        3,
        "create_web_links",
        (
            """CREATE TABLE IF NOT EXISTS {web_origins} (
                session_id TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                origin_session_id TEXT NOT NULL,
                user_turn INTEGER,
                title TEXT NOT NULL DEFAULT ''
            )""",
            "CREATE INDEX IF NOT EXISTS {web_origins_origin} ON {web_origins} (origin_session_id)",
            """CREATE TABLE IF NOT EXISTS {web_variants} (
                seq BIGSERIAL PRIMARY KEY,
                session_id TEXT NOT NULL,
                user_turn INTEGER NOT NULL,
                entries_json TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS {web_variants_session} ON {web_variants} (session_id, user_turn, seq)",
        ),
    ),
    # The client context of the run in flight (a resume gets it back) and a fork's cut point.
    _step(
        4,
        "add_web_chat_context_and_origin_ref",
        (
            "ALTER TABLE {web_chats} ADD COLUMN active_context TEXT",
            "ALTER TABLE {web_chats} ADD COLUMN origin_ref TEXT",
        ),
    ),
    # Run records name their agent, why they started and how they failed (lovia.web.store).
    _step(
        5,
        "add_web_run_details",
        (
            "ALTER TABLE {web_runs} ADD COLUMN IF NOT EXISTS agent TEXT",
            "ALTER TABLE {web_runs} ADD COLUMN IF NOT EXISTS source TEXT",
            "ALTER TABLE {web_runs} ADD COLUMN IF NOT EXISTS error TEXT",
        ),
    ),
    # Files uploaded into a chat: the bytes live in the database, so every replica can read them.
    _step(
        6,
        "create_web_uploads",
        (
            """CREATE TABLE IF NOT EXISTS {web_uploads} (
                id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                name TEXT NOT NULL,
                mime_type TEXT NOT NULL,
                size BIGINT NOT NULL,
                content BYTEA NOT NULL,
                created_at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS {web_uploads_session} ON {web_uploads} (session_id, created_at)",
        ),
    ),
)
