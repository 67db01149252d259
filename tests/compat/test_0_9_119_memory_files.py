"""lovia 0.9.119's memory folder (MEMORY.md, archive.db, vectors.db) opens in ours.

On a copy of the folder: the notes, a keyword hit and a vector hit as ``expected.json["memory"]``
records them. The fixture's README says the vectors came from "a fixed fake embedder";
:class:`BagOfWords` below is that embedder reconstructed from the stored vectors (four counted
words plus 0.01, normalized), and a test checks it reproduces every stored vector.
"""

from __future__ import annotations

import array
import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lovia import Memory
from lovia.exceptions import SchemaTooNewError
from lovia.plugins.memory.index import KEYWORD_MIGRATIONS, KEYWORD_STORE, Doc, KeywordIndex
from lovia.plugins.memory.vector import VECTOR_MIGRATIONS, VECTOR_STORE, VectorIndex

from ._chat_ref import REF

pytestmark = pytest.mark.skipif(not (REF / "memory").is_dir(), reason=f"0.9.119's fixture files are not at {REF}")

QUERY = "Atlas launch"


class BagOfWords:
    """Counts of four words, each plus 0.01: the space 0.9.119's fixture vectors live in."""

    id = "fake-embedder-4"
    words = ("atlas", "launch", "weather", "march")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[t.lower().split().count(w) + 0.01 for w in self.words] for t in texts]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(REF / "memory", tmp_path / "memory")
    return tmp_path / "memory"


@pytest.fixture
def expected() -> dict[str, Any]:
    return dict(json.loads((REF / "expected.json").read_text())["memory"])


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(sql).fetchall()
    conn.close()
    return rows


async def test_an_archive_from_a_newer_lovia_is_refused_and_left_as_it_was(folder: Path) -> None:
    db = folder / "archive.db"
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO lovia_schema VALUES (?, ?)", (KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version + 1))
    conn.close()
    before = db.read_bytes()
    index = KeywordIndex(db)
    with pytest.raises(SchemaTooNewError) as caught:
        await index.search(QUERY)
    assert caught.value.hint and "upgrade lovia" in caught.value.hint
    assert db.read_bytes() == before


async def test_a_vector_file_from_a_newer_lovia_is_refused(folder: Path) -> None:
    db = folder / "vectors.db"
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO lovia_schema VALUES (?, ?)", (VECTOR_STORE, VECTOR_MIGRATIONS[-1].version + 1))
    conn.close()
    with pytest.raises(SchemaTooNewError):
        await VectorIndex(db, BagOfWords()).search(QUERY)


async def test_the_notes_are_read_and_the_archive_is_re_indexed_and_searched(
    folder: Path, expected: dict[str, Any]
) -> None:
    body = await Memory(root=folder).notes_body()
    notes = [line.split("] ", 1)[1] for line in body.splitlines() if line.startswith("- ")]
    assert notes == expected["notes"]
    index = KeywordIndex(folder / "archive.db")
    hits = await index.search(QUERY)
    assert [h.doc.id for h in hits] == expected["hits"]
    assert (hits[0].doc.text, hits[0].doc.when, hits[0].doc.meta) == (
        "We discussed the Atlas launch date in March",
        1.0,
        {"session_id": "u1"},
    )
    assert await index.count() == 2
    assert [h.doc.id for h in await index.search("weather talk")] == ["r1:1"]  # found through our stemmer
    await index.add([Doc("new", "Atlas launch moved to April")])  # keeps working on the adopted file
    assert {h.doc.id for h in await index.search("April")} == {"new"}
    index.close()
    db = folder / "archive.db"
    assert _rows(db, "SELECT store, version FROM lovia_schema") == [(KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version)]
    assert not _rows(db, "SELECT name FROM sqlite_master WHERE name = 'memory_fts'")


async def test_the_stored_vectors_are_kept_and_served(folder: Path, expected: dict[str, Any]) -> None:
    stored = {r[0]: r[1] for r in _rows(folder / "vectors.db", "SELECT id, vec FROM memory_vectors")}
    index = VectorIndex(folder / "vectors.db", BagOfWords())
    hits = await index.search(QUERY, k=1)
    assert [h.doc.id for h in hits] == expected["vhits"]
    assert (hits[0].doc.text, hits[0].doc.meta) == ("Atlas launch in March", {"k": "a"})
    index.close()
    kept = {r[0]: r[1] for r in _rows(folder / "vectors.db", "SELECT id, vec FROM vectors")}
    assert kept == stored  # the very bytes 0.9.119 stored, not embedded again
    assert _rows(folder / "vectors.db", "SELECT value FROM vec_meta WHERE key = 'embedder'") == [("fake-embedder-4",)]
    # BagOfWords is the embedder they came from: it makes every stored vector again.
    rows = _rows(folder / "vectors.db", "SELECT text, vec FROM vectors ORDER BY id")
    for (_, blob), vec in zip(rows, await BagOfWords().embed([t for t, _ in rows]), strict=True):
        floats = array.array("f")
        floats.frombytes(blob)
        size = math.sqrt(sum(x * x for x in vec))
        assert list(floats) == pytest.approx([x / size for x in vec], abs=1e-6)

    class Other(BagOfWords):
        id = "another-embedder"

    # Another embedder's space is never mixed with the stored one.
    assert await VectorIndex(folder / "vectors.db", Other()).search(QUERY) == []
