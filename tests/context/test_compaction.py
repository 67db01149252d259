"""Compaction on long tool-heavy transcripts: views shrink, the transcript keeps every byte,
decisions are sticky (byte-stable prefixes) and survive a JSON round trip of the state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia.context import (
    ClearToolResults,
    Compaction,
    CompactionState,
    InMemoryResultStore,
    NoopContextPolicy,
    OffloadToolResults,
    TokenCounter,
    render_view,
)
from lovia.context.tokens import TokenBudget
from lovia.transcript import (
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entries_from_json,
    entries_to_json,
)

from .helpers import SYSTEM, as_json, request, text_turn, tool_turn

WINDOW = 20_000
RESERVE = 2_000  # usable 18_000: compact above 15_300, down to 10_800


def size_of(i: int) -> int:
    return 6_000 if i % 2 == 0 else 800


async def drive(
    policy: Compaction,
    turns: int,
    scratch: dict[str, Any],
    transcript: list[TranscriptEntry] | None = None,
    first: int = 0,
    **kw: Any,
):
    transcript = transcript if transcript is not None else [SYSTEM, InputEntry(role="user", content="research X")]
    views, results = [], []
    for i in range(first, first + turns):
        transcript.extend(tool_turn(i, size_of(i)))
        res = await policy.compact(request(transcript, scratch, **kw))
        views.append(as_json(res.entries))
        results.append(res)
    return transcript, views, results


def fresh_transcript(turns: int) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = [SYSTEM, InputEntry(role="user", content="research X")]
    for i in range(turns):
        out.extend(tool_turn(i, size_of(i)))
    return out


def policy(**kw: Any) -> Compaction:
    kw.setdefault("context_window", WINDOW)
    kw.setdefault("reserve_output_tokens", RESERVE)
    return Compaction(**kw)


# ---------------------------------------------------------------- construction


@pytest.mark.parametrize(
    "kw",
    [
        {"compact_at": 0.6, "compact_to": 0.6},
        {"compact_at": 0.5, "compact_to": 0.7},
        {"compact_at": 1_000, "compact_to": 2_000},
        {"compact_at": 1.5},
        {"compact_to": 0.0},
        {"compact_at": True},
        {"compact_at": -5},
        {"context_window": 0},
        {"keep_recent_tokens": -1},
    ],
)
def test_bad_settings_are_value_errors(kw):
    with pytest.raises(ValueError):
        Compaction(**kw)


def test_levels_are_fractions_of_usable_or_absolute():
    b = Compaction(compact_at=0.5, compact_to=0.25, reserve_output_tokens=10_000).budget(110_000)
    assert (b.usable, b.trigger_tokens, b.target_tokens, b.keep_recent) == (100_000, 50_000, 25_000, 20_000)
    assert b.pressure(50_000) == 0.5 and (b.trigger, b.target) == (0.5, 0.25)
    b = Compaction(compact_at=9_000, compact_to=4_000, keep_recent_tokens=700).budget(110_000)
    assert (b.trigger_tokens, b.target_tokens, b.keep_recent) == (9_000, 4_000, 700)
    agg = b.aggressive()
    assert agg.target_tokens == b.usable // 4 and agg.keep_recent == min(700, b.usable // 10)
    assert agg.trigger_tokens == b.usable  # the overflow path acts whatever the size


# ---------------------------------------------------------------- the long run


async def test_views_shrink_while_transcript_keeps_every_byte():
    scratch: dict[str, Any] = {}
    p = policy(store=InMemoryResultStore())
    transcript, views, results = await drive(p, 80, scratch)
    assert as_json(transcript) == as_json(fresh_transcript(80))  # nothing edited, nothing dropped
    counter = TokenCounter()
    raw = counter.count_all(transcript)
    assert raw > 3 * WINDOW
    assert any(r.compacted for r in results)
    for r in results:
        assert counter.count_all(r.entries) < WINDOW
    last = results[-1]
    assert counter.count_all(last.entries) <= 15_300
    assert last.changed and last.tokens_before is not None and last.tokens_after is not None
    assert last.tokens_after < last.tokens_before
    kinds = {"offload", "clear"}
    joined = " ".join(d for r in results for d in r.detail)
    assert all(k in joined for k in kinds)
    # the incremental view is exactly what the pure renderer gives for the persisted state
    assert as_json(render_view(transcript, CompactionState.load(json.loads(json.dumps(scratch))))) == views[-1]


async def test_consecutive_views_are_prefix_stable_and_decisions_never_revert():
    scratch: dict[str, Any] = {}
    _, views, results = await drive(policy(store=InMemoryResultStore()), 80, scratch)
    for t in range(1, len(views)):
        prev, cur = views[t - 1], views[t]
        if not results[t].compacted:
            assert cur[: len(prev)] == prev, f"turn {t}: prefix changed without compaction"
            continue
        for j, old in enumerate(prev):
            if old != cur[j]:  # only ever a further reduction: verbatim -> preview -> marker
                assert "cleared from context" in cur[j] or "archived" in cur[j]
                assert "cleared from context" not in old
    compactions = sum(r.compacted for r in results)
    assert 1 <= compactions <= len(results) // 4  # hysteresis: not every turn


async def test_compaction_goes_down_to_compact_to_and_waits_for_compact_at():
    scratch: dict[str, Any] = {}
    _, _, results = await drive(policy(store=InMemoryResultStore()), 80, scratch)
    for r in results:
        if r.compacted:
            assert set(r.reason.split("+")) <= {"offload", "clear"}
            assert r.detail[0].startswith("context was ") and r.detail[0].endswith("% full")
            assert r.tokens_after <= 10_800
        else:
            assert r.tokens_after <= 15_300


async def test_decisions_survive_a_json_round_trip_and_a_new_policy_instance():
    scratch: dict[str, Any] = {}
    store = InMemoryResultStore()
    transcript, views, _ = await drive(policy(store=store), 50, scratch)
    assert json.loads(json.dumps(scratch)) == scratch  # JSON-safe
    resumed_scratch = json.loads(json.dumps(scratch))
    rebuilt = entries_from_json(entries_to_json(transcript))  # new objects, as after a resume
    rebuilt.extend(tool_turn(50, 100))
    res = await policy(store=store).compact(request(rebuilt, resumed_scratch))
    got = as_json(res.entries)
    assert got[: len(views[-1])] == views[-1]
    assert not res.compacted


async def test_latest_results_and_user_message_stay_verbatim():
    scratch: dict[str, Any] = {}
    transcript, _, results = await drive(policy(store=InMemoryResultStore()), 80, scratch)
    view = results[-1].entries
    for original, shown in zip(transcript[-4:], view[-4:], strict=True):
        assert shown is original  # the protected tail is passed through as the same objects
    # every result in the view still pairs with its call, and keeps call_id / is_error
    calls = {e.call_id for e in view if isinstance(e, ToolCallEntry)}
    for e in view:
        if isinstance(e, ToolResultEntry):
            assert e.call_id in calls


async def test_markers_keep_is_error_and_mention_recall_only_with_the_tool():
    p = policy()
    transcript = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(40):
        transcript.extend(tool_turn(i, 3_000, is_error=(i == 0)))  # below the offload size: cleared
    plain = await p.compact(request(transcript, {}))
    first = plain.entries[3]
    assert isinstance(first, ToolResultEntry) and first.is_error and first.call_id == "call_0"
    assert "cleared" in first.output and "recall_tool_result" not in first.output
    recall = Compaction(context_window=WINDOW, reserve_output_tokens=RESERVE).tools()
    with_tool = await p.compact(request(list(transcript), {}, tools=recall))
    assert 'recall_tool_result(ref="call_0")' in with_tool.entries[3].output


# ---------------------------------------------------------------- window resolution and reactive path


async def test_unknown_window_only_the_reactive_path_acts():
    p = Compaction(store=InMemoryResultStore())
    transcript = fresh_transcript(60)
    quiet = await p.compact(request(transcript, {}))
    assert not quiet.compacted and not quiet.changed
    assert as_json(quiet.entries) == as_json(transcript)
    scratch: dict[str, Any] = {}
    loud = await p.compact(request(transcript, scratch, overflow=True))
    assert loud.compacted and loud.reason is not None and loud.reason.startswith("reactive_")
    assert loud.tokens_after <= loud.tokens_before // 4 + 200  # target ~25%


async def test_overflow_uses_the_reported_window_and_it_sticks():
    p = policy()  # window 20_000 explicit
    transcript = fresh_transcript(20)
    scratch: dict[str, Any] = {}
    res = await p.compact(request(transcript, scratch, overflow=True, reported_window=8_000))
    assert res.compacted
    assert list(scratch["windows"].values()) == [8_000]  # learned for this endpoint and model
    usable = TokenBudget(8_000, reserve_output=RESERVE).usable
    assert res.tokens_after <= usable // 4 + 100
    # a larger reported window never raises an explicit one
    res2 = await p.compact(request(transcript, {}, overflow=True, reported_window=500_000))
    assert res2.tokens_after <= 18_000 // 4 + 100


async def test_overflow_reports_compacted_only_when_something_was_freed():
    p = policy()
    talk: list[TranscriptEntry] = [SYSTEM]
    for i in range(10):
        talk.extend(text_turn(i, 3_000))  # nothing to clear, no provider to summarize with
    res = await p.compact(request(talk, {}, overflow=True))
    assert not res.compacted
    assert as_json(res.entries) == as_json(talk)


async def test_reactive_path_drops_protection_of_a_single_huge_result():
    p = policy()  # no result store: the preview's ref is the digest, which recall finds in the transcript
    transcript = [SYSTEM, InputEntry(role="user", content="read the file"), *tool_turn(0, 120_000)]
    res = await p.compact(request(transcript, {}, overflow=True))
    assert res.compacted and res.reason == "reactive_offload"
    shown = res.entries[-1].output
    original = transcript[-1].output
    assert shown.startswith(original[:400]) and original[:401] not in shown  # a ~400-char preview
    assert "cleared" not in shown and len(shown) < 1_000


async def test_window_comes_from_the_provider_when_not_given():
    from .helpers import WindowProvider

    p = Compaction(reserve_output_tokens=RESERVE, store=InMemoryResultStore())
    res = await p.compact(request(fresh_transcript(60), {}, provider=WindowProvider(WINDOW)))
    assert res.compacted and TokenCounter().count_all(res.entries) < WINDOW


# ---------------------------------------------------------------- estimate and calibration


async def test_calibration_follows_reported_tokens_with_ema_and_clamp():
    p = policy()
    transcript = fresh_transcript(2)
    scratch: dict[str, Any] = {}
    await p.compact(request(transcript, scratch))
    sent = scratch["pending_estimate"]
    assert scratch["ratio"] == 1.0
    await p.compact(request(transcript, scratch, last_input_tokens=2 * sent))
    assert scratch["ratio"] == pytest.approx(1.2)
    for _ in range(40):
        await p.compact(request(transcript, scratch, last_input_tokens=100 * scratch["pending_estimate"]))
    assert scratch["ratio"] == 2.5
    before = scratch["ratio"]
    await p.compact(request(transcript, scratch, last_input_tokens=1, overflow=True))
    assert scratch["ratio"] == before  # the overflow re-run never calibrates


async def test_calibrated_ratio_moves_the_trigger():
    transcript = fresh_transcript(16)  # ~ 13k heuristic tokens: below 15_300
    scratch: dict[str, Any] = {}
    p = policy()
    assert not (await p.compact(request(transcript, scratch))).compacted
    sent = scratch["pending_estimate"]
    res = await p.compact(request(transcript, scratch, last_input_tokens=int(sent * 2.5)))
    assert res.compacted  # the provider counts more tokens than the heuristic: compact earlier


async def test_a_token_estimator_provider_gives_exact_counts():
    class Exact:
        name, model = "exact", "m"

        def estimate_tokens(self, entries):
            return 10 * len(entries)

    res = await policy().compact(request(fresh_transcript(3), {}, provider=Exact()))
    assert res.tokens_after == 10 * 8


def test_token_counter_memoizes_by_identity_and_prices_images():
    from lovia.messages import ImagePart, TextPart

    c = TokenCounter(image_tokens=1_600)
    e = InputEntry(role="user", content=[TextPart("abcd" * 10), ImagePart(url="http://x/y.png")])
    assert c.count_entry(e) == 10 + 1_600 + 8
    assert c.count_entry(e) == c.count_entry(e) and c.count([e, e]) == 2 * c.count_entry(e)
    assert c.count_entry(InputEntry(role="user", content="é" * 8)) == 4 + 8  # UTF-8 bytes / 4, then the envelope


def test_token_counter_asks_a_provider_that_counts_exactly():
    class Exact:
        def count_tokens(self, entries):
            return 7 * len(entries)

    entries = [InputEntry(role="user", content="hi"), InputEntry(role="user", content="there")]
    assert TokenCounter(Exact()).count(entries) == 14
    assert TokenCounter(Exact()).count_all(entries) == TokenCounter().count_all(entries)  # the heuristic


def test_usable_tokens_keeps_half_the_window_when_the_reserve_swallows_it():
    from lovia.context.tokens import usable_tokens

    assert usable_tokens(200_000, 16_384) == 183_616
    assert usable_tokens(10_000, 16_384) == 5_000


# ---------------------------------------------------------------- custom stages and the noop policy


async def test_custom_stage_runs_and_a_broken_one_does_not_fail_the_call():
    class Boom:
        name = "boom"

        async def plan(self, body, ctx):
            raise RuntimeError("kaput")

    class ClearAll:
        name = "clear_all"

        async def plan(self, body, ctx):
            for i, e in enumerate(body):
                if isinstance(e, ToolResultEntry) and i < ctx.protected_from:
                    ctx.state.cleared.add(e.call_id)
            return True

    p = policy(stages=[Boom(), ClearAll()])
    res = await p.compact(request(fresh_transcript(40), {}))
    assert res.compacted
    assert any("boom" in d for d in res.detail)


async def test_stage_order_cheap_first_stops_when_target_is_met():
    p = policy(store=InMemoryResultStore(), stages=[OffloadToolResults(), ClearToolResults()])
    res = await p.compact(request(fresh_transcript(30), {}))
    assert res.compacted and any("offloaded" in d for d in res.detail)


async def test_noop_policy_sends_the_transcript():
    transcript = fresh_transcript(3)
    res = await NoopContextPolicy().compact(request(transcript, {}))
    assert res.entries == transcript and not res.compacted
