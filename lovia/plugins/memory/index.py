"""The archive's retrieval seam: plain docs in, scored hits out; arms compose with ``|``.

:class:`KeywordIndex` is SQLite FTS5 (bm25, Porter stemming, CJK text indexed as overlapping
bigrams so Chinese or Japanese queries match without a segmenter) in lovia 0.9.119's table, so
either version reads the other's archive. :class:`HybridIndex` fuses several arms by Reciprocal Rank
Fusion; a failing arm is skipped on reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ...stores.sqlite._schema import Migration, ensure_schema
from ._sqlite import SQLiteStore

__all__ = ["Doc", "Fusable", "Hit", "HybridIndex", "Index", "KeywordIndex"]


logger = logging.getLogger("lovia.plugins.memory")
_DEFAULT_RRF_K = 60


@dataclass
class Doc:
    """One archived text; ``id`` is the upsert key."""

    id: str
    text: str
    when: float = 0.0
    meta: dict[str, str] = field(default_factory=dict)


@dataclass
class Hit:
    """A search result; higher ``score`` is better (scales differ between indexes)."""

    doc: Doc
    score: float


@runtime_checkable
class Index(Protocol):
    """Retrieval over docs: upsert by id, remove by id, search by text."""

    async def add(self, docs: list[Doc]) -> None:
        """Insert or replace docs by id."""
        ...

    async def remove(self, ids: list[str]) -> None:
        """Remove docs by id (unknown ids are ignored)."""
        ...

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        """The best ``k`` docs for ``query``."""
        ...


class Fusable:
    """Mixin: ``a | b`` builds a :class:`HybridIndex` over both."""

    def __or__(self, other: Index) -> HybridIndex:
        left = list(self.indexes) if isinstance(self, HybridIndex) else [self]
        right = list(other.indexes) if isinstance(other, HybridIndex) else [other]
        return HybridIndex([*left, *right])


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"\w+", re.UNICODE)


def lexify(text: str, *, for_query: bool = False) -> str:
    """Text as tokens: lower case, CJK runs as overlapping bigrams (stored text also as single
    characters, so a one-character query still matches)."""

    def grams(m: re.Match[str]) -> str:
        run = m.group(0)
        if len(run) == 1:
            return f" {run} "
        pairs = [run[i : i + 2] for i in range(len(run) - 1)]
        return " " + " ".join(pairs if for_query else [*pairs, *run]) + " "

    return _CJK.sub(grams, text.lower())


def fts_query(text: str) -> str | None:
    """An FTS5 OR-query of the text's tokens (each quoted, so no syntax leaks in)."""
    tokens = list(dict.fromkeys(_WORD.findall(lexify(text, for_query=True))))
    if not tokens:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


KEYWORD_STORE = "memory_archive"
"""The keyword index's row in ``lovia_schema``."""

# The archive's table: lovia 0.9.119's columns, with the Porter stemmer over FTS5's default
# tokenizer (0.9.119 used the default alone). FTS5 keeps the tokenizer with the table and applies it
# to every write and every query, whichever lovia runs them, so a query word matches its stored
# word in both versions; ours also matches other forms of it ("launches" finds "launch").
_MEMORY_FTS = """CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    id UNINDEXED,
    text UNINDEXED,
    search,
    when_ts UNINDEXED,
    meta UNINDEXED,
    tokenize = 'porter unicode61'
)"""

KEYWORD_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "create_docs",
        (
            "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
            "id UNINDEXED, body, text UNINDEXED, at UNINDEXED, meta UNINDEXED, tokenize='porter unicode61')",
        ),
    ),
    # lovia 0.9.119 kept its archive in ``memory_fts(id, text, search, when_ts, meta)``: each doc
    # is indexed again through our tokenizer (``lexify``), then its table goes.
    Migration(
        2,
        "adopt_0_9_119_memory_fts",
        (
            "INSERT INTO docs (id, body, text, at, meta) "
            "SELECT id, lovia_lexify(COALESCE(text, '')), text, when_ts, COALESCE(meta, '{}') FROM memory_fts "
            "WHERE id NOT IN (SELECT id FROM docs)",
            "DROP TABLE memory_fts",
        ),
        already_applied="SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'memory_fts')",
    ),
    # The archive takes 0.9.119's table and columns as its own, so a file either version wrote
    # reads the same in the other. On a file 0.9.119 wrote, step 2 has just moved its rows into
    # ``docs``, re-indexed through ``lexify``; they come back here. A ``memory_fts`` 0.9.119 created
    # beside our ``docs`` (it ignores our version row) is kept, with its rows re-indexed through
    # ``lexify`` and its own tokenizer, and ours join it.
    Migration(
        3,
        "archive_in_0_9_119_memory_fts",
        (
            _MEMORY_FTS,
            "INSERT INTO memory_fts (id, text, search, when_ts, meta) "
            "SELECT id, COALESCE(text, ''), COALESCE(body, lovia_lexify(COALESCE(text, ''))), COALESCE(at, 0.0), "
            "COALESCE(meta, '{}') FROM docs WHERE id NOT IN (SELECT id FROM memory_fts)",
            "DROP TABLE docs",
            "UPDATE memory_fts SET search = lovia_lexify(COALESCE(text, '')) "
            "WHERE search IS NOT lovia_lexify(COALESCE(text, ''))",
        ),
    ),
)
"""Numbered steps of the keyword index file (``archive.db``); append, never edit a released one."""


