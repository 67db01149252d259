"""Internal: the PostgreSQL schema of each store component and its ordered, named migrations.

Same discipline as the SQLite stores: ``lovia_schema(component, version, migration, applied_at)``
records, per component, the last migration applied in this namespace (schema + table prefix).
Each migration and the update of its record commit in one transaction, which first takes a
transaction-scoped advisory lock, so many workers opening a new database at once migrate it
exactly once. A namespace migrated past what this lovia knows is refused with
:class:`~lovia.exceptions.SchemaTooNewError`.

Statements are templates: ``{name}`` is replaced by the quoted, validated identifier of table
``name`` (``{name_idx}`` style keys by an unqualified index name). Never edit a released
migration; append a new one.

Layout, version 1 of each component:

* ``session_runs(id BIGSERIAL, session_id, run_id, entries_json TEXT, entry_count, meta_json TEXT,
  created_at, UNIQUE(session_id, run_id))`` + index ``(session_id, id)``; run order is ``id``.
* ``snapshot_heads(run_id PK, head_json TEXT, status, batches, entry_count, updated_at)`` and
  ``snapshot_turns(run_id, seq, entries_json TEXT, entry_count, PK(run_id, seq))``.
* ``run_leases(run_id PK, owner, token, expires_at)``, times in database-clock epoch seconds.

Session version 2 adds ``session_runs.checksum`` (CRC-32 of entries + meta text) and
``session_heads(session_id PK, version, epoch)``; checkpoint version 2 adds
``snapshot_turns.checksum`` (CRC-32 of the batch text). Version 3 of both changes no layout: it
records that entries may be stored in their compact row form (``lovia.transcript``).

Entries are ``TEXT`` holding the shared codec's JSON, not ``JSONB``: the store never queries
inside them, ``TEXT`` keeps the bytes exactly as encoded (``JSONB`` rejects ``\\u0000`` and
reorders keys) and is cheaper to write (``bench/pg_checkpoint.py --jsonb`` measures both).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...exceptions import SchemaTooNewError
from .._codec import checksum
from ._names import Names

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "Migration", "ensure_schema", "latest_version", "read_version"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``statements`` (templates) run in order inside one transaction with the record."""

    version: int
    name: str
    statements: tuple[str, ...]
    # Runs after the statements, in the same transaction: work SQL alone cannot do here.
    backfill: Callable[[AsyncConnection[Any], Names], Awaitable[None]] | None = None


async def _checksum_segments(conn: AsyncConnection[Any], names: Names) -> None:
    from psycopg import sql

    t = names.table("session_runs")
    cur = await conn.execute(sql.SQL("SELECT id, entries_json, meta_json FROM {}").format(t))
    rows = [(checksum(text, meta), row_id) for row_id, text, meta in await cur.fetchall()]
    if rows:
        async with conn.cursor() as update:
            await update.executemany(sql.SQL("UPDATE {} SET checksum = %s WHERE id = %s").format(t), rows)


async def _checksum_batches(conn: AsyncConnection[Any], names: Names) -> None:
    from psycopg import sql

    t = names.table("snapshot_turns")
    cur = await conn.execute(sql.SQL("SELECT run_id, seq, entries_json FROM {}").format(t))
    rows = [(checksum(text), run_id, seq) for run_id, seq, text in await cur.fetchall()]
    if rows:
        async with conn.cursor() as update:
            await update.executemany(
                sql.SQL("UPDATE {} SET checksum = %s WHERE run_id = %s AND seq = %s").format(t), rows
            )


