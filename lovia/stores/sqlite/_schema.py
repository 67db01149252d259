"""Internal: the SQLite schema of each store and its ordered, named migrations.

``lovia_schema(store, version, migration, applied_at)`` records, per store, the last migration
applied to the file. The first two columns are the shape lovia 0.9.119 reads, so it refuses a file
we migrated with its own "upgrade lovia" error; ``migration`` and ``applied_at`` are ours and
nullable. Files written before this shape (keyed by ``component``) and 0.9.119's files (no extra
columns) are converted on their next migration.

Every pending step of one store, and the conversion of the record itself, commit in **one**
transaction: a failure or a crash at any step leaves the file exactly as it was, and the next open
starts again from the same version. Version 1 of each store uses ``IF NOT EXISTS`` (or an
``already_applied`` probe) so a file written before versioning existed is adopted in place.

Stores outside this module (the web chat file, the memory indexes) pass their own ``migrations``
to :func:`ensure_schema`; the ones here are the session and checkpoint stores.

A store that wrote files before it kept a row in ``lovia_schema`` declares its steps as
:class:`Steps` with a ``legacy_version``: given such a file (no row for the store yet), it returns
the version whose layout the file already has (``0``: none). The steps up to that version are then
recorded without running, in the same transaction as the pending ones, and :func:`pending_migrations`
lists only the steps that will run. The hook is asked once per file: afterwards the row answers.

To change the schema: append a :class:`Migration` (never edit a released one), bump nothing else,
and add a frozen fixture of the new version under ``tests/fixtures/sqlite/``.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ...exceptions import SchemaTooNewError
from .._codec import checksum

__all__ = [
    "MIGRATIONS",
    "Component",
    "Migration",
    "Steps",
    "current_version",
    "ensure_schema",
    "latest_version",
    "pending_migrations",
    "read_version",
    "record_shape",
]

# The stores whose migrations live here; other stores pass theirs to ensure_schema().
Component = Literal["session", "checkpoint"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``statements`` run in order inside one transaction with the version record."""

    version: int
    name: str
    statements: tuple[str, ...]
    # A query that returns a row when the file already has this step's layout (a file written
    # before versioning existed): the step is then recorded without running its statements.
    already_applied: str | None = None
    # A step converting a foreign layout to ours can build what later steps add: their versions,
    # recorded without running their statements when this step ran in the same migration.
    covers: tuple[int, ...] = ()


class Steps(tuple[Migration, ...]):
    """A store's migrations in order, with how to date a file written before the store kept its row.

    ``legacy_version(conn)`` is called inside the migration's transaction for a file with no row for
    the store, and returns the version whose layout the file already has.
    """

    legacy_version: Callable[[sqlite3.Connection], int] | None

    def __new__(
        cls, steps: Iterable[Migration], *, legacy_version: Callable[[sqlite3.Connection], int] | None = None
    ) -> Steps:
        made = super().__new__(cls, steps)
        made.legacy_version = legacy_version
        return made