class KeywordIndex(Fusable, SQLiteStore):
    """bm25 full-text search in one SQLite file (stdlib FTS5).

    The file's layout is versioned in ``lovia_schema`` (:data:`KEYWORD_MIGRATIONS`) and is lovia
    0.9.119's: docs live in ``memory_fts(id, text, search, when_ts, meta)``, ``search`` holding
    :func:`lexify`'s tokens. An archive 0.9.119 wrote is re-indexed through ``lexify`` on first open.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        SQLiteStore.__init__(self, path)

    def _schema(self, conn: sqlite3.Connection) -> None:
        conn.create_function("lovia_lexify", 1, lexify, deterministic=True)
        ensure_schema(conn, KEYWORD_STORE, path=str(self.path), migrations=KEYWORD_MIGRATIONS)

    async def add(self, docs: list[Doc]) -> None:
        """Upsert ``docs``."""

        def write(conn: sqlite3.Connection) -> None:
            for d in docs:
                conn.execute("DELETE FROM memory_fts WHERE id = ?", (d.id,))
                conn.execute(
                    "INSERT INTO memory_fts (id, text, search, when_ts, meta) VALUES (?, ?, ?, ?, ?)",
                    (d.id, d.text, lexify(d.text), d.when, json.dumps(d.meta)),
                )

        if docs:
            await self._run(write)

    async def remove(self, ids: list[str]) -> None:
        """Delete by id."""

        def delete(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM memory_fts WHERE id = ?", [(i,) for i in ids])

        if ids:
            await self._run(delete)

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        """bm25-ranked matches of any query token."""
        match = fts_query(query)
        if match is None or k <= 0:
            return []

        def read(conn: sqlite3.Connection) -> list[Hit]:
            rows = conn.execute(
                "SELECT id, text, when_ts, meta, bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH ? "
                "ORDER BY bm25(memory_fts) LIMIT ?",
                (match, k),
            ).fetchall()
            return [Hit(Doc(r[0], r[1], float(r[2] or 0.0), json.loads(r[3] or "{}")), -float(r[4])) for r in rows]

        return await self._run(read)

    async def count(self) -> int:
        """How many docs are stored."""
        return await self._run(lambda conn: int(conn.execute("SELECT count(*) FROM memory_fts").fetchone()[0]))


class HybridIndex(Fusable):
    """Several arms fused by Reciprocal Rank Fusion: writes go to all, reads skip broken arms."""

    def __init__(self, indexes: Sequence[Index], *, rrf_k: int = _DEFAULT_RRF_K) -> None:
        self.indexes = list(indexes)
        self.rrf_k = rrf_k

    async def add(self, docs: list[Doc]) -> None:
        """Upsert into every arm."""
        await asyncio.gather(*(ix.add(docs) for ix in self.indexes))

    async def remove(self, ids: list[str]) -> None:
        """Remove from every arm."""
        await asyncio.gather(*(ix.remove(ids) for ix in self.indexes))

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        """Fused ranking: each arm contributes ``1 / (rrf_k + rank)`` per doc."""
        answers = await asyncio.gather(*(ix.search(query, k * 2) for ix in self.indexes), return_exceptions=True)
        scores: dict[str, float] = {}
        docs: dict[str, Doc] = {}
        for ix, answer in zip(self.indexes, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, Exception):
                    raise answer
                logger.warning("memory index %r failed a search (skipped): %s", ix, answer)
                continue
            for rank, hit in enumerate(answer, start=1):
                scores[hit.doc.id] = scores.get(hit.doc.id, 0.0) + 1.0 / (self.rrf_k + rank)
                docs.setdefault(hit.doc.id, hit.doc)
        best = sorted(scores, key=lambda i: (-scores[i], i))[:k]
        return [Hit(docs[i], scores[i]) for i in best]
