"""The chat index's PostgreSQL tables, now declared by the web store: a database an earlier
release created opens in place, its data kept, and a new one gets the same layout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia.exceptions import SchemaTooNewError
from lovia.web.store import PostgresChatStore
from lovia.web.store.pg_schema import WEB_MIGRATIONS
from tests.pg_support import DSN, drop_schema, new_schema, requires_pg

pytestmark = [pytest.mark.postgres, requires_pg]

FIXTURE = Path(__file__).parents[2] / "fixtures" / "postgres" / "web_v3.sql"


@pytest.fixture
def schema() -> Iterator[str]:
    name = new_schema("webschema")
    yield name
    drop_schema(name)


def _sql(statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        cur = conn.execute(statement.encode())
        return list(cur.fetchall()) if cur.description else []


def _columns(schema: str) -> list[tuple[str, str, str]]:
    return [
        (str(t), str(c), str(k))
        for t, c, k in _sql(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            f"WHERE table_schema = '{schema}' AND table_name LIKE 'web%' ORDER BY table_name, column_name"
        )
    ]


def _indexes(schema: str) -> list[str]:
    return [str(r[0]) for r in _sql(f"SELECT indexname FROM pg_indexes WHERE schemaname = '{schema}' ORDER BY 1")]


async def test_a_database_an_earlier_release_made_opens_in_place(schema: str) -> None:
    _sql(f'CREATE SCHEMA "{schema}"')
    for line in FIXTURE.read_text().splitlines():
        if line and not line.startswith("--"):
            _sql(line.replace("{schema}", f'"{schema}"'))
    store = PostgresChatStore(DSN, schema=schema)
    try:
        old = await store.get("chat_old")
        assert old is not None and (old.title, old.agent, old.pinned) == ("Kept title", "bot", True)
        assert [c.id for c in await store.list_children("chat_old")] == ["chat_task"]
        assert (await store.runs("chat_old"))["run_old"].usage == {"requests": 1}
        assert await store.get_ui_data("chat_old", "ud_old") == b"{}"
        await store.set_active_run_id("chat_old", "run_new", context={"tab": 1})  # a column step 4 added
        assert await store.get_active_context("chat_old") == {"tab": 1}
    finally:
        await store.close()
    latest = WEB_MIGRATIONS[-1]
    assert _sql(f"SELECT version, migration FROM \"{schema}\".lovia_schema WHERE store = 'web'") == [
        (latest.version, latest.name)
    ]
    fresh = new_schema("webfresh")
    try:
        made = PostgresChatStore(DSN, schema=fresh)
        await made.ids()
        await made.close()
        # The adopted database and a new one have the same tables, columns and indexes.
        assert _columns(schema) == [(t, c, k) for t, c, k in _columns(fresh)]
        assert _indexes(schema) == _indexes(fresh)
    finally:
        drop_schema(fresh)


async def test_a_database_a_newer_lovia_migrated_is_refused(schema: str) -> None:
    store = PostgresChatStore(DSN, schema=schema)
    await store.ids()
    await store.close()
    _sql(f"UPDATE \"{schema}\".lovia_schema SET version = version + 1 WHERE store = 'web'")
    again = PostgresChatStore(DSN, schema=schema)
    try:
        with pytest.raises(SchemaTooNewError) as caught:
            await again.ids()
        assert caught.value.hint
    finally:
        await again.close()