MIGRATIONS: dict[str, tuple[Migration, ...]] = {
    "session": (
        Migration(
            1,
            "create_session_runs",
            (
                """CREATE TABLE IF NOT EXISTS session_runs (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    session_id TEXT NOT NULL,
                    run_id TEXT NOT NULL,
                    entries_json TEXT NOT NULL,
                    meta_json TEXT,
                    created_at REAL NOT NULL,
                    UNIQUE (session_id, run_id)
                )""",
                "CREATE INDEX IF NOT EXISTS session_runs_session_id ON session_runs (session_id, id)",
            ),
        ),
        # A checksum per segment (entries + meta text, verified on load) and a head row per
        # session whose counters every change bumps in its own transaction: the incremental
        # history cache (lovia/stores/_history.py) reads that row to know what changed.
        Migration(
            2,
            "checksums_and_session_heads",
            (
                "ALTER TABLE session_runs ADD COLUMN checksum INTEGER",
                "UPDATE session_runs SET checksum = lovia_checksum(entries_json, meta_json)",
                """CREATE TABLE session_heads (
                    session_id TEXT PRIMARY KEY,
                    version INTEGER NOT NULL,
                    epoch INTEGER NOT NULL
                )""",
                "INSERT INTO session_heads (session_id, version, epoch) "
                "SELECT session_id, COUNT(*), 0 FROM session_runs GROUP BY session_id",
            ),
            already_applied="SELECT 1 FROM pragma_table_info('session_runs') WHERE name = 'checksum'",
        ),
        # Appends stop bumping session_heads: the session's largest row id counts them (ids are
        # AUTOINCREMENT and SQLite has one writer, so they grow in commit order), and the head row
        # keeps only the maintenance epoch. The layout is unchanged; the version is recorded so an
        # older lovia, whose cache trusts the append bump, refuses the file instead of serving a
        # stale history from it.
        Migration(3, "appends_counted_by_row_id", ()),
        # Entries may be stored in their compact row form (``[code, field, ...]``, see
        # ``lovia.transcript``). The layout is unchanged and older rows still read; the version is
        # recorded so an older lovia, which reads only the dict form, refuses the file up front.
        Migration(4, "compact_entry_rows", ()),
    ),
    "checkpoint": (
        Migration(
            1,
            "create_snapshot_tables",
            (
                """CREATE TABLE IF NOT EXISTS snapshot_heads (
                    run_id TEXT PRIMARY KEY,
                    head_json TEXT NOT NULL,
                    updated_at REAL NOT NULL
                )""",
                """CREATE TABLE IF NOT EXISTS snapshot_turns (
                    run_id TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    entries_json TEXT NOT NULL,
                    PRIMARY KEY (run_id, seq)
                )""",
            ),
        ),
        Migration(
            2,
            "add_run_leases",
            (
                """CREATE TABLE IF NOT EXISTS run_leases (
                    run_id TEXT PRIMARY KEY,
                    owner TEXT NOT NULL,
                    token INTEGER NOT NULL,
                    expires_at REAL NOT NULL
                )""",
            ),
        ),
        # Batches become a chain: each row points at the run's previous batch and the head row at
        # the newest, so a save appends one row at the end of the table and updates the head with
        # no index to maintain (two B-tree pages per save instead of three). The head also keeps
        # the run's entry count, which load checks and listings read without parsing batches.
        Migration(
            3,
            "chain_snapshot_turns",
            (
                """CREATE TABLE snapshot_turns_chained (
                    id INTEGER PRIMARY KEY,
                    run_id TEXT NOT NULL,
                    prev_id INTEGER,
                    entries_json TEXT NOT NULL
                )""",
                """INSERT INTO snapshot_turns_chained (id, run_id, prev_id, entries_json)
                SELECT n, run_id, CASE WHEN nth = 1 THEN NULL ELSE n - 1 END, entries_json
                FROM (SELECT run_id, entries_json,
                             ROW_NUMBER() OVER (ORDER BY run_id, seq) AS n,
                             ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY seq) AS nth
                      FROM snapshot_turns)""",
                "DROP TABLE snapshot_turns",
                "ALTER TABLE snapshot_turns_chained RENAME TO snapshot_turns",
                "ALTER TABLE snapshot_heads ADD COLUMN last_turn INTEGER",
                "ALTER TABLE snapshot_heads ADD COLUMN entry_count INTEGER NOT NULL DEFAULT 0",
                "CREATE INDEX snapshot_turns_migrating ON snapshot_turns (run_id)",
                """UPDATE snapshot_heads SET
                    last_turn = (SELECT MAX(t.id) FROM snapshot_turns t WHERE t.run_id = snapshot_heads.run_id),
                    entry_count = (SELECT COALESCE(SUM(CASE WHEN json_valid(t.entries_json)
                                                       THEN json_array_length(t.entries_json) ELSE 0 END), 0)
                                   FROM snapshot_turns t WHERE t.run_id = snapshot_heads.run_id)""",
                "DROP INDEX snapshot_turns_migrating",
            ),
            already_applied="SELECT 1 FROM pragma_table_info('snapshot_turns') WHERE name = 'prev_id'",
        ),
        # A checksum per stored batch, verified on load.
        Migration(
            4,
            "checksum_snapshot_turns",
            (
                "ALTER TABLE snapshot_turns ADD COLUMN checksum INTEGER",
                "UPDATE snapshot_turns SET checksum = lovia_checksum(entries_json, NULL)",
            ),
            already_applied="SELECT 1 FROM pragma_table_info('snapshot_turns') WHERE name = 'checksum'",
        ),
        # As session version 4: batches may hold entries in their compact row form.
        Migration(5, "compact_entry_rows", ()),
    ),
}

