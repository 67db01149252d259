"""Shared PostgreSQL test plumbing: the server DSN, reachability, and throwaway schemas."""

from __future__ import annotations

import os
import uuid

import pytest

DSN = os.environ.get("LOVIA_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def _reachable() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'lovia[postgres]')"
    try:
        with psycopg.connect(DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {DSN} is unreachable: {' '.join(str(exc).split())}"
    return None


UNREACHABLE = _reachable()
requires_pg = pytest.mark.skipif(UNREACHABLE is not None, reason=UNREACHABLE or "")


def new_schema(tag: str = "t") -> str:
    """A fresh schema name (created by the store on first use)."""
    return f"lovia_{tag}_{uuid.uuid4().hex[:12]}"


def drop_schema(schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
