"""Internal: where a PostgreSQL store's tables live, as quoted identifiers.

A leaf module: both the pool (:mod:`._db`) and the migrations (:mod:`._schema`) use it, so neither
has to import the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg.sql import Composable

__all__ = ["Names"]


@dataclass(frozen=True, slots=True)
class Names:
    """Where a store's tables live: an optional PostgreSQL schema and a table-name prefix."""

    schema: str | None
    prefix: str

    def table(self, name: str) -> Composable:
        """The (schema-qualified) quoted identifier of table ``name``."""
        from psycopg import sql

        full = self.prefix + name
        return sql.Identifier(self.schema, full) if self.schema else sql.Identifier(full)

    def plain(self, name: str) -> Composable:
        """An unqualified quoted identifier (index names live in their table's schema)."""
        from psycopg import sql

        return sql.Identifier(self.prefix + name)

    def regclass(self, name: str) -> str:
        """Text for ``to_regclass`` naming table ``name``."""
        quoted = f'"{self.prefix}{name}"'
        return f'"{self.schema}".{quoted}' if self.schema else quoted

    def lock_key(self) -> str:
        """Text hashed into the advisory lock that serialises migrations of this namespace."""
        return f"lovia-schema:{self.schema or ''}:{self.prefix}"
