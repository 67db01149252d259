"""Internal: the stores ``lovia runs`` and ``lovia sessions`` work on, an SQLite file or a PostgreSQL schema.

Both kinds answer the same questions: the session store, the checkpointer, when each run's lease
expires, which ``lovia web`` process a chat run was started by, and the chats' titles. Nothing is
created by looking: a PostgreSQL schema is probed first (reachable? has it lovia's tables?), and a
component that was never migrated there is reported, not migrated.
"""

from __future__ import annotations

import difflib
import os
import sqlite3
import time
from abc import ABC, abstractmethod
from typing import Any

from .exceptions import StoreError, UserError

__all__ = ["NotFound", "PostgresStores", "SQLiteStores", "Stores", "open_stores"]

_COMPONENTS = ("session", "checkpoint", "web")


class NotFound(UserError):
    """A named run, session or database does not exist (exit status 1)."""


class Stores(ABC):
    """What the commands read: ``session``, ``checkpointer`` and the run/chat facts around them."""

    where: str
    """Where the stores are, for messages (never a password)."""
    session: Any
    checkpointer: Any

    def require(self, component: str) -> None:
        """Raise :class:`NotFound` unless ``component`` (``session`` or ``checkpoint``) has tables here.

        The default accepts: in an SQLite file a component's missing tables simply read as empty.
        """
        return None

    @abstractmethod
    async def leases(self) -> dict[str, float]:
        """``run_id -> expires_at`` (this host's clock) of every lease row, expired ones included."""

    @abstractmethod
    async def web_owners(self) -> dict[str, str]:
        """``run_id -> host:pid`` of the ``lovia web`` process that started each chat run still running."""

    @abstractmethod
    async def chat_titles(self) -> dict[str, str]:
        """``session_id -> title`` from the web app's chat index (empty without one)."""

    async def close(self) -> None:
        """Close every store opened."""
        await self.session.close()
        await self.checkpointer.close()


class SQLiteStores(Stores):
    """One SQLite file, as ``lovia web --db PATH`` or ``SQLiteSession`` / ``SQLiteCheckpointer`` write it."""

    def __init__(self, path: str) -> None:
        from .stores import SQLiteCheckpointer, SQLiteSession

        if not os.path.exists(path):
            raise NotFound(
                f"no database at {path}",
                hint="pass --db PATH or set LOVIA_DB (the file `lovia web --db`, `lovia demo` or your stores use), "
                "or --db postgresql://USER@HOST/DB",
            )
        self.path = self.where = path
        self.session = SQLiteSession(path, wal=True)
        self.checkpointer = SQLiteCheckpointer(path, wal=True)

    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True) as conn:
                return list(conn.execute(sql))
        except sqlite3.Error:  # no such table: the file was not written by that component
            return []

    async def leases(self) -> dict[str, float]:
        """``run_id -> expires_at`` from the checkpointer's lease table."""
        return {rid: float(exp) for rid, exp in self._rows("SELECT run_id, expires_at FROM run_leases")}

    async def web_owners(self) -> dict[str, str]:
        """Owners from the web app's ``chat_runs`` table."""
        sql = "SELECT run_id, owner FROM chat_runs WHERE status = 'running' AND owner IS NOT NULL"
        return {rid: str(owner) for rid, owner in self._rows(sql)}

    async def chat_titles(self) -> dict[str, str]:
        """Titles from the web app's ``chat_sessions`` table."""
        return {sid: title for sid, title in self._rows("SELECT id, title FROM chat_sessions")}


def shown_dsn(dsn: str) -> str:
    """``host/db`` of a PostgreSQL URL: no user, password or query parameters."""
    return dsn.split("?", 1)[0].rsplit("@", 1)[-1].split("://", 1)[-1]


