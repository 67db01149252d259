"""Real SIGKILLed child processes at each persistence boundary, on PostgreSQL stores."""

from __future__ import annotations

import pytest

from lovia.testing.crash import Boundary, crash_test
from tests.pg_support import DSN, drop_schema, new_schema, requires_pg

from .crash_scenarios_pg import open_pg, pg_location

pytestmark = [pytest.mark.postgres, requires_pg]

FACTORY = "tests.run.crash_scenarios_pg:pg_scenario"


@pytest.fixture
def schemas():
    made = [new_schema("crash"), new_schema("ref")]
    yield made
    for schema in made:
        drop_schema(schema)


@pytest.mark.parametrize(
    ("boundary", "tool", "occurrence"),
    [
        (Boundary.AFTER_MODEL_SAVE, None, 2),
        (Boundary.IN_TOOL, "slow_sum", 1),
        (Boundary.AFTER_TOOL_SAVE, None, 2),
        (Boundary.AFTER_HANDOFF, None, 1),
        (Boundary.BEFORE_SESSION_APPEND, None, 1),
    ],
    ids=lambda v: getattr(v, "value", v),
)
async def test_crash_and_reissue_on_postgres(tmp_path, schemas, boundary, tool, occurrence):
    opened = []

    async def open_stores(store: str):
        session, checkpointer = open_pg(store)
        opened.extend([session, checkpointer])
        return session, checkpointer

    try:
        report = await crash_test(
            FACTORY,
            store=pg_location(schemas[0], DSN),
            reference_store=pg_location(schemas[1], DSN),
            run_id="job-1",
            boundary=boundary,
            tool=tool,
            occurrence=occurrence,
            workdir=tmp_path,
            open_stores=open_stores,
        )
    finally:
        for store in opened:
            await store.close()
    assert report.crashed.killed, report.crashed.stderr
    assert report.ok, report.problems
    assert report.resumed.result["output"] == "The total is 42."
    if boundary is Boundary.AFTER_TOOL_SAVE:
        assert report.stored_before_crash, "a tool result was stored before the kill"
    if boundary is Boundary.BEFORE_SESSION_APPEND:
        assert report.resumed.result["replayed"] and report.resumed.result["model_calls"] == 0
