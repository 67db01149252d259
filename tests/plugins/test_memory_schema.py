"""Memory index files our earlier releases wrote (no lovia_schema row) are adopted in place and versioned."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lovia.plugins.memory.index import KEYWORD_MIGRATIONS, KEYWORD_STORE, KeywordIndex
from lovia.plugins.memory.vector import VECTOR_MIGRATIONS, VECTOR_STORE, VectorIndex

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
