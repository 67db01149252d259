"""The carried state as lovia 0.9.119 shapes it: decisions keyed by call id, ``OffloadRecord(preview,
chars, digest)``, ``decided``/``prune``, a persisted summary rewound to a pair boundary, and the
window an overflow names replacing the learned one."""

from __future__ import annotations

import json
from typing import Any

from lovia.context import (
    ClearToolResults,
    Compaction,
    CompactionState,
    OffloadRecord,
    OffloadToolResults,
    SummaryState,
    render_view,
)
from lovia.context.state import fingerprint, result_digest
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

from .helpers import SYSTEM, request, tool_turn


def test_offload_record_and_state_fields_are_keyed_by_call_id():
    record = OffloadRecord("head of it", 5_000, "d" * 64)
    assert (record.preview, record.chars, record.digest) == ("head of it", 5_000, "d" * 64)
    state = CompactionState()
    assert state.cleared == set() and state.offloaded == {}
    state.cleared.add("c1")
    state.offloaded["c2"] = record
    assert state.decided("c1") and state.decided("c2") and not state.decided("c3")
    again = CompactionState.load(json.loads(json.dumps(_saved(state))))
    assert again.cleared == {"c1"} and again.offloaded == {"c2": record}


def _saved(state: CompactionState) -> dict[str, Any]:
    scratch: dict[str, Any] = {}
    state.save(scratch)
    return scratch


def test_prune_drops_ids_that_are_absent_or_shared():
    state = CompactionState(
        cleared={"a", "b", "dup"}, offloaded={"c": OffloadRecord("p", 9, "x"), "gone": OffloadRecord("p", 9, "y")}
    )
    state.prune(["a", "c", "dup", "dup", "other"])  # ids of the body's results, in order
    assert state.cleared == {"a"} and set(state.offloaded) == {"c"}
    state.prune({"c"})
    assert state.cleared == set() and set(state.offloaded) == {"c"}


async def test_compaction_records_call_ids_and_offload_records():
    transcript: list[TranscriptEntry] = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(24):
        transcript.extend(tool_turn(i, 6_000 if i % 2 else 800))
    policy = Compaction(
        context_window=20_000, reserve_output_tokens=2_000, stages=[OffloadToolResults(), ClearToolResults()]
    )
    scratch: dict[str, Any] = {}
    res = await policy.compact(request(transcript, scratch))
    assert res.compacted
    state = CompactionState.load(scratch)
    assert state.offloaded and all(cid.startswith("call_") for cid in state.offloaded)
    outputs = {e.call_id: e.output for e in transcript if isinstance(e, ToolResultEntry)}
    for cid, record in state.offloaded.items():
        assert record.digest == result_digest(outputs[cid]) and record.chars == len(outputs[cid])
        assert outputs[cid].startswith(record.preview)
    assert render_view(transcript, state) == res.entries


def test_a_decision_about_a_reused_call_id_is_not_applied():
    body: list[TranscriptEntry] = [
        InputEntry(role="user", content="go"),
        *tool_turn(0, 3_000),
        *tool_turn(0, 3_000),  # the same call id again (some providers reuse ids)
    ]
    state = CompactionState(cleared={"call_0"})
    assert render_view(body, state) == body  # the pure renderer leaves a shared id alone
    state.prune(e.call_id for e in body if isinstance(e, ToolResultEntry))
    assert state.cleared == set()


async def test_a_summary_ending_inside_a_pair_is_rewound_to_a_boundary():
    body: list[TranscriptEntry] = [
        InputEntry(role="user", content="q1"),
        AssistantTextEntry(content="a1"),
        InputEntry(role="user", content="q2"),
        ToolCallEntry(call_id="c1", name="f", arguments="{}"),
        ToolResultEntry(call_id="c1", output="r1"),
        AssistantTextEntry(content="done"),
    ]
    inside = SummaryState(text="S", covered=4, fingerprint=fingerprint(body[:4]))  # hides c1's call only
    scratch: dict[str, Any] = {}
    CompactionState(summary=inside).save(scratch)
    res = await Compaction(context_window=100_000).compact(request([SYSTEM, *body], scratch))
    view = res.entries
    assert "S" in view[1].content and view[2:] == body[3:]  # rewound to 3: the pair stays whole
    assert scratch["summary"]["upto"] == 3
    # The pure renderer does the same for a state loaded as it was persisted.
    assert render_view(body, CompactionState(summary=inside))[1:] == body[3:]
    # With no boundary before the cut (a pair opens the body) the summary is dropped.
    paired = [ToolCallEntry(call_id="c9", name="f", arguments="{}"), ToolResultEntry(call_id="c9", output="r")]
    early = SummaryState(text="S", covered=1, fingerprint=fingerprint(paired[:1]))
    assert render_view(paired, CompactionState(summary=early)) == paired
    scratch = {}
    CompactionState(summary=early).save(scratch)
    await Compaction(context_window=100_000).compact(request([SYSTEM, *paired], scratch))
    assert scratch["summary"] is None


async def test_a_newly_reported_window_replaces_the_learned_one_even_if_larger():
    transcript: list[TranscriptEntry] = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(6):
        transcript.extend(tool_turn(i, 6_000))
    policy = Compaction(stages=[ClearToolResults()])
    scratch: dict[str, Any] = {}
    await policy.compact(request(transcript, scratch, overflow=True, reported_window=4_000))
    assert list(scratch["windows"].values()) == [4_000]
    await policy.compact(request(transcript, scratch, overflow=True, reported_window=9_000))
    assert list(scratch["windows"].values()) == [9_000]


async def test_a_call_id_reused_later_in_the_run_drops_its_decision():
    transcript: list[TranscriptEntry] = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(40):
        transcript.extend(tool_turn(i, 3_000))
    policy = Compaction(context_window=20_000, reserve_output_tokens=2_000, stages=[ClearToolResults()])
    scratch: dict[str, Any] = {}
    first = await policy.compact(request(transcript, scratch))
    assert "call_0" in CompactionState.load(scratch).cleared
    assert "cleared" in first.entries[3].output
    transcript.extend(tool_turn(0, 50))  # a provider hands out call_0 again
    res = await policy.compact(request(transcript, scratch))
    assert res.entries[3] is transcript[3]  # shown as it is: the decision cannot tell the two apart
    assert "call_0" not in CompactionState.load(scratch).cleared
    assert render_view(transcript, CompactionState.load(scratch)) == res.entries
