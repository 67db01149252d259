"""Summaries: written by the run's own provider at temperature 0, checked for sections,
skipped when they would not pay off, and switched off per run after repeated failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia.context import (
    REQUIRED_SECTIONS,
    SUMMARY_WRAPPER,
    Compaction,
    LLMSummarizer,
    SummarizeHistory,
    SummaryFailed,
    transcript_to_text,
)
from lovia.context.stages import safe_cut
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

from .helpers import GOOD_SUMMARY, SYSTEM, RecordingProvider, as_json, request, text_turn, tool_turn

WINDOW, RESERVE = 20_000, 2_000


def chat(turns: int, size: int = 3_000) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = [SYSTEM]
    for i in range(turns):
        out.extend(text_turn(i, size))
    return out


def summarizing_policy(**kw: Any) -> Compaction:
    return Compaction(context_window=WINDOW, reserve_output_tokens=RESERVE, stages=[SummarizeHistory(**kw)])


async def test_summary_replaces_old_history_and_keeps_the_tail():
    provider = RecordingProvider()
    transcript = chat(30)  # ~ 23k tokens of plain talk: nothing to clear
    scratch: dict[str, Any] = {}
    res = await summarizing_policy().compact(request(transcript, scratch, provider=provider, run_id="r1"))
    assert res.compacted and res.summary == GOOD_SUMMARY
    assert res.entries[0] is SYSTEM
    assert res.entries[1] == InputEntry(role="user", content=SUMMARY_WRAPPER.format(summary=GOOD_SUMMARY))
    assert res.entries[-1] is transcript[-1]  # the recent tail is verbatim
    assert res.tokens_after <= 10_800
    upto = scratch["summary"]["upto"]
    assert res.entries[2:] == transcript[1 + upto :]
    assert isinstance(transcript[1 + upto], InputEntry)  # cut at a turn boundary
    (call,) = provider.calls
    assert call["settings"].temperature == 0 and call["tools"] is None
    prompt = call["entries"][0].content
    assert all(f"## {s}" in prompt for s in REQUIRED_SECTIONS)
    assert "question 0" in call["entries"][1].content


async def test_next_summary_folds_in_the_previous_one_and_view_is_stable_in_between():
    provider = RecordingProvider(replies=[GOOD_SUMMARY, GOOD_SUMMARY.replace("bullet", "newer")])
    transcript = chat(30)
    scratch: dict[str, Any] = {}
    p = summarizing_policy()
    first = await p.compact(request(transcript, scratch, provider=provider, run_id="r1"))
    transcript.extend(text_turn(99, 200))
    quiet = await p.compact(request(transcript, scratch, provider=provider, run_id="r1"))
    assert not quiet.compacted
    assert as_json(quiet.entries)[: len(first.entries)] == as_json(first.entries)
    for i in range(100, 130):
        transcript.extend(text_turn(i, 3_000))
    second = await p.compact(request(transcript, scratch, provider=provider, run_id="r1"))
    assert second.compacted and "newer" in second.summary
    assert len(provider.calls) == 2
    assert GOOD_SUMMARY in provider.calls[1]["entries"][1].content  # previous summary passed on


async def test_summary_dropped_when_savings_are_too_small():
    provider = RecordingProvider()
    res = await summarizing_policy(min_savings_ratio=0.95).compact(request(chat(30), {}, provider=provider))
    assert len(provider.calls) == 1  # asked (no guess up front), then dropped: it saves < 95%
    assert not res.compacted and res.summary is None
    assert any("discarded" in d for d in res.detail)


async def test_circuit_breaker_stops_after_max_failures_per_run():
    bad = RecordingProvider(default="I will not use headings.")
    p = summarizing_policy(max_failures=3)
    transcript = chat(30)
    scratch: dict[str, Any] = {}
    for _ in range(6):
        res = await p.compact(request(transcript, scratch, provider=bad, run_id="r1"))
        assert not res.compacted and res.summary is None
    assert len(bad.calls) == 3
    assert any("disabled" in d for d in res.detail)
    # the breaker is per run: a new run of the same session tries again
    carried = json.loads(json.dumps(scratch))
    await p.compact(request(list(transcript), carried, provider=bad, run_id="r2"))
    assert len(bad.calls) == 4


async def test_rewritten_history_resets_the_summary():
    provider = RecordingProvider()
    transcript = chat(30)
    scratch: dict[str, Any] = {}
    await summarizing_policy().compact(request(transcript, scratch, provider=provider))
    assert scratch["summary"] is not None
    rewritten = [SYSTEM, InputEntry(role="user", content="a different past"), *transcript[2:4]]
    carried = json.loads(json.dumps(scratch))
    res = await summarizing_policy().compact(request(rewritten, carried, provider=provider))
    assert carried["summary"] is None
    assert as_json(res.entries) == as_json(rewritten)


def test_llm_summarizer_rejects_missing_sections():
    s = LLMSummarizer()
    s.check(GOOD_SUMMARY)
    with pytest.raises(SummaryFailed, match="Next steps"):
        s.check(GOOD_SUMMARY.split("## Next steps")[0])
    with pytest.raises(SummaryFailed):
        s.check("")


def test_transcript_to_text_is_plain_and_clipped():
    text = transcript_to_text(
        [
            InputEntry(role="user", content="hi"),
            AssistantTextEntry(content="x" * 10_000),
            ToolCallEntry(call_id="c1", name="search", arguments='{"q":"a"}'),
            ToolResultEntry(call_id="c1", output="boom", is_error=True),
        ],
        max_chars_per_entry=100,
    )
    assert "USER: hi" in text and "TOOL CALL search [c1]" in text and "TOOL RESULT [c1] (error): boom" in text
    assert len(text) < 400 and "omitted" in text


def test_safe_cut_never_splits_a_call_from_its_result():
    body = [
        InputEntry(role="user", content="q"),
        *tool_turn(0, 10),
        *tool_turn(1, 10),
        AssistantTextEntry(content="done"),
    ]
    # index 2 is a result: cutting before it would orphan it
    assert safe_cut(body, 0, 2) == 1
    assert safe_cut(body, 0, 3) == 3
    assert safe_cut(body, 0, len(body)) == len(body)
    assert safe_cut(body, 3, 4) == 3  # nothing in (3, 4] is a clean boundary
