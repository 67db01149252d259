"""Real SIGKILLed child processes at each persistence boundary, then re-issue and replay."""

from __future__ import annotations

import pytest

from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing.crash import Boundary, crash_test

FACTORY = "tests.run.crash_scenarios:sqlite_scenario"


async def open_sqlite(path: str):
    return SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)


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
async def test_crash_and_reissue_on_sqlite(tmp_path, boundary, tool, occurrence):
    report = await crash_test(
        FACTORY,
        store=str(tmp_path / "crash.db"),
        reference_store=str(tmp_path / "reference.db"),
        run_id="job-1",
        boundary=boundary,
        tool=tool,
        occurrence=occurrence,
        workdir=tmp_path,
        open_stores=open_sqlite,
    )
    assert report.crashed.killed, report.crashed.stderr
    assert report.ok, report.problems
    assert report.resumed.result["output"] == "The total is 42."
    if boundary is Boundary.AFTER_TOOL_SAVE:
        assert report.stored_before_crash, "a tool result was stored before the kill"
    if boundary is Boundary.BEFORE_SESSION_APPEND:
        assert report.resumed.result["replayed"] and report.resumed.result["model_calls"] == 0