MIGRATIONS: dict[str, tuple[Migration, ...]] = {
    "session": (
        Migration(
            1,
            "create_session_runs",
            (
                """CREATE TABLE IF NOT EXISTS {session_runs} (
                    id BIGSERIAL PRIMARY KEY,
                    session_id TEXT NOT NULL,
                    run_id TEXT NOT NULL,
                    entries_json TEXT NOT NULL,
                    entry_count INTEGER NOT NULL,
                    meta_json TEXT,
                    created_at DOUBLE PRECISION NOT NULL,
                    UNIQUE (session_id, run_id)
                )""",
                "CREATE INDEX IF NOT EXISTS {session_runs_session_id} ON {session_runs} (session_id, id)",
            ),
        ),
        # As SQLite's session v2: a checksum per segment and the change counters of the
        # incremental history cache, which appends also use as the session's row lock.
        Migration(
            2,
            "checksums_and_session_heads",
            (
                "ALTER TABLE {session_runs} ADD COLUMN checksum BIGINT",
                """CREATE TABLE {session_heads} (
                    session_id TEXT PRIMARY KEY,
                    version BIGINT NOT NULL,
                    epoch BIGINT NOT NULL
                )""",
                "INSERT INTO {session_heads} (session_id, version, epoch) "
                "SELECT session_id, COUNT(*), 0 FROM {session_runs} GROUP BY session_id",
            ),
            backfill=_checksum_segments,
        ),
        # As SQLite's session v4: entries may be stored in their compact row form; recorded so
        # an older lovia refuses the namespace instead of failing on each such row.
        Migration(3, "compact_entry_rows", ()),
    ),
    "checkpoint": (
        Migration(
            1,
            "create_snapshot_tables",
            (
                """CREATE TABLE IF NOT EXISTS {snapshot_heads} (
                    run_id TEXT PRIMARY KEY,
                    head_json TEXT NOT NULL,
                    status TEXT NOT NULL,
                    batches BIGINT NOT NULL,
                    entry_count BIGINT NOT NULL,
                    updated_at DOUBLE PRECISION NOT NULL
                )""",
                "CREATE INDEX IF NOT EXISTS {snapshot_heads_updated} ON {snapshot_heads} "
                "(updated_at DESC, run_id DESC)",
                """CREATE TABLE IF NOT EXISTS {snapshot_turns} (
                    run_id TEXT NOT NULL,
                    seq BIGINT NOT NULL,
                    entries_json TEXT NOT NULL,
                    entry_count INTEGER NOT NULL,
                    PRIMARY KEY (run_id, seq)
                )""",
                """CREATE TABLE IF NOT EXISTS {run_leases} (
                    run_id TEXT PRIMARY KEY,
                    owner TEXT NOT NULL,
                    token BIGINT NOT NULL,
                    expires_at DOUBLE PRECISION NOT NULL
                )""",
            ),
        ),
        # A checksum per stored batch, verified on load.
        Migration(
            2,
            "checksum_snapshot_turns",
            ("ALTER TABLE {snapshot_turns} ADD COLUMN checksum BIGINT",),
            backfill=_checksum_batches,
        ),
        Migration(3, "compact_entry_rows", ()),
    ),
    # The chat index of ``lovia web`` replicas (lovia.web.store_pg): chats, runs, live frames, commands.
    "web": (
        Migration(
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
        Migration(
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
        Migration(
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
        Migration(
            4,
            "add_web_chat_context_and_origin_ref",
            (
                "ALTER TABLE {web_chats} ADD COLUMN active_context TEXT",
                "ALTER TABLE {web_chats} ADD COLUMN origin_ref TEXT",
            ),
        ),
        # Run records name their agent, why they started and how they failed (lovia.web.store_schedules).
        Migration(
            5,
            "add_web_run_details",
            (
                "ALTER TABLE {web_runs} ADD COLUMN IF NOT EXISTS agent TEXT",
                "ALTER TABLE {web_runs} ADD COLUMN IF NOT EXISTS source TEXT",
                "ALTER TABLE {web_runs} ADD COLUMN IF NOT EXISTS error TEXT",
            ),
        ),
        # Files uploaded into a chat: the bytes live in the database, so every replica can read them.
        Migration(
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
    ),
}

_INDEXES = (
    "session_runs_session_id",
    "snapshot_heads_updated",
    "web_runs_session",
    "web_frames_run",
    "web_origins_origin",
    "web_variants_session",
    "web_uploads_session",
)
_TABLES = (
    "session_runs",
    "session_heads",
    "snapshot_heads",
    "snapshot_turns",
    "run_leases",
    "web_chats",
    "web_runs",
    "web_frames",
    "web_commands",
    "web_ui_data",
    "web_origins",
    "web_variants",
    "web_uploads",
)


def latest_version(component: str) -> int:
    """The newest schema version this lovia knows for ``component``."""
    return MIGRATIONS[component][-1].version


def render(template: str, names: Names) -> Any:
    """A migration template with every table and index name filled in as a quoted identifier."""
    from psycopg import sql

    idents: dict[str, Any] = {t: names.table(t) for t in _TABLES}
    idents.update({i: names.plain(i) for i in _INDEXES})
    return sql.SQL(template).format(**{k: v for k, v in idents.items() if "{" + k + "}" in template})


async def read_version(conn: AsyncConnection[Any], component: str, names: Names) -> int:
    """The version recorded in this namespace (0 when nothing was ever migrated there)."""
    cur = await conn.execute("SELECT to_regclass(%s)", (names.regclass("lovia_schema"),))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return 0
    from psycopg import sql

    cur = await conn.execute(
        sql.SQL("SELECT version FROM {} WHERE component = %s").format(names.table("lovia_schema")), (component,)
    )
    found = await cur.fetchone()
    return int(found[0]) if found else 0


def _refuse_if_too_new(version: int, component: str, names: Names) -> None:
    latest = latest_version(component)
    if version > latest:
        where = f"{names.schema}." if names.schema else ""
        raise SchemaTooNewError(
            f"PostgreSQL {component} schema in {where}{names.prefix}lovia_schema is version {version}, "
            f"newer than this lovia supports (up to {latest})",
            hint="a newer lovia migrated this database; upgrade lovia (pip install -U lovia) to use it",
        )


async def _create_namespace(conn: AsyncConnection[Any], names: Names) -> None:
    from psycopg import sql

    if names.schema:
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(names.schema)))
    await conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (component TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "migration TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        ).format(names.table("lovia_schema"))
    )


async def ensure_schema(conn: AsyncConnection[Any], component: str, names: Names) -> None:
    """Bring ``component`` up to date in this namespace, or refuse one migrated by a newer lovia."""
    from psycopg import sql

    current = await read_version(conn, component, names)
    _refuse_if_too_new(current, component, names)
    for migration in MIGRATIONS[component]:
        if migration.version <= current:
            continue
        async with conn.transaction():
            # Serialise concurrent first opens; another worker may have migrated while we waited.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (names.lock_key(),))
            await _create_namespace(conn, names)
            current = await read_version(conn, component, names)
            _refuse_if_too_new(current, component, names)
            if migration.version > current:
                for statement in migration.statements:
                    await conn.execute(render(statement, names))
                if migration.backfill is not None:
                    await migration.backfill(conn, names)
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (component, version, migration, applied_at) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (component) DO UPDATE SET version = excluded.version, "
                        "migration = excluded.migration, applied_at = excluded.applied_at"
                    ).format(names.table("lovia_schema")),
                    (component, migration.version, migration.name, time.time()),
                )
        current = max(current, migration.version)
