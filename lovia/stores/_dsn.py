"""Internal: telling a PostgreSQL address from an SQLite path, without importing any driver."""

from __future__ import annotations

__all__ = ["is_postgres_url"]


def is_postgres_url(value: str | None) -> bool:
    """Whether ``--db`` names a PostgreSQL database rather than an SQLite file."""
    return bool(value) and str(value).startswith(("postgresql://", "postgres://"))
