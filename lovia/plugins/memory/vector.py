"""The semantic arm: embeddings in SQLite, cosine search; and an OpenAI-compatible embedder.

Vectors are a recall cache keyed by the embedder's ``id``: opening an index with a different
embedder wipes the stored vectors instead of mixing two spaces.
"""

from __future__ import annotations

import array
import json
import math
import os
import sqlite3
from typing import Any, Protocol, runtime_checkable

import httpx

from ...exceptions import ProviderError, UserError
from ...providers._http import api_root, resolve_timeout, resolve_trust_env, resolve_verify
from ...stores.sqlite._schema import Migration, ensure_schema
from ._sqlite import SQLiteStore
from .index import Doc, Fusable, Hit

__all__ = ["Embedder", "OpenAIEmbedder", "VectorIndex"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; ``id`` names the vector space (model and dimensions)."""

    id: str

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint.

    The endpoint and key come from the arguments, else ``LOVIA_EMBEDDING_BASE_URL`` /
    ``LOVIA_EMBEDDING_API_KEY``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        default_headers: dict[str, str] | None = None,
        trust_env: bool | None = None,
        batch_size: int = 32,
    ) -> None:
        if batch_size < 1:
            raise UserError("OpenAIEmbedder: batch_size must be at least 1", hint="use batch_size=32")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.api_key = api_key or os.environ.get("LOVIA_EMBEDDING_API_KEY") or os.environ.get("OPENAI_API_KEY")
        root = base_url or os.environ.get("LOVIA_EMBEDDING_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        self.base_url = api_root(root or "https://api.openai.com/v1")
        self.headers = dict(default_headers or {})
        self._owns = client is None
        self._client = client or httpx.AsyncClient(
            timeout=resolve_timeout(timeout), trust_env=resolve_trust_env(trust_env), verify=resolve_verify()
        )
        self.id = f"openai:{model}:{dimensions or 'default'}"

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder created it."""
        if self._owns:
            await self._client.aclose()

    def _error(
        self, message: str, *, status: int | None = None, retryable: bool = False, hint: str | None = None
    ) -> ProviderError:
        return ProviderError(
            f"embeddings ({self.model}): {message}",
            vendor="openai-embeddings",
            model=self.model,
            status_code=status,
            retryable=retryable,
            hint=hint,
        )

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed in batches of ``batch_size``."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(await self._batch(texts[start : start + self.batch_size]))
        return out

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        headers = dict(self.headers)
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            response = await self._client.post(f"{self.base_url}/embeddings", json=payload, headers=headers)
        except httpx.TimeoutException as exc:
            raise self._error("request timed out", retryable=True, hint="pass timeout= or retry later") from exc
        except httpx.HTTPError as exc:
            raise self._error(f"connection failed: {exc}", retryable=True, hint="check base_url") from exc
        if response.status_code >= 300:
            retryable = response.status_code == 429 or response.status_code >= 500
            hint = "check the API key" if response.status_code in (401, 403) else "check the model name and base_url"
            raise self._error(
                f"HTTP {response.status_code}: {response.text[:300]}",
                status=response.status_code,
                retryable=retryable,
                hint=hint,
            )
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda row: int(row.get("index", 0)))
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error(
                "malformed response (no data[].embedding)", hint="is base_url an embeddings API?"
            ) from exc
        if len(vectors) != len(texts):
            raise self._error(f"got {len(vectors)} vectors for {len(texts)} texts", hint="check the endpoint")
        return vectors


def _norm(vec: list[float]) -> list[float]:
    size = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / size for x in vec]


VECTOR_STORE = "memory_vectors"
"""The vector index's row in ``lovia_schema``."""

