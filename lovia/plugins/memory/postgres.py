"""PostgreSQL archive arms for :class:`~lovia.plugins.memory.Memory` (extra ``lovia[postgres]``).

``PostgresKeywordIndex`` keeps docs in one table with a ``tsvector`` column (the ``simple``
configuration over the same tokens as the SQLite index, CJK bigrams included) ranked by
``ts_rank_cd``. ``PostgresVectorIndex`` needs the pgvector extension on the server; without it,
the first use raises :class:`~lovia.exceptions.UserError` saying so. Both tables hold a ``scope``
column, so one schema can serve many users or agents (one index object per scope)::

    index = PostgresKeywordIndex(dsn, scope=f"user:{user_id}")
    Memory(root, index=index)
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from typing import Any

from ...exceptions import UserError
from .index import Doc, Fusable, Hit, lexify
from .vector import Embedder

__all__ = ["PostgresKeywordIndex", "PostgresVectorIndex"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_WORD = re.compile(r"\w+", re.UNICODE)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise UserError("the PostgreSQL memory index needs psycopg", hint="pip install 'lovia[postgres]'") from exc
    return psycopg


def _ident(name: str, what: str) -> str:
    if not _IDENT.match(name):
        raise UserError(
            f"invalid {what} name {name!r}", hint="letters, digits and underscores, not starting with a digit"
        )
    return f'"{name}"'


class _PgBase(Fusable, ABC):
    def __init__(self, dsn: str, *, scope: str = "default", schema: str = "lovia_memory", table: str) -> None:
        self.dsn = dsn
        self.scope = scope
        self.schema = _ident(schema, "schema")
        self.table = f"{self.schema}.{_ident(table, 'table')}"
        self._ready = False

    async def _connect(self) -> Any:
        psycopg = _psycopg()
        return await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    @abstractmethod
    async def _ensure(self, conn: Any) -> None:
        """Create this index's table if it is missing (each index knows its own columns)."""

    async def _conn(self) -> Any:
        conn = await self._connect()
        if not self._ready:
            try:
                await self._ensure(conn)
            except BaseException:
                await conn.close()
                raise
            self._ready = True
        return conn

    async def remove(self, ids: list[str]) -> None:
        """Delete by id within this scope."""
        if not ids:
            return
        conn = await self._conn()
        async with conn:
            await conn.execute(f"DELETE FROM {self.table} WHERE scope = %s AND id = ANY(%s)", (self.scope, ids))


class PostgresKeywordIndex(_PgBase):
    """Full-text search over a PostgreSQL table (``tsvector`` + GIN index)."""

    def __init__(
        self, dsn: str, *, scope: str = "default", schema: str = "lovia_memory", table: str = "archive"
    ) -> None:
        super().__init__(dsn, scope=scope, schema=schema, table=table)

    async def _ensure(self, conn: Any) -> None:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (scope TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL, "
            "at DOUBLE PRECISION NOT NULL DEFAULT 0, meta JSONB NOT NULL DEFAULT '{}', body TSVECTOR NOT NULL, "
            "PRIMARY KEY (scope, id))"
        )
        name = self.table.replace('"', "").replace(".", "_")
        await conn.execute(f'CREATE INDEX IF NOT EXISTS "{name}_fts" ON {self.table} USING GIN (body)')

    async def add(self, docs: list[Doc]) -> None:
        """Upsert ``docs`` in this scope."""
        if not docs:
            return
        conn = await self._conn()
        async with conn:
            async with conn.transaction():
                for d in docs:
                    await conn.execute(
                        f"INSERT INTO {self.table} (scope, id, text, at, meta, body) "
                        "VALUES (%s, %s, %s, %s, %s, to_tsvector('simple', %s)) "
                        "ON CONFLICT (scope, id) DO UPDATE SET text = EXCLUDED.text, at = EXCLUDED.at, "
                        "meta = EXCLUDED.meta, body = EXCLUDED.body",
                        (self.scope, d.id, d.text, d.when, json.dumps(d.meta), lexify(d.text)),
                    )

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        """Docs matching any query token, best ``ts_rank_cd`` first."""
        tokens = list(dict.fromkeys(_WORD.findall(lexify(query, for_query=True))))
        if not tokens or k <= 0:
            return []
        tsquery = " | ".join(tokens)  # \w tokens only: nothing of the query's syntax leaks in
        conn = await self._conn()
        async with conn:
            cur = await conn.execute(
                f"SELECT id, text, at, meta, ts_rank_cd(body, q) AS score FROM {self.table}, "
                "to_tsquery('simple', %s) q WHERE scope = %s AND body @@ q ORDER BY score DESC, id LIMIT %s",
                (tsquery, self.scope, k),
            )
            rows = await cur.fetchall()
        return [Hit(Doc(r[0], r[1], float(r[2]), dict(r[3] or {})), float(r[4])) for r in rows]


class PostgresVectorIndex(_PgBase):
    """Cosine search with pgvector (the extension must be available on the server)."""

    def __init__(
        self,
        dsn: str,
        embedder: Embedder,
        *,
        scope: str = "default",
        schema: str = "lovia_memory",
        table: str = "vectors",
    ) -> None:
        super().__init__(dsn, scope=scope, schema=schema, table=table)
        self.embedder = embedder

    async def _ensure(self, conn: Any) -> None:
        psycopg = _psycopg()
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise UserError(
                f"this PostgreSQL server has no pgvector extension ({' '.join(str(exc).split())[:200]})",
                hint="install pgvector on the server, or keep vectors in SQLite with VectorIndex(path, embedder)",
            ) from exc
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (scope TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL, "
            "at DOUBLE PRECISION NOT NULL DEFAULT 0, meta JSONB NOT NULL DEFAULT '{}', embedder TEXT NOT NULL, "
            "vec vector NOT NULL, PRIMARY KEY (scope, id))"
        )
        await conn.execute(
            f"DELETE FROM {self.table} WHERE scope = %s AND embedder <> %s", (self.scope, self.embedder.id)
        )

    async def add(self, docs: list[Doc]) -> None:
        """Embed and upsert ``docs`` in this scope."""
        if not docs:
            return
        conn = await self._conn()
        vectors = await self.embedder.embed([d.text for d in docs])
        async with conn:
            async with conn.transaction():
                for d, v in zip(docs, vectors, strict=True):
                    await conn.execute(
                        f"INSERT INTO {self.table} (scope, id, text, at, meta, embedder, vec) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s::vector) ON CONFLICT (scope, id) DO UPDATE SET "
                        "text = EXCLUDED.text, at = EXCLUDED.at, meta = EXCLUDED.meta, embedder = EXCLUDED.embedder, "
                        "vec = EXCLUDED.vec",
                        (self.scope, d.id, d.text, d.when, json.dumps(d.meta), self.embedder.id, str(list(v))),
                    )

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` nearest docs by cosine distance."""
        if not query.strip() or k <= 0:
            return []
        conn = await self._conn()
        [qv] = await self.embedder.embed([query])
        async with conn:
            cur = await conn.execute(
                f"SELECT id, text, at, meta, 1 - (vec <=> %s::vector) FROM {self.table} "
                "WHERE scope = %s AND embedder = %s ORDER BY vec <=> %s::vector LIMIT %s",
                (str(list(qv)), self.scope, self.embedder.id, str(list(qv)), k),
            )
            rows = await cur.fetchall()
        return [Hit(Doc(r[0], r[1], float(r[2]), dict(r[3] or {})), float(r[4])) for r in rows]
