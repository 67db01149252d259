"""RunHead is the one declaration of a run's durable fields; RunSnapshot reads through to it."""

from __future__ import annotations

import dataclasses

import pytest

from lovia.checkpointer import RunHead, RunSnapshot
from lovia.messages import Usage
from lovia.transcript import InputEntry


def full_head() -> RunHead:
    return RunHead(
        agent_name="a",
        usage=Usage(10, 5),
        turns=3,
        status="failed",
        output={"x": 1},
        error={"type": "E", "message": "m"},
        last_input_tokens=9,
        context_state={"k": [1]},
        pending_handoff="b",
        started_calls=["c1"],
        repair_attempts=1,
        started_at=1.0,
        updated_at=2.0,
        model_usage={"v:m": Usage(10, 5)},
        trace={"trace_id": "1" * 32, "span_id": "2" * 16},
    )


def test_copy_keeps_every_field_and_shares_nothing_mutable():
    head = full_head()
    copy = head.copy()
    assert copy == head
    for f in dataclasses.fields(RunHead):  # a field added later must be copied too
        assert getattr(copy, f.name) == getattr(head, f.name), f.name
    copy.usage.add(Usage(1, 1))
    copy.context_state["k"] = []
    copy.started_calls.append("c2")
    copy.model_usage["v:m"].add(Usage(1, 1))
    assert head == full_head()


def test_started_at_defaults_to_updated_at():
    assert RunHead("a", updated_at=5.0).started_at == 5.0
    assert RunHead.from_dict({"agent_name": "a", "updated_at": 7.0}).started_at == 7.0


def test_a_snapshot_is_run_id_entries_and_head_with_the_head_fields_read_through():
    snap = RunSnapshot("r", [InputEntry("user", "hi")], head=full_head())
    assert (snap.turns, snap.status, snap.model_usage) == (3, "failed", {"v:m": Usage(10, 5)})
    snap.turns = 4
    assert snap.head.turns == 4
    flat = RunSnapshot("r", [], "a", turns=2)
    assert flat.head == RunHead("a", turns=2, started_at=flat.started_at, updated_at=flat.updated_at)
    moved = dataclasses.replace(snap, turns=9)
    assert moved.head.turns == 9 and snap.head.turns == 4 and moved.head is not snap.head
    names = [f.name for f in dataclasses.fields(RunSnapshot)]
    assert names[:3] == ["run_id", "entries", "head"] and set(names[3:]) == {
        f.name for f in dataclasses.fields(RunHead)
    }
    with pytest.raises(TypeError):
        RunSnapshot("r", [], "a", no_such_field=1)
    with pytest.raises(TypeError):
        RunSnapshot("r", [])
