"""The SQLite migration record's two options for files a store wrote before it kept its row:
``Steps(legacy_version=...)`` dates such a file, and ``Migration.covers`` lets a converting step
stand for later ones."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lovia.stores.sqlite._schema import Migration, Steps, current_version, ensure_schema, pending_migrations

STEPS = (
    Migration(1, "create_notes", ("CREATE TABLE notes (id TEXT PRIMARY KEY)",)),
    Migration(2, "add_body", ("ALTER TABLE notes ADD COLUMN body TEXT",)),
    Migration(3, "add_tags", ("ALTER TABLE notes ADD COLUMN tags TEXT",)),
)


def _columns(conn: sqlite3.Connection) -> list[str]:
    return [str(r[1]) for r in conn.execute("SELECT * FROM pragma_table_info('notes')")]


def _record(conn: sqlite3.Connection) -> list[tuple[str, int, str]]:
    return [tuple(r) for r in conn.execute("SELECT store, version, migration FROM lovia_schema")]


def test_without_a_legacy_version_an_older_file_fails_on_its_existing_table(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "n.db", isolation_level=None)
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)")
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        ensure_schema(conn, "notes", path="n.db", migrations=STEPS)
    assert _columns(conn) == ["id", "body"]  # nothing changed: one transaction


def test_a_file_from_before_the_record_is_dated_and_only_the_later_steps_run(tmp_path: Path) -> None:
    asked: list[int] = []

    def date(conn: sqlite3.Connection) -> int:
        asked.append(1)
        return 2 if "body" in _columns(conn) else 1 if _columns(conn) else 0

    steps = Steps(STEPS, legacy_version=date)
    conn = sqlite3.connect(tmp_path / "n.db", isolation_level=None)
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)")
    assert current_version(conn, "notes", steps) == 2
    assert [m.version for m in pending_migrations(conn, "notes", steps)] == [3]
    ensure_schema(conn, "notes", path="n.db", migrations=steps)
    assert _columns(conn) == ["id", "body", "tags"]
    assert _record(conn) == [("notes", 3, "add_tags")]
    asked.clear()
    ensure_schema(conn, "notes", path="n.db", migrations=steps)
    assert asked == []  # the row answers from now on

    fresh = sqlite3.connect(tmp_path / "new.db", isolation_level=None)
    ensure_schema(fresh, "notes", path="new.db", migrations=steps)  # dated 0: every step runs
    assert _columns(fresh) == ["id", "body", "tags"] and _record(fresh) == [("notes", 3, "add_tags")]


def test_a_file_dated_at_the_latest_version_gets_its_row(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "n.db", isolation_level=None)
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT, tags TEXT)")
    ensure_schema(conn, "notes", path="n.db", migrations=Steps(STEPS, legacy_version=lambda c: 3))
    assert _record(conn) == [("notes", 3, "add_tags")]


def test_a_step_covering_later_ones_has_them_recorded_without_running(tmp_path: Path) -> None:
    steps = (
        Migration(1, "convert", ("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT, tags TEXT)",), covers=(2, 3)),
        *STEPS[1:],
    )
    conn = sqlite3.connect(tmp_path / "n.db", isolation_level=None)
    ensure_schema(conn, "notes", path="n.db", migrations=steps)  # steps 2 and 3 would fail: duplicate columns
    assert _columns(conn) == ["id", "body", "tags"] and _record(conn) == [("notes", 3, "add_tags")]
