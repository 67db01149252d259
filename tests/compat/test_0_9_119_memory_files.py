"""lovia 0.9.119's memory folder (MEMORY.md, archive.db, vectors.db) opens in ours.

On a copy of the folder: the notes, a keyword hit and a vector hit as ``expected.json["memory"]``
records them. The fixture's README says the vectors came from "a fixed fake embedder";
:class:`BagOfWords` below is that embedder reconstructed from the stored vectors (four counted
words plus 0.01, normalized), and a test checks it reproduces every stored vector.

The other way round: the files we write are in 0.9.119's tables, read here with plain ``sqlite3``
as its layout implies (its rows, and an FTS5 MATCH of its words on ``search``).
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
    assert [h.doc.id for h in await index.search("weather talk")] == ["r1:1"]
    assert [h.doc.id for h in await index.search("discussing launches")] == ["r1:0"]  # other word forms
    await index.add([Doc("new", "Atlas launch moved to April")])  # keeps working on the adopted file
    assert {h.doc.id for h in await index.search("April")} == {"new"}
    index.close()
    db = folder / "archive.db"
    assert _rows(db, "SELECT store, version FROM lovia_schema") == [(KEYWORD_STORE, KEYWORD_MIGRATIONS[-1].version)]
    assert _rows(db, "SELECT id, text, search, when_ts, meta FROM memory_fts WHERE id LIKE 'r1:%' ORDER BY id") == [
        (
            "r1:0",
            "We discussed the Atlas launch date in March",
            "we discussed the atlas launch date in march",
            1.0,
            '{"session_id": "u1"}',
        ),
        ("r1:1", "Weather small talk", "weather small talk", 2.0, '{"session_id": "u1"}'),
    ]


async def test_the_stored_vectors_are_kept_and_served(folder: Path, expected: dict[str, Any]) -> None:
    stored = {r[0]: r[1] for r in _rows(folder / "vectors.db", "SELECT id, vec FROM memory_vectors")}
    index = VectorIndex(folder / "vectors.db", BagOfWords())
    hits = await index.search(QUERY, k=1)
    assert [h.doc.id for h in hits] == expected["vhits"]
    assert (hits[0].doc.text, hits[0].doc.meta) == ("Atlas launch in March", {"k": "a"})
    index.close()
    kept = {r[0]: r[1] for r in _rows(folder / "vectors.db", "SELECT id, vec FROM memory_vectors")}
    assert kept == stored  # the very bytes 0.9.119 stored, not embedded again
    assert _rows(folder / "vectors.db", "SELECT * FROM memory_vectors_meta") == [("embedder_id", "fake-embedder-4")]
    # BagOfWords is the embedder they came from: it makes every stored vector again.
    rows = _rows(folder / "vectors.db", "SELECT text, vec FROM memory_vectors ORDER BY id")
    for (_, blob), vec in zip(rows, await BagOfWords().embed([t for t, _ in rows]), strict=True):
        floats = array.array("f")
        floats.frombytes(blob)
        size = math.sqrt(sum(x * x for x in vec))
        assert list(floats) == pytest.approx([x / size for x in vec], abs=1e-6)

    class Other(BagOfWords):
        id = "another-embedder"

    # Another embedder's space is never mixed with the stored one.
    assert await VectorIndex(folder / "vectors.db", Other()).search(QUERY) == []


# ------------------------------------------------------------------ what 0.9.119 reads in our files


def _schema(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each memory table's columns as SQLite reports them (name, type, not null, default, primary key)."""
    names = ("memory_fts", "memory_vectors", "memory_vectors_meta")
    return {
        name: [tuple(r[1:]) for r in _rows(db, f"SELECT * FROM pragma_table_info('{name}')")]
        for name in names
        if _rows(db, f"SELECT 1 FROM sqlite_master WHERE name = '{name}'")
    }


def _their_search(db: Path, words: list[str]) -> list[str]:
    """What 0.9.119's layout implies a keyword query is: an FTS5 MATCH of quoted words on ``search``."""
    match = " OR ".join(f'"{w}"' for w in words)
    return sorted(r[0] for r in _rows(db, f"SELECT id FROM memory_fts WHERE search MATCH '{match}'"))


