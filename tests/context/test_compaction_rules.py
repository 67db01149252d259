"""The compaction algorithm's rules as lovia 0.9.119 states them: stage order, the protected tail,
when a summary is asked for and kept, the usable window, the overflow path without a known
window, the summarizer's failure count, and the wording of ``ContextResult.reason``/``detail``."""

from __future__ import annotations

import json
from typing import Any

from lovia.context import (
    ClearToolResults,
    Compaction,
    CompactionState,
    OffloadToolResults,
    SummarizeHistory,
    TokenCounter,
)
from lovia.context.tokens import usable_tokens
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry, TranscriptEntry

from .helpers import GOOD_SUMMARY, SYSTEM, request, text_turn, tool_turn


def user_messages(n: int) -> list[TranscriptEntry]:
    """``n`` user messages of 100 bytes each: 100 // 4 + 8 = 33 tokens apiece."""
    return [InputEntry(role="user", content=f"message {i:03d} ".ljust(100, "x")) for i in range(n)]


def summarizer_model(*replies: str) -> ScriptedProvider:
    return ScriptedProvider([text(r) for r in replies] or [text(GOOD_SUMMARY)])


async def test_worked_example_thirty_messages_give_one_summary_and_the_last_six_verbatim():
    messages = user_messages(30)
    assert {TokenCounter().count_entry(m) for m in messages} == {33}
    policy = Compaction(context_window=1_000, reserve_output_tokens=0, compact_at=0.5, compact_to=0.3)
    model = summarizer_model()
    res = await policy.compact(request(list(messages), {}, provider=model, run_id="r1"))
    assert res.compacted and res.summary == GOOD_SUMMARY and res.reason == "summary"
    assert len(res.entries) == 7
    assert GOOD_SUMMARY in res.entries[0].content  # one summary entry ...
    assert res.entries[1:] == messages[-6:]  # ... then the last six messages, the very same objects
    assert all(r is m for r, m in zip(res.entries[1:], messages[-6:], strict=True))
    assert len(model.requests) == 1


async def test_stages_run_offload_then_clear_then_summary_until_under_target():
    transcript: list[TranscriptEntry] = [SYSTEM]
    for i in range(12):
        transcript.extend(text_turn(i, 4_000))  # talk only a summary can shrink
        transcript.extend(tool_turn(i, 6_000 if i % 2 else 800))  # big ones offload, small ones clear
    policy = Compaction(context_window=20_000, reserve_output_tokens=2_000)
    model = summarizer_model()
    res = await policy.compact(request(transcript, {}, provider=model, run_id="r1"))
    assert res.reason == "offload+clear+summary"
    joined = " | ".join(res.detail)
    assert joined.index("offloaded") < joined.index("cleared") < joined.index("summarized")
    assert res.tokens_after is not None and res.tokens_after <= int(18_000 * 0.6)

    # When offloading alone reaches the target, nothing else runs and no summary is asked for.
    light: list[TranscriptEntry] = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(6):
        light.extend(tool_turn(i, 12_000))
    model = summarizer_model()
    res = await policy.compact(request(light, {}, provider=model, run_id="r1"))
    assert res.reason == "offload" and model.requests == []


async def test_usable_is_half_the_window_only_when_the_reserve_covers_it():
    assert usable_tokens(1_000, 1_000) == 500
    assert usable_tokens(1_000, 5_000) == 500
    assert usable_tokens(1_000, 600) == 400  # below the window: window minus reserve
    assert usable_tokens(1, 1) == 1  # never below one token


async def test_overflow_without_a_known_window_still_asks_a_tripped_summarizer():
    transcript: list[TranscriptEntry] = [SYSTEM]
    for i in range(30):
        transcript.extend(text_turn(i, 800))
    scratch: dict[str, Any] = {}
    failing = summarizer_model(*["no headings"] * 3)
    policy = Compaction(reserve_output_tokens=4_000, stages=[SummarizeHistory()])  # no window anywhere
    for _ in range(4):  # proactive calls do nothing: the window is unknown
        res = await policy.compact(request(transcript, scratch, provider=failing, run_id="r1"))
        assert not res.compacted
    assert failing.requests == []
    for _ in range(3):  # three failed summaries on the overflow path trip the per-run breaker ...
        await policy.compact(request(transcript, scratch, provider=failing, run_id="r1", overflow=True))
    assert CompactionState.load(json.loads(json.dumps(scratch))).summary_failures == 3  # persisted
    # ... the proactive path then stops asking, the overflow path keeps probing.
    window = Compaction(context_window=7_000, reserve_output_tokens=0, stages=[SummarizeHistory()])
    res = await window.compact(request(transcript, scratch, provider=failing, run_id="r1"))
    assert not res.compacted and any("disabled" in d for d in res.detail)
    good = summarizer_model()
    res = await policy.compact(request(transcript, scratch, provider=good, run_id="r1", overflow=True))
    assert res.compacted and res.reason == "reactive_summary" and len(good.requests) == 1
    # budget = the refused prompt + reserve: usable is the refused prompt, target 25% of it,
    # and the tail stays within usable // 10.
    before = res.tokens_before
    assert before is not None and res.tokens_after is not None
    assert res.tokens_after <= before // 4
    tail = TokenCounter().count_all(res.entries[2:])
    assert tail <= before // 10


async def test_reason_names_replay_and_nothing_and_detail_says_how_full():
    policy = Compaction(
        context_window=20_000, reserve_output_tokens=2_000, stages=[OffloadToolResults(), ClearToolResults()]
    )
    transcript: list[TranscriptEntry] = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(8):
        transcript.extend(tool_turn(i, 12_000))
    scratch: dict[str, Any] = {}
    first = await policy.compact(request(transcript, scratch))
    assert first.compacted and first.reason == "offload"
    assert first.detail[0].startswith("context was ") and first.detail[0].endswith("% full")
    pct = int(first.detail[0].split()[2].rstrip("%"))
    assert pct == round(100 * first.tokens_before / 18_000)
    transcript.append(InputEntry(role="user", content="and now?"))
    replay = await policy.compact(request(transcript, scratch))
    assert not replay.compacted and replay.reason == "sticky_replay"
    untouched = await policy.compact(request([SYSTEM, InputEntry(role="user", content="hi")], {}))
    assert untouched.reason is None and not untouched.changed