# The two tables as lovia 0.9.119 creates them (SQLite records them without ``IF NOT EXISTS``).
_MEMORY_VECTORS = """CREATE TABLE IF NOT EXISTS memory_vectors (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    when_ts REAL NOT NULL,
    meta TEXT NOT NULL,
    vec BLOB NOT NULL
)"""
_MEMORY_VECTORS_META = """CREATE TABLE IF NOT EXISTS memory_vectors_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""

VECTOR_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "create_vectors",
        (
            "CREATE TABLE IF NOT EXISTS vec_meta (key TEXT PRIMARY KEY, value TEXT)",
            "CREATE TABLE IF NOT EXISTS vectors (id TEXT PRIMARY KEY, text TEXT, at REAL, meta TEXT, vec BLOB)",
        ),
    ),
    # lovia 0.9.119 kept ``memory_vectors(id, text, when_ts, meta, vec)`` (the same normalized
    # float32 blobs) and its embedder's id in ``memory_vectors_meta``: both are kept as they are.
    Migration(
        2,
        "adopt_0_9_119_memory_vectors",
        (
            "INSERT OR IGNORE INTO vectors (id, text, at, meta, vec) "
            "SELECT id, text, when_ts, meta, vec FROM memory_vectors",
            "INSERT OR IGNORE INTO vec_meta (key, value) "
            "SELECT 'embedder', value FROM memory_vectors_meta WHERE key = 'embedder_id'",
            "DROP TABLE memory_vectors",
            "DROP TABLE memory_vectors_meta",
        ),
        already_applied="SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'memory_vectors')",
    ),
    # The vectors take 0.9.119's layout as their own (its very table statements), so either version
    # reads the file the other wrote. On a file 0.9.119 wrote, step 2 has just moved its rows into
    # ``vectors``; they come back here unchanged. Tables 0.9.119 created beside ours (it ignores our
    # version row) keep their rows; ours join them only when made by the same embedder.
    Migration(
        3,
        "vectors_in_0_9_119_memory_vectors",
        (
            _MEMORY_VECTORS,
            _MEMORY_VECTORS_META,
            "INSERT OR IGNORE INTO memory_vectors (id, text, when_ts, meta, vec) "
            "SELECT id, COALESCE(text, ''), COALESCE(at, 0.0), COALESCE(meta, '{}'), vec FROM vectors "
            "WHERE vec IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memory_vectors_meta WHERE key = 'embedder_id' "
            "AND value IS NOT (SELECT value FROM vec_meta WHERE key = 'embedder'))",
            "INSERT OR IGNORE INTO memory_vectors_meta (key, value) "
            "SELECT 'embedder_id', value FROM vec_meta WHERE key = 'embedder' AND value IS NOT NULL",
            "DROP TABLE vectors",
            "DROP TABLE vec_meta",
        ),
    ),
)
"""Numbered steps of the vector index file (``vectors.db``); append, never edit a released one."""


class VectorIndex(Fusable, SQLiteStore):
    """Cosine search over embeddings stored in SQLite (exact scan: fine for a personal archive).

    The file's layout is versioned in ``lovia_schema`` (:data:`VECTOR_MIGRATIONS`) and is lovia
    0.9.119's: ``memory_vectors(id, text, when_ts, meta, vec)`` and the embedder's ``id`` under
    ``embedder_id`` in ``memory_vectors_meta``. Stored vectors are served while the embedder's
    ``id`` is the one they were made with.
    """

    def __init__(self, path: str | os.PathLike[str], embedder: Embedder) -> None:
        SQLiteStore.__init__(self, path)
        self.embedder = embedder

    def _schema(self, conn: sqlite3.Connection) -> None:
        ensure_schema(conn, VECTOR_STORE, path=str(self.path), migrations=VECTOR_MIGRATIONS)
        row = conn.execute("SELECT value FROM memory_vectors_meta WHERE key = 'embedder_id'").fetchone()
        if row is None or row[0] != self.embedder.id:
            conn.execute("DELETE FROM memory_vectors")  # another vector space: start over rather than mix
            conn.execute(
                "INSERT OR REPLACE INTO memory_vectors_meta (key, value) VALUES ('embedder_id', ?)",
                (self.embedder.id,),
            )

    async def add(self, docs: list[Doc]) -> None:
        """Embed and upsert ``docs``."""
        if not docs:
            return
        vectors = await self.embedder.embed([d.text for d in docs])

        def write(conn: sqlite3.Connection) -> None:
            for d, v in zip(docs, vectors, strict=True):
                blob = array.array("f", _norm(v)).tobytes()
                conn.execute(
                    "INSERT OR REPLACE INTO memory_vectors (id, text, when_ts, meta, vec) VALUES (?, ?, ?, ?, ?)",
                    (d.id, d.text, d.when, json.dumps(d.meta), blob),
                )

        await self._run(write)

    async def remove(self, ids: list[str]) -> None:
        """Delete by id."""
        if ids:
            await self._run(
                lambda conn: conn.executemany("DELETE FROM memory_vectors WHERE id = ?", [(i,) for i in ids])
            )

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` stored docs nearest to the query's embedding."""
        if not query.strip() or k <= 0:
            return []
        [qv] = await self.embedder.embed([query])
        q = _norm(qv)

        def read(conn: sqlite3.Connection) -> list[Hit]:
            scored: list[tuple[float, Doc]] = []
            for id_, text, at, meta, blob in conn.execute("SELECT id, text, when_ts, meta, vec FROM memory_vectors"):
                vec = array.array("f")
                vec.frombytes(blob)
                if len(vec) != len(q):
                    continue
                score = sum(a * b for a, b in zip(q, vec, strict=True))
                scored.append((score, Doc(id_, text, float(at or 0.0), json.loads(meta or "{}"))))
            scored.sort(key=lambda s: (-s[0], s[1].id))
            return [Hit(doc, score) for score, doc in scored[:k]]

        return await self._run(read)