@pytest.mark.parametrize("origin", ["0.9.119", "ours"])
async def test_an_archive_we_wrote_is_in_0_9_119s_table_and_its_queries_find_our_docs(
    folder: Path, tmp_path: Path, origin: str
) -> None:
    db = folder / "archive.db" if origin == "0.9.119" else tmp_path / "ours.db"
    theirs = _schema(folder / "archive.db")
    assert [c[0] for c in theirs["memory_fts"]] == ["id", "text", "search", "when_ts", "meta"]
    index = KeywordIndex(db)
    await index.add([Doc("new", "Atlas launch moved to April", 5.0, {"k": "v"}), Doc("cjk", "东京会议的纪要", 6.0)])
    await index.add([Doc("new", "Atlas launch moved to May", 7.0, {"k": "w"})])  # an upsert leaves one row
    await index.remove(["nothing-here"])
    index.close()
    assert _schema(db) == theirs  # the same table and columns 0.9.119 created
    assert not _rows(db, "SELECT name FROM sqlite_master WHERE name IN ('docs', 'vectors', 'vec_meta')")
    assert _rows(db, "SELECT id, text, search, when_ts, meta FROM memory_fts WHERE id = 'new'") == [
        ("new", "Atlas launch moved to May", "atlas launch moved to may", 7.0, '{"k": "w"}')
    ]
    fixture_docs = ["r1:0", "r1:1"] if origin == "0.9.119" else []
    assert _their_search(db, ["may"]) == ["new"]
    assert _their_search(db, ["april"]) == []
    assert _their_search(db, ["atlas"]) == sorted(["new", *fixture_docs[:1]])
    assert _their_search(db, ["weather", "talk"]) == fixture_docs[1:]
    assert _their_search(db, ["东京"]) == ["cjk"]  # a CJK pair, as a bigram index is queried
    assert _their_search(db, ["会"]) == ["cjk"]  # and a single character
    assert _their_search(db, ["京都"]) == []
    # Our own search reads the same rows, whichever lovia wrote them.
    again = KeywordIndex(db)
    assert [h.doc.id for h in await again.search("launches in May")][0] == "new"
    assert [h.doc.id for h in await again.search("东京")] == ["cjk"]
    assert await again.count() == 2 + len(fixture_docs)
    again.close()


async def test_a_doc_0_9_119_writes_into_our_archive_is_found_by_us(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "ours.db"
    index = KeywordIndex(db)
    await index.add([Doc("ours", "Atlas launch moved to May")])
    index.close()
    with sqlite3.connect(db) as conn:  # a row as 0.9.119 writes it: its words, lower case, in search
        conn.execute(
            "INSERT INTO memory_fts (id, text, search, when_ts, meta) VALUES (?, ?, ?, ?, ?)",
            ("theirs", "Budget review on Friday", "budget review on friday", 9.0, '{"session_id": "u9"}'),
        )
    conn.close()
    again = KeywordIndex(db)
    hits = await again.search("budget reviews")
    assert [(h.doc.id, h.doc.text, h.doc.when, h.doc.meta) for h in hits] == [
        ("theirs", "Budget review on Friday", 9.0, {"session_id": "u9"})
    ]
    await again.remove(["theirs"])
    assert [h.doc.id for h in await again.search("budget")] == []
    again.close()


async def test_vectors_we_wrote_are_in_0_9_119s_tables(folder: Path, tmp_path: Path) -> None:
    ours = tmp_path / "ours.db"
    index = VectorIndex(ours, BagOfWords())
    await index.add([Doc("n1", "march march weather", 4.0, {"k": "b"})])
    index.close()
    assert _schema(ours) == _schema(folder / "vectors.db") and len(_schema(ours)) == 2
    for name in ("memory_vectors", "memory_vectors_meta"):  # the very statements 0.9.119 ran
        sql = "SELECT sql FROM sqlite_master WHERE name = ?"
        with sqlite3.connect(ours) as a, sqlite3.connect(folder / "vectors.db") as b:
            assert a.execute(sql, (name,)).fetchall() == b.execute(sql, (name,)).fetchall()
        a.close()
        b.close()
    assert _rows(ours, "SELECT * FROM memory_vectors_meta") == [("embedder_id", "fake-embedder-4")]
    [(id_, text, when, meta, blob)] = _rows(ours, "SELECT id, text, when_ts, meta, vec FROM memory_vectors")
    floats = array.array("f")
    floats.frombytes(blob)
    [vec] = await BagOfWords().embed([text])
    size = math.sqrt(sum(x * x for x in vec))
    assert (id_, text, when, json.loads(meta)) == ("n1", "march march weather", 4.0, {"k": "b"})
    assert list(floats) == pytest.approx([x / size for x in vec], abs=1e-6)  # normalized float32, as theirs
