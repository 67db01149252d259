"""Memory index files our earlier versions wrote are adopted and versioned.

Every start (a new file, our files before versioning, at version 1 and at version 2) ends in lovia
0.9.119's tables with the same rows; tables 0.9.119 added beside ours keep theirs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lovia.plugins.memory.index import KEYWORD_MIGRATIONS, KEYWORD_STORE, KeywordIndex
from lovia.plugins.memory.vector import VECTOR_MIGRATIONS, VECTOR_STORE, VectorIndex
from lovia.stores.sqlite._schema import ensure_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sqlite"


class Words:
    id = "words-4"
    words = ("atlas", "launch", "weather", "march")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[float(t.lower().split().count(w)) for w in self.words] for t in texts]


def _load(tmp_path: Path, fixture: str) -> Path:
    db = tmp_path / fixture.replace(".sql", ".db")
    conn = sqlite3.connect(db)
    conn.executescript((FIXTURES / fixture).read_text())
    conn.close()
    return db


def _record(db: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT store, version FROM lovia_schema").fetchall()
    conn.close()
    return rows


async def test_an_earlier_keyword_archive_is_adopted_in_place(tmp_path: Path) -> None:
    db = _load(tmp_path, "memory_archive_v0.sql")
    index = KeywordIndex(db)
    assert [h.doc.id for h in await index.search("Atlas launch")] == ["run_a:0"]
    assert await index.count() == 2
    index.close()
    assert _record(db) == [(KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version)]


async def test_earlier_vectors_are_adopted_in_place(tmp_path: Path) -> None:
    db = _load(tmp_path, "memory_vectors_v0.sql")
    index = VectorIndex(db, Words())
    hits = await index.search("Atlas launch", k=1)
    assert [h.doc.id for h in hits] == ["v_a"]
    index.close()
    assert _record(db) == [(VECTOR_STORE, VECTOR_MIGRATIONS[-1].version)]


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    rows = conn.execute(sql).fetchall()
    conn.close()
    return rows


def _tables(db: Path) -> set[str]:
    return {str(r[0]) for r in _rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def _at_version_1(tmp_path: Path, fixture: str, store: str) -> Path:
    """Our version-1 file: the pre-versioning layout with its row at version 1."""
    db = _load(tmp_path, fixture)
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE lovia_schema (store TEXT PRIMARY KEY, version INTEGER NOT NULL, migration TEXT, applied_at REAL)"
    )
    conn.execute("INSERT INTO lovia_schema VALUES (?, 1, 'create', 1700000000.0)", (store,))
    conn.commit()
    conn.close()
    return db


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_our_earlier_archives_move_into_0_9_119s_table(tmp_path: Path, version: int) -> None:
    fixture = "memory_archive_v2.sql" if version == 2 else "memory_archive_v0.sql"
    db = _at_version_1(tmp_path, fixture, KEYWORD_STORE) if version == 1 else _load(tmp_path, fixture)
    before = _rows(db, "SELECT id, text, body, at, meta FROM docs ORDER BY id")
    index = KeywordIndex(db)
    assert [h.doc.id for h in await index.search("Atlas launch")][0] == "run_a:0"
    assert [h.doc.id for h in await index.search("launching")] == ["run_a:0"]  # still stemmed
    index.close()
    assert _record(db) == [(KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version)]
    assert "docs" not in _tables(db) and "memory_fts" in _tables(db)
    assert _rows(db, "SELECT id, text, search, when_ts, meta FROM memory_fts ORDER BY id") == before


async def test_our_version_2_archive_keeps_its_cjk_pairs(tmp_path: Path) -> None:
    db = _load(tmp_path, "memory_archive_v2.sql")
    index = KeywordIndex(db)
    assert [h.doc.id for h in await index.search("会議")] == ["run_b:0"]
    assert [h.doc.id for h in await index.search("京")] == ["run_b:0"]
    assert [h.doc.id for h in await index.search("京都")] == []
    hits = await index.search("东京 东京会议 東京の会議")
    assert [(h.doc.id, h.doc.when, h.doc.meta) for h in hits] == [("run_b:0", 1700000002.0, {"session_id": "u2"})]
    index.close()


async def test_a_new_archive_is_made_in_0_9_119s_table(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    index = KeywordIndex(db)
    assert await index.search("anything") == []
    index.close()
    assert _tables(db) - {"lovia_schema"} == {
        f"memory_fts{s}" for s in ("", "_data", "_idx", "_content", "_docsize", "_config")
    }
    assert _record(db) == [(KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version)]


async def test_docs_0_9_119_wrote_beside_our_version_2_archive_are_kept_and_indexed(tmp_path: Path) -> None:
    # 0.9.119 ignores our version row: opening our version-2 file it made its own table and wrote there.
    db = _load(tmp_path, "memory_archive_v2.sql")
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        "id UNINDEXED, text UNINDEXED, search, when_ts UNINDEXED, meta UNINDEXED)"
    )
    conn.execute(
        "INSERT INTO memory_fts VALUES ('later:0', '大阪の出張 Budget', 'its own tokens', 9.0, '{}'), "
        "('run_a:1', 'The weather was fine', 'the weather was fine', 1700000001.0, '{}')"
    )
    conn.commit()
    conn.close()
    index = KeywordIndex(db)
    assert [h.doc.id for h in await index.search("大阪")] == ["later:0"]  # its row re-indexed through lexify
    assert [h.doc.id for h in await index.search("budget")] == ["later:0"]
    assert [h.doc.id for h in await index.search("own tokens")] == []
    assert [h.doc.id for h in await index.search("Atlas")] == ["run_a:0"]  # ours joined it
    assert await index.count() == 4  # run_a:1 once
    index.close()
    assert "docs" not in _tables(db)


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_our_earlier_vectors_move_into_0_9_119s_tables(tmp_path: Path, version: int) -> None:
    fixture = "memory_vectors_v2.sql" if version == 2 else "memory_vectors_v0.sql"
    db = _at_version_1(tmp_path, fixture, VECTOR_STORE) if version == 1 else _load(tmp_path, fixture)
    before = _rows(db, "SELECT id, text, at, meta, vec FROM vectors ORDER BY id")
    index = VectorIndex(db, Words())
    assert [h.doc.id for h in await index.search("Atlas launch", k=1)] == ["v_a"]
    index.close()
    assert _record(db) == [(VECTOR_STORE, VECTOR_MIGRATIONS[-1].version)]
    assert _tables(db) == {"lovia_schema", "memory_vectors", "memory_vectors_meta"}
    assert _rows(db, "SELECT id, text, when_ts, meta, vec FROM memory_vectors ORDER BY id") == before
    assert _rows(db, "SELECT key, value FROM memory_vectors_meta") == [("embedder_id", "words-4")]


@pytest.mark.parametrize(("their_embedder", "kept"), [("words-4", ["later", "v_a", "v_b"]), ("other-8", ["later"])])
async def test_vectors_0_9_119_wrote_beside_our_version_2_file_are_kept(
    tmp_path: Path, their_embedder: str, kept: list[str]
) -> None:
    db = _load(tmp_path, "memory_vectors_v2.sql")
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE memory_vectors (id TEXT PRIMARY KEY, text TEXT NOT NULL, when_ts REAL NOT NULL, "
        "meta TEXT NOT NULL, vec BLOB NOT NULL)"
    )
    conn.execute("CREATE TABLE memory_vectors_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO memory_vectors_meta VALUES ('embedder_id', ?)", (their_embedder,))
    conn.execute("INSERT INTO memory_vectors VALUES ('later', 'march', 9.0, '{}', X'0000000000000000000000000000803F')")
    conn.commit()
    conn.close()
    # Migrate without opening an index (whose embedder check could wipe): what stays is the migration's doing.
    conn = sqlite3.connect(db, isolation_level=None)
    ensure_schema(conn, VECTOR_STORE, path=str(db), migrations=VECTOR_MIGRATIONS)
    conn.close()
    assert [r[0] for r in _rows(db, "SELECT id FROM memory_vectors ORDER BY id")] == kept  # never two spaces mixed
    assert _rows(db, "SELECT key, value FROM memory_vectors_meta") == [("embedder_id", their_embedder)]
    assert _tables(db) == {"lovia_schema", "memory_vectors", "memory_vectors_meta"}
