"""Internal: the psycopg 3 connection pool of a PostgreSQL store and error mapping.

Owns: importing the optional driver (with an install hint), validating the caller's ``schema=`` /
``table_prefix=`` and turning them into quoted identifiers, opening the pool lazily on first use,
migrating the schema once per store object, and mapping every driver error to
:class:`~lovia.exceptions.StoreError` (chained). ``asyncio.CancelledError`` is never caught.

Connections run in autocommit mode: a single statement is its own transaction, and every
multi-statement write opens ``conn.transaction()`` explicitly (which also works on a caller's pool
whose connections are not in autocommit mode).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..._guard import store_hint, unencodable_key
from ...exceptions import LoviaError, StoreError, UserError
from ._names import Names

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from ._schema import Migration

__all__ = ["Database", "import_driver", "validate_identifier"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INSTALL_HINT = "install the PostgreSQL extra: pip install 'lovia[postgres]'"


def import_driver() -> tuple[Any, Any]:
    """Import ``psycopg`` and ``psycopg_pool``, or raise a :class:`UserError` naming the extra."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise UserError(f"PostgreSQL stores need psycopg 3 and psycopg-pool ({exc})", hint=_INSTALL_HINT) from exc
    return psycopg, psycopg_pool


def validate_identifier(value: str, what: str, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is a plain SQL identifier (letters, digits, ``_``; not leading digit)."""
    if allow_empty and value == "":
        return value
    if not isinstance(value, str) or not _IDENTIFIER.match(value) or len(value) > 40:
        raise UserError(
            f"{what} {value!r} is not a valid identifier",
            hint="use 1-40 letters, digits or underscores, not starting with a digit",
        )
    return value


def describe(exc: BaseException) -> str:
    """One line for a driver error (psycopg messages may span lines)."""
    return " ".join(str(exc).split()) or type(exc).__name__


class Database:
    """A store's handle on PostgreSQL: a pool (its own, opened lazily, or the caller's) plus names."""

    def __init__(
        self,
        dsn: str | None,
        *,
        pool: Any | None,
        schema: str | None,
        table_prefix: str,
        min_size: int,
        max_size: int,
        component: str,
        migrations: Sequence[Migration] | None = None,
    ) -> None:
        psycopg, psycopg_pool = import_driver()
        if (dsn is None) == (pool is None):
            raise UserError(
                "pass exactly one of dsn= or pool=",
                hint="PostgresSession('postgresql://user@host/db') or PostgresSession(pool=my_async_pool)",
            )
        if pool is not None and not isinstance(pool, psycopg_pool.AsyncConnectionPool):
            raise UserError(
                "pool= must be a psycopg_pool.AsyncConnectionPool", hint="or pass dsn= and let lovia make one"
            )
        self.names = Names(
            validate_identifier(schema, "schema") if schema is not None else None,
            validate_identifier(table_prefix, "table_prefix", allow_empty=True),
        )
        self.dsn = dsn
        self.component = component
        self._migrations = migrations
        self._psycopg = psycopg
        self._pool_cls = psycopg_pool.AsyncConnectionPool
        self._pool = pool
        self._owns_pool = pool is None
        self._sizes = (min_size, max_size)
        self._ready = False
        self._closed = False
        self._lock: asyncio.Lock | None = None

    @property
    def where(self) -> str:
        """Human description of the store for messages (never includes a password)."""
        ns = f"{self.names.schema}." if self.names.schema else ""
        return f"PostgreSQL {self.component} store ({ns}{self.names.prefix}*)"

    async def _open(self) -> Any:
        if self._closed:
            raise StoreError(f"{self.where} is closed", hint="create a new store object")
        if self._ready:
            return self._pool
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._ready:
                await self._migrate()
                if self._pool is None:
                    self._pool = await self._make_pool()
                self._ready = True
        return self._pool

    async def _migrate(self) -> None:
        from ._schema import ensure_schema

        if self._pool is not None:
            async with self._errors("migrating the schema"), self._pool.connection() as conn:
                await ensure_schema(conn, self.component, self.names, self._migrations)
            return
        # One direct connection first: an unreachable server fails fast with the driver's own
        # reason, instead of a pool retrying in the background until its timeout.
        async with self._errors("connecting"):
            conn = await self._psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        async with self._errors("migrating the schema"), conn:
            await ensure_schema(conn, self.component, self.names, self._migrations)

    async def _make_pool(self) -> Any:
        min_size, max_size = self._sizes
        pool = self._pool_cls(
            self.dsn, min_size=min_size, max_size=max_size, open=False, kwargs={"autocommit": True}, timeout=30.0
        )
        async with self._errors("opening the connection pool"):
            await pool.open(wait=False)
        return pool

    @asynccontextmanager
    async def _errors(self, doing: str) -> AsyncIterator[None]:
        try:
            yield
        except LoviaError:
            raise
        except (self._psycopg.Error, OSError) as exc:
            hint = "check that the server is reachable, the DSN and credentials, and that the role may create tables"
            if isinstance(exc, self._psycopg.DataError) and "NUL" in str(exc):
                # Only an id can carry one: entries, meta and heads travel as JSON, where NUL is escaped.
                hint = "PostgreSQL text cannot hold a NUL (\\x00) character: keep it out of session_id and run_id"
            hint = store_hint(exc, hint)
            raise StoreError(f"{self.where}: PostgreSQL error while {doing}: {describe(exc)}", hint=hint) from exc
        except UnicodeEncodeError as exc:  # content is cleaned before this point: only a key can hold it
            raise unencodable_key(exc) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg_pool"):
                raise StoreError(
                    f"{self.where}: connection pool error while {doing}: {describe(exc)}",
                    hint="the server is unreachable or the pool is exhausted; raise max_size or check the server",
                ) from exc
            raise

    async def ready(self) -> None:
        """Open the pool and migrate the schema now (otherwise done on first use)."""
        await self._open()

    @asynccontextmanager
    async def connection(self, doing: str) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection (pool opened and schema migrated on first use); errors become ``StoreError``."""
        pool = await self._open()
        async with self._errors(doing), pool.connection() as conn:
            yield conn

    @asynccontextmanager
    async def transaction(self, doing: str) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection inside one transaction (committed on success, rolled back on error)."""
        async with self.connection(doing) as conn, conn.transaction():
            yield conn

    async def close(self) -> None:
        """Close the pool if this store created it (idempotent); a caller's pool is left open."""
        if self._closed:
            return
        self._closed = True
        if self._owns_pool and self._pool is not None:
            await self._pool.close()