class PostgresStores(Stores):
    """One PostgreSQL schema, as ``lovia web --db postgresql://... --db-schema NAME`` or the Postgres stores use it.

    Built with :meth:`open`, which checks the server and the schema before any store touches them.
    The stores are those of a :class:`~lovia.web.store.PostgresChatStore`, the web app's own.
    """

    def __init__(self, dsn: str, schema: str | None, versions: dict[str, int]) -> None:
        from .web.store import PostgresChatStore

        self.dsn, self.schema, self.versions = dsn, schema, versions
        self.where = f"{shown_dsn(dsn)} (schema {schema or 'on the search path'})"
        self.store = PostgresChatStore(dsn, schema=schema, max_size=2)
        self.session = self.store.pg_session
        self.checkpointer = self.store.pg_checkpointer

    @classmethod
    async def open(cls, dsn: str, schema: str | None) -> PostgresStores:
        """Probe the server and the schema: a clear error when it is unreachable or holds no lovia tables."""
        return cls(dsn, schema, await _probe(dsn, schema))

    def require(self, component: str) -> None:
        """Refuse to look for runs (sessions) where no checkpointer (session store) ever wrote."""
        if not self.versions.get(component):
            what = {"checkpoint": "checkpoints (runs)", "session": "sessions"}.get(component, component)
            raise NotFound(
                f"no {what} in {self.where}: its lovia tables are those of {self._present()}",
                hint="pass the --db-schema your checkpointer and session store were given",
            )

    def _present(self) -> str:
        names = {"session": "a session store", "checkpoint": "a checkpointer", "web": "the web app's chat index"}
        return ", ".join(names[c] for c in _COMPONENTS if self.versions.get(c)) or "nothing"

    async def leases(self) -> dict[str, float]:
        """Lease expiries, measured by the database clock and moved onto this host's."""
        from .stores.postgres.checkpointer import lease_rows

        if not self.versions.get("checkpoint"):
            return {}
        now = time.time()
        return {run_id: now + left for run_id, _owner, left in await lease_rows(self.checkpointer)}

    async def web_owners(self) -> dict[str, str]:
        """Owners from the chat index's ``web_runs`` table."""
        if not self.versions.get("web"):
            return {}
        sql = "SELECT run_id, owner FROM {web_runs} WHERE status = 'running' AND owner IS NOT NULL"
        return {str(rid): str(owner) for rid, owner in await self.store.fetch(sql)}

    async def chat_titles(self) -> dict[str, str]:
        """Titles from the chat index's ``web_chats`` table."""
        if not self.versions.get("web"):
            return {}
        return {meta.id: meta.title or "" for meta in await self.store.list(limit=1_000_000)}

    async def close(self) -> None:
        """Close the chat store's pools (sessions, checkpoints, index)."""
        await self.store.close()


async def _probe(dsn: str, schema: str | None) -> dict[str, int]:
    """The schema version of each lovia component in ``schema`` (0: absent); errors say what is wrong."""
    from .stores.postgres._db import describe, import_driver, validate_identifier
    from .stores.postgres._names import Names
    from .stores.postgres._schema import read_version

    psycopg, _pool = import_driver()
    names = Names(validate_identifier(schema, "--db-schema") if schema else None, "")
    shown = shown_dsn(dsn)
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=10)
    except (psycopg.Error, OSError) as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL at {shown}: {describe(exc)}",
            hint="check --db (postgresql://USER@HOST/DB, or LOVIA_DB): the host, port, database name and "
            "credentials, and that the server is running",
        ) from exc
    try:
        async with conn:
            versions = {c: await read_version(conn, c, names) for c in _COMPONENTS}
            if any(versions.values()):
                return versions
            cur = await conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'lovia_schema' ORDER BY 1"
            )
            found = [str(r[0]) for r in await cur.fetchall()]
            exists = True
            if schema:
                cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
                exists = await cur.fetchone() is not None
    except psycopg.Error as exc:
        raise StoreError(
            f"PostgreSQL at {shown} could not be read: {describe(exc)}",
            hint="check that the role may read the schema's tables",
        ) from exc
    where = f"schema {schema!r}" if schema else "the search path"
    problem = f"there is no schema {schema!r}" if not exists else f"{where} holds no lovia tables"
    close = difflib.get_close_matches(schema, found, n=3, cutoff=0.6) if schema else []  # a typo's right spelling
    ordered = close + [name for name in found if name not in close]
    known = ", ".join(ordered[:10]) + (f" and {len(ordered) - 10} more" if len(ordered) > 10 else "")
    raise NotFound(
        f"no lovia stores in {shown}: {problem}",
        hint=f"pass --db-schema NAME (or LOVIA_DB_SCHEMA): schemas with lovia tables here: {known}"
        if found
        else "pass the --db-schema your stores or `lovia web --db-schema` use; no schema here has lovia tables yet",
    )


async def open_stores(db: str, schema: str | None) -> Stores:
    """The stores behind ``--db`` (a file path or a ``postgresql://`` URL) and ``--db-schema``."""
    from .stores._dsn import is_postgres_url

    if is_postgres_url(db):
        return await PostgresStores.open(db, schema)
    if schema:
        raise UserError(
            f"--db-schema {schema} applies to a PostgreSQL --db only, and --db is the file {db}",
            hint="drop --db-schema, or pass --db postgresql://USER@HOST/DB",
        )
    return SQLiteStores(db)