_CREATE_SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS lovia_schema (
    store TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    migration TEXT,
    applied_at REAL
)"""

RecordShape = Literal["none", "store", "component"]


def record_shape(conn: sqlite3.Connection) -> RecordShape:
    """Which version record the file has: none yet, keyed by ``store`` (current), or by ``component`` (ours, older)."""
    columns = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info('lovia_schema')")}
    if not columns:
        return "none"
    return "store" if "store" in columns else "component"


def _record_is_current(conn: sqlite3.Connection) -> bool:
    columns = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info('lovia_schema')")}
    return {"store", "migration", "applied_at"} <= columns


def _convert_record(conn: sqlite3.Connection) -> None:
    """Create the version record, or bring an older one to the current shape (inside the caller's transaction)."""
    shape = record_shape(conn)
    if shape == "none":
        conn.execute(_CREATE_SCHEMA_TABLE)
    elif shape == "component":
        conn.execute("ALTER TABLE lovia_schema RENAME TO lovia_schema_by_component")
        conn.execute(_CREATE_SCHEMA_TABLE)
        conn.execute(
            "INSERT INTO lovia_schema (store, version, migration, applied_at) "
            "SELECT component, version, migration, applied_at FROM lovia_schema_by_component"
        )
        conn.execute("DROP TABLE lovia_schema_by_component")
    else:  # 0.9.119's (store, version): add our nullable columns
        columns = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info('lovia_schema')")}
        for column, kind in (("migration", "TEXT"), ("applied_at", "REAL")):
            if column not in columns:
                conn.execute(f"ALTER TABLE lovia_schema ADD COLUMN {column} {kind}")


def latest_version(store: str, migrations: Sequence[Migration] | None = None) -> int:
    """The newest schema version this lovia knows for ``store``."""
    return (MIGRATIONS[store] if migrations is None else migrations)[-1].version


def _recorded(conn: sqlite3.Connection, store: str) -> int | None:
    shape = record_shape(conn)
    if shape == "none":
        return None
    row = conn.execute(f"SELECT version FROM lovia_schema WHERE {shape} = ?", (store,)).fetchone()
    return int(row[0]) if row else None


def read_version(conn: sqlite3.Connection, store: str) -> int:
    """The version recorded in the file (0 when the file predates versioning or is new); reads either record shape."""
    return _recorded(conn, store) or 0


def current_version(conn: sqlite3.Connection, store: str, migrations: Sequence[Migration] | None = None) -> int:
    """The version the file is at: the recorded one, else what the steps' ``legacy_version`` dates it to."""
    recorded = _recorded(conn, store)
    if recorded is not None:
        return recorded
    legacy = getattr(migrations, "legacy_version", None)
    return int(legacy(conn)) if legacy is not None else 0


def pending_migrations(
    conn: sqlite3.Connection, store: str, migrations: Sequence[Migration] | None = None
) -> list[Migration]:
    """The steps an open would apply to this file, in order (nothing is changed)."""
    steps = MIGRATIONS[store] if migrations is None else migrations
    current = current_version(conn, store, steps)
    return [m for m in steps if m.version > current]


def _refuse_if_too_new(version: int, store: str, path: str, latest: int) -> None:
    if version > latest:
        raise SchemaTooNewError(
            f"{path}: {store} schema version {version} is newer than this lovia supports (up to {latest})",
            hint="a newer lovia migrated this database; upgrade lovia (pip install -U lovia) to open it",
        )


def _sql_checksum(entries_json: object, meta_json: object) -> int | None:
    # A damaged row (not text) keeps no checksum: loading it then reports it as damaged.
    if not isinstance(entries_json, str) or not (meta_json is None or isinstance(meta_json, str)):
        return None
    return checksum(entries_json, meta_json)


def _record(conn: sqlite3.Connection, store: str, migration: Migration) -> None:
    conn.execute(
        "INSERT INTO lovia_schema (store, version, migration, applied_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (store) DO UPDATE SET version = excluded.version, "
        "migration = excluded.migration, applied_at = excluded.applied_at",
        (store, migration.version, migration.name, time.time()),
    )


def _apply_step(conn: sqlite3.Connection, store: str, migration: Migration) -> None:
    """Run one step and record it (inside the caller's transaction).

    Looked up as a module global on every step, so a test child can wrap it to fail or be killed
    at a chosen step of any store.
    """
    adopted = migration.already_applied and conn.execute(migration.already_applied).fetchone()
    for statement in () if adopted else migration.statements:
        conn.execute(statement)
    _record(conn, store, migration)


def ensure_schema(
    conn: sqlite3.Connection,
    store: str,
    *,
    path: str,
    migrations: Sequence[Migration] | None = None,
) -> None:
    """Bring ``store`` up to date in this file in one transaction, or refuse a file from a newer lovia.

    ``migrations`` defaults to this module's steps for ``store``; given as :class:`Steps` with a
    ``legacy_version``, a file without a row for the store is dated by it first (see the module
    docstring).
    """
    steps = MIGRATIONS[store] if migrations is None else migrations
    latest = steps[-1].version
    conn.create_function("lovia_checksum", 2, _sql_checksum, deterministic=True)
    recorded = _recorded(conn, store)
    _refuse_if_too_new(recorded or 0, store, path, latest)
    if recorded is not None and recorded >= latest and _record_is_current(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the write lock.
        recorded = _recorded(conn, store)
        current = current_version(conn, store, steps)
        _refuse_if_too_new(current, store, path, latest)
        _convert_record(conn)
        if recorded is None and current > 0:  # a file from before the record: its layout's version
            _record(conn, store, next(m for m in steps if m.version == current))
        covered: set[int] = set()
        for migration in steps:
            if migration.version <= current:
                continue
            if migration.version in covered:  # an earlier step of this migration built its layout
                migration = dataclasses.replace(migration, statements=(), already_applied=None)
            _apply_step(conn, store, migration)
            covered.update(migration.covers)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
