"""Internal: the PostgreSQL schema of each store component and its ordered, named migrations.

Same discipline as the SQLite stores: ``lovia_schema(store, version, migration, applied_at)``
records, per store, the last migration applied in this namespace (schema + table prefix);
``migration`` and ``applied_at`` are nullable, the SQLite record's shape. A record of ours keyed by
``component`` is converted on the next migration. Every pending step of a store, and the record's
conversion, commit in one transaction, which first takes a transaction-scoped advisory lock, so
many workers opening a new database at once migrate it exactly once. A namespace migrated past
what this lovia knows is refused with :class:`~lovia.exceptions.SchemaTooNewError`.

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

import string
import time
from collections.abc import Awaitable, Callable, Sequence
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
    # The index names the statements create, rendered unqualified (the stores' own are known here).
    indexes: tuple[str, ...] = ()


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
}

_INDEXES = (
    "session_runs_session_id",
    "snapshot_heads_updated",
)


def latest_version(component: str) -> int:
    """The newest schema version this lovia knows for ``component``."""
    return MIGRATIONS[component][-1].version


def render(template: str, names: Names, indexes: Sequence[str] = ()) -> Any:
    """A migration template with every ``{name}`` filled in as a quoted identifier: an index name
    (the stores' own, or one of ``indexes``) unqualified, any other name as a table of the namespace.

    A component defined outside this module (the web app's chat index) names its tables and
    indexes this way too, and passes its own steps to :func:`ensure_schema`.
    """
    from psycopg import sql

    keys = {field for _, field, _, _ in string.Formatter().parse(template) if field}
    plain = set(_INDEXES) | set(indexes)
    return sql.SQL(template).format(**{k: names.plain(k) if k in plain else names.table(k) for k in keys})


async def _record_columns(conn: AsyncConnection[Any], names: Names) -> set[str]:
    """The columns of this namespace's version record (empty when there is none yet)."""
    cur = await conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
        (names.regclass("lovia_schema"),),
    )
    return {str(row[0]) for row in await cur.fetchall()}


def _key(columns: set[str]) -> str | None:
    """The record's key column: ``store`` (current), ``component`` (ours, older), or ``None`` (no record)."""
    return "store" if "store" in columns else "component" if "component" in columns else None


async def read_version(conn: AsyncConnection[Any], store: str, names: Names) -> int:
    """The version recorded in this namespace (0 when nothing was ever migrated there); reads either record shape."""
    key = _key(await _record_columns(conn, names))
    if key is None:
        return 0
    from psycopg import sql

    cur = await conn.execute(
        sql.SQL("SELECT version FROM {} WHERE {} = %s").format(names.table("lovia_schema"), sql.Identifier(key)),
        (store,),
    )
    found = await cur.fetchone()
    return int(found[0]) if found else 0


def _refuse_if_too_new(version: int, store: str, names: Names, latest: int) -> None:
    if version > latest:
        where = f"{names.schema}." if names.schema else ""
        raise SchemaTooNewError(
            f"PostgreSQL {store} schema in {where}{names.prefix}lovia_schema is version {version}, "
            f"newer than this lovia supports (up to {latest})",
            hint="a newer lovia migrated this database; upgrade lovia (pip install -U lovia) to use it",
        )


async def _prepare_record(conn: AsyncConnection[Any], names: Names) -> None:
    """Create the namespace and the version record, or bring an older record to the current shape."""
    from psycopg import sql

    if names.schema:
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(names.schema)))
    table = names.table("lovia_schema")
    columns = await _record_columns(conn, names)
    if not columns:
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {} (store TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                "migration TEXT, applied_at DOUBLE PRECISION)"
            ).format(table)
        )
        return
    if "store" not in columns:  # ours, keyed by component, with both our columns required
        await conn.execute(sql.SQL("ALTER TABLE {} RENAME COLUMN component TO store").format(table))
    for column, kind in (("migration", "TEXT"), ("applied_at", "DOUBLE PRECISION")):
        if column in columns:
            await conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN {} DROP NOT NULL").format(table, sql.Identifier(column))
            )
        else:
            await conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN {} " + kind).format(table, sql.Identifier(column)))


async def _record_is_current(conn: AsyncConnection[Any], names: Names) -> bool:
    cur = await conn.execute(
        "SELECT attname, attnotnull FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
        "AND NOT attisdropped",
        (names.regclass("lovia_schema"),),
    )
    required = {str(name): bool(notnull) for name, notnull in await cur.fetchall()}
    return "store" in required and required.get("migration") is False and required.get("applied_at") is False


async def _apply_step(conn: AsyncConnection[Any], store: str, migration: Migration, names: Names) -> None:
    """Run one step and record it (inside the caller's transaction); a module global a test may wrap."""
    from psycopg import sql

    for statement in migration.statements:
        await conn.execute(render(statement, names, migration.indexes))
    if migration.backfill is not None:
        await migration.backfill(conn, names)
    await conn.execute(
        sql.SQL(
            "INSERT INTO {} (store, version, migration, applied_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (store) DO UPDATE SET version = excluded.version, "
            "migration = excluded.migration, applied_at = excluded.applied_at"
        ).format(names.table("lovia_schema")),
        (store, migration.version, migration.name, time.time()),
    )


async def ensure_schema(
    conn: AsyncConnection[Any], store: str, names: Names, migrations: Sequence[Migration] | None = None
) -> None:
    """Bring ``store`` up to date in this namespace in one transaction, or refuse one migrated by a newer lovia.

    ``migrations`` defaults to this module's steps for ``store``. Every pending step and the
    record's conversion commit together, under a transaction-scoped advisory lock so that many
    workers opening a new namespace at once migrate it exactly once.
    """
    steps = MIGRATIONS[store] if migrations is None else tuple(migrations)
    latest = steps[-1].version
    current = await read_version(conn, store, names)
    _refuse_if_too_new(current, store, names, latest)
    if current >= latest and await _record_is_current(conn, names):
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (names.lock_key(),))
        # Another worker may have migrated while we waited for the lock.
        current = await read_version(conn, store, names)
        _refuse_if_too_new(current, store, names, latest)
        await _prepare_record(conn, names)
        for migration in steps:
            if migration.version > current:
                await _apply_step(conn, store, migration, names)
