"""Memory's PostgreSQL arms against the real server (each test in a throwaway schema)."""

from __future__ import annotations

import pytest

from lovia import Agent, Memory, Runner, UserError
from lovia.plugins.memory import Doc
from lovia.plugins.memory.postgres import PostgresKeywordIndex, PostgresVectorIndex
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from tests.pg_support import DSN, drop_schema, new_schema, requires_pg

pytestmark = [pytest.mark.postgres, requires_pg]


@pytest.fixture
def schema():
    name = new_schema("mem")
    yield name
    drop_schema(name)


class Fixed:
    id = "fixed-2"

    async def embed(self, texts):
        return [[1.0, 0.0] for _ in texts]


async def test_full_text_search_upserts_and_scopes(schema: str) -> None:
    ana = PostgresKeywordIndex(DSN, scope="user:ana", schema=schema)
    bo = PostgresKeywordIndex(DSN, scope="user:bo", schema=schema)
    await ana.add([Doc("1", "Deploying the billing service", 1.0, {"role": "user"}), Doc("2", "我家的猫很可爱")])
    await bo.add([Doc("1", "billing is Bo's business")])
    assert [h.doc.id for h in await ana.search("billing")] == ["1"]
    assert (await ana.search("billing"))[0].doc.meta == {"role": "user"}
    assert [h.doc.text for h in await bo.search("billing")] == ["billing is Bo's business"]  # scopes stay apart
    assert [h.doc.id for h in await ana.search("猫")] == ["2"] and [h.doc.id for h in await ana.search("可爱的猫")] == [
        "2"
    ]
    await ana.add([Doc("1", "now about gardening")])
    assert await ana.search("billing") == [] and [h.doc.id for h in await ana.search("gardening")] == ["1"]
    await ana.remove(["1"])
    assert await ana.search("gardening") == []
    assert await ana.search("'; DROP TABLE archive; --") == []


async def test_memory_recalls_from_postgres(schema: str, tmp_path) -> None:
    index = PostgresKeywordIndex(DSN, scope="agent:desk", schema=schema)
    mem = Memory(root=tmp_path, index=index, auto_curate=False, summarize_recall=False, expand_query=False)
    first = ScriptedProvider([text("Noted the printer model.")])
    await Runner.run(Agent(name="desk", model=first, plugins=[mem]), "My printer is a LaserJet 4000")
    second = ScriptedProvider([call("recall", {"query": "printer"}), text("ok")])
    result = await Runner.run(Agent(name="desk", model=second, plugins=[mem]), "which printer do I have?")
    [out] = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert "LaserJet 4000" in out


async def test_vectors_without_pgvector_are_a_clear_error(schema: str) -> None:
    import psycopg

    with psycopg.connect(DSN) as conn:
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    index = PostgresVectorIndex(DSN, Fixed(), schema=schema)
    if available:  # pragma: no cover - depends on the server
        await index.add([Doc("1", "x")])
        assert [h.doc.id for h in await index.search("x")] == ["1"]
        return
    with pytest.raises(UserError, match="pgvector") as err:
        await index.add([Doc("1", "x")])
    assert "VectorIndex" in (err.value.hint or "")


def test_bad_identifiers_are_refused() -> None:
    with pytest.raises(UserError):
        PostgresKeywordIndex(DSN, schema='x"; drop')
