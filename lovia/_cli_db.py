"""Internal: ``lovia db status PATH`` and ``lovia db upgrade PATH [--backup]`` for one SQLite file.

``status`` opens the file read-only (it never migrates, never writes) and reports, per store found
in it, the recorded schema version, the newest this lovia knows, the steps an open would apply and
the rows whose stored checksum does not match their text. ``upgrade`` applies those steps now, each
store in one transaction, after an optional consistent copy made with SQLite's backup API.

The stores are a table (:data:`KNOWN`): a store is found when its probe table exists or the
version record has a row for it. Everything store-specific is imported only when used, so the
command runs on a core install.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._cli_stores import NotFound
from .exceptions import StoreError
from .stores._codec import checksum
from .stores.sqlite._schema import Migration, ensure_schema, latest_version, pending_migrations, read_version
from .stores.sqlite._schema import record_shape as _record_shape

__all__ = ["KNOWN", "KnownStore", "add_db_parser", "run_db"]

# What a damage check returns: one description per damaged row, or None when the file's layout
# has no checksums to check yet (they are added by a migration).
Damage = Callable[[sqlite3.Connection], "list[str] | None"]


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}


def _mismatch(stored: object, entries_json: object, meta_json: object) -> bool:
    if not isinstance(entries_json, str) or not (meta_json is None or isinstance(meta_json, str)):
        return True
    return not isinstance(stored, int) or stored != checksum(entries_json, meta_json)


def _session_damage(conn: sqlite3.Connection) -> list[str] | None:
    if "checksum" not in _columns(conn, "session_runs"):
        return None
    rows = conn.execute(
        "SELECT session_id, run_id, entries_json, meta_json, checksum FROM session_runs "
        "WHERE checksum IS NOT NULL ORDER BY id"
    )
    return [f"session {sid!r}, run {rid!r}" for sid, rid, text, meta, stored in rows if _mismatch(stored, text, meta)]


def _checkpoint_damage(conn: sqlite3.Connection) -> list[str] | None:
    if "checksum" not in _columns(conn, "snapshot_turns"):
        return None
    rows = conn.execute("SELECT run_id, entries_json, checksum FROM snapshot_turns WHERE checksum IS NOT NULL")
    return [f"run {rid!r} (a batch of entries)" for rid, text, stored in rows if _mismatch(stored, text, None)]


def _no_checksums(conn: sqlite3.Connection) -> list[str] | None:
    return []


def _core_migrations(store: str) -> Callable[[], Sequence[Migration]]:
    def get() -> Sequence[Migration]:
        from .stores.sqlite._schema import MIGRATIONS

        return MIGRATIONS[store]

    return get


def _schedule_migrations() -> Sequence[Migration]:
    from .web.store.schedules import SCHEDULE_MIGRATIONS

    return SCHEDULE_MIGRATIONS


def _chat_migrations() -> Sequence[Migration]:
    from .web.store.schema import CHAT_MIGRATIONS

    return CHAT_MIGRATIONS


def _keyword_migrations() -> Sequence[Migration]:
    from .plugins.memory.index import KEYWORD_MIGRATIONS

    return KEYWORD_MIGRATIONS


def _keyword_prepare(conn: sqlite3.Connection) -> None:
    from .plugins.memory.index import lexify  # the archive's re-index step calls it from SQL

    conn.create_function("lovia_lexify", 1, lexify, deterministic=True)


def _vector_migrations() -> Sequence[Migration]:
    from .plugins.memory.vector import VECTOR_MIGRATIONS

    return VECTOR_MIGRATIONS


def _nothing_to_prepare(conn: sqlite3.Connection) -> None:
    return None


@dataclass(frozen=True)
class KnownStore:
    """A store ``lovia db`` knows: a table that exists when it is in the file, its steps, its damage check."""

    probe: str
    migrations: Callable[[], Sequence[Migration]]
    damage: Damage = field(default=_no_checksums)
    prepare: Callable[[sqlite3.Connection], None] = field(default=_nothing_to_prepare)
    """Anything its steps need on the connection (an SQL function), set before they run."""


KNOWN: dict[str, KnownStore] = {
    "session": KnownStore("session_runs", _core_migrations("session"), _session_damage),
    "checkpoint": KnownStore("snapshot_heads", _core_migrations("checkpoint"), _checkpoint_damage),
    "schedule": KnownStore("web_schedules", _schedule_migrations),
    "chat": KnownStore("chat_sessions", _chat_migrations),
    # The memory indexes: both versions keep them in 0.9.119's tables (and ours also record a row).
    "memory_archive": KnownStore("memory_fts", _keyword_migrations, prepare=_keyword_prepare),
    "memory_vectors": KnownStore("memory_vectors", _vector_migrations),
}

_SHAPES = {
    "none": "none yet (written before versioning; the first migration creates it)",
    "store": "lovia_schema keyed by store",
    "store-0.9.119": "lovia_schema keyed by store, as lovia 0.9.119 writes it (without migration, applied_at)",
    "component": "lovia_schema keyed by component (an older lovia of ours; converted on upgrade)",
}


def _shape(conn: sqlite3.Connection) -> str:
    shape = _record_shape(conn)
    if shape == "store" and not {"migration", "applied_at"} <= _columns(conn, "lovia_schema"):
        return "store-0.9.119"
    return shape


def _recorded(conn: sqlite3.Connection) -> set[str]:
    shape = _record_shape(conn)
    if shape == "none":
        return set()
    return {str(row[0]) for row in conn.execute(f"SELECT {shape} FROM lovia_schema")}


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _found(conn: sqlite3.Connection) -> list[str]:
    tables, recorded = _tables(conn), _recorded(conn)
    return [name for name, known in KNOWN.items() if known.probe in tables or name in recorded]


def _require_file(path: str) -> None:
    if not os.path.isfile(path):
        raise NotFound(f"no database at {path}", hint="pass the path of a SQLite file lovia wrote")


def _read_only_query(path: str) -> str:
    """``mode=ro``; plus ``immutable=1`` for a WAL-mode file with no log beside it.

    SQLite reads a WAL-mode file through a ``-shm`` index it would otherwise create (with an
    empty ``-wal``) even for a read-only connection. With no log, the file itself holds every
    commit, so it is read as it is and nothing appears beside it.
    """
    with open(path, "rb") as fh:
        header = fh.read(20)
    wal_mode = len(header) == 20 and header[18:20] == b"\x02\x02"
    return "?mode=ro&immutable=1" if wal_mode and not os.path.exists(path + "-wal") else "?mode=ro"


def _open_read_only(path: str) -> sqlite3.Connection:
    _require_file(path)
    try:
        conn = sqlite3.connect(Path(path).absolute().as_uri() + _read_only_query(path), uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(
            f"cannot read {path}: {exc}", hint="check that the file is a SQLite database and readable"
        ) from exc
    return conn


def status(path: str) -> dict[str, Any]:
    """What ``lovia db status`` reports, as data (the file is only read)."""
    conn = _open_read_only(path)
    try:
        stores, tables = [], _tables(conn)
        for name in _found(conn):
            known = KNOWN[name]
            steps = known.migrations()
            version, latest = read_version(conn, name), latest_version(name, steps)
            damaged = known.damage(conn) if known.probe in tables else []
            stores.append(
                {
                    "store": name,
                    "version": version,
                    "latest": latest,
                    "too_new": version > latest,
                    "pending": [f"{m.version} {m.name}" for m in pending_migrations(conn, name, steps)],
                    "checked": damaged is not None,
                    "damaged": damaged or [],
                }
            )
        shape = _shape(conn)
        others = [{"store": n, "version": read_version(conn, n)} for n in sorted(_recorded(conn) - set(KNOWN))]
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {path}: {exc}", hint="check that the file is a lovia database") from exc
    finally:
        conn.close()
    return {"path": path, "record": shape, "stores": stores, "other_stores": others}


def _print_status(report: dict[str, Any]) -> None:
    print(f"file: {report['path']}")
    print(f"version record: {_SHAPES[report['record']]}")
    if not report["stores"] and not report["other_stores"]:
        print("no lovia stores found")
    for other in report["other_stores"]:
        print(f"{other['store']}: version {other['version']} (recorded; not a store this command checks)")
    for s in report["stores"]:
        if s["too_new"]:
            state = f"too new: written by a newer lovia (this one knows up to {s['latest']}); upgrade lovia"
        elif s["pending"]:
            state = f"{len(s['pending'])} pending: " + ", ".join(s["pending"])
        else:
            state = "up to date"
        print(f"{s['store']}: version {s['version']}, latest {s['latest']}, {state}")
        if not s["checked"]:
            print("  checksums: none stored yet (added by the upgrade)")
        elif s["damaged"]:
            print(f"  damaged: {len(s['damaged'])} row(s) do not match their checksum:")
            for where in s["damaged"]:
                print(f"    {where}")
        else:
            print("  damaged: none")


def _backup_name(path: str) -> str:
    candidate, n = f"{path}.bak", 1
    while os.path.exists(candidate):
        candidate, n = f"{path}.bak.{n}", n + 1
    return candidate


def backup(path: str) -> str:
    """A consistent copy of the file next to it (never over an existing file); returns its path."""
    target = _backup_name(path)
    source = sqlite3.connect(path)
    try:
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()
    return target


def upgrade(path: str) -> list[tuple[str, int, int]]:
    """Migrate every store found in the file; returns ``(store, version before, version after)``."""
    _require_file(path)
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        done = []
        for name in _found(conn):
            known = KNOWN[name]
            before = read_version(conn, name)
            known.prepare(conn)
            ensure_schema(conn, name, path=path, migrations=known.migrations())
            done.append((name, before, read_version(conn, name)))
        return done
    except sqlite3.Error as exc:
        raise StoreError(
            f"cannot upgrade {path}: {exc}", hint="the file is unchanged; check that it is a writable lovia database"
        ) from exc
    finally:
        conn.close()


def add_db_parser(sub: Any) -> None:
    """Register ``lovia db status`` and ``lovia db upgrade``."""
    db = sub.add_parser("db", help="check or upgrade a SQLite store file's schema").add_subparsers(
        dest="action", required=True
    )
    st = db.add_parser("status", help="versions, pending migrations and damaged rows (read-only; exit 1 on damage)")
    st.add_argument("path", help="the SQLite file")
    st.add_argument("--json", action="store_true", help="print the report as JSON")
    up = db.add_parser("upgrade", help="apply every pending migration of every store in the file now")
    up.add_argument("path", help="the SQLite file")
    up.add_argument(
        "--backup", action="store_true", help="first write a consistent copy to PATH.bak (never overwritten)"
    )


def run_db(args: argparse.Namespace) -> int:
    """Run ``lovia db ...``; returns the exit status."""
    if args.action == "status":
        report = status(args.path)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            _print_status(report)
        return 1 if any(s["damaged"] for s in report["stores"]) else 0
    _require_file(args.path)
    if args.backup:
        print(f"backup: {backup(args.path)}")
    done = upgrade(args.path)
    if not done:
        print("no lovia stores found")
    for name, before, after in done:
        print(f"{name}: version {before} -> {after}" if after != before else f"{name}: up to date (version {after})")
    return 0
