"""Token counting and budgets as lovia 0.9.119 states them: the TokenCounter heuristic, provider
estimates memoized with LRU eviction, tool-schema costs, the budget's validation and clamping,
and the runner's reactive retry not calibrating against the refused prompt."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.context import Compaction, CompactionRequest, ContextResult, TokenBudget, TokenCounter
from lovia.exceptions import ContextOverflowError
from lovia.messages import ImagePart, TextPart, Usage
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

from .helpers import SYSTEM, request


def test_heuristic_is_floor_bytes_over_four_plus_eight_per_entry():
    c = TokenCounter()
    assert c.count_entry(InputEntry(role="user", content="abcdefg")) == 7 // 4 + 8
    assert c.count_entry(InputEntry(role="user", content="界" * 5)) == 15 // 4 + 8  # UTF-8 bytes
    # a tool call: name plus arguments (its call id is not priced)
    tc = ToolCallEntry(call_id="call_with_a_long_id", name="search", arguments='{"q":"x"}')
    assert c.count_entry(tc) == len("search" + '{"q":"x"}') // 4 + 8
    # an image part is a flat image_tokens
    img = InputEntry(role="user", content=[TextPart("abcd" * 10), ImagePart(url="http://x/y.png")])
    assert c.count_entry(img) == 10 + 1_600 + 8
    assert TokenCounter(image_tokens=50).count_entry(img) == 10 + 50 + 8
    # a tool result with parts is priced by its parts; its output is not counted again
    rich = ToolResultEntry(call_id="c", output="o" * 4_000, parts=[TextPart("abcd" * 10), ImagePart(url="http://x")])
    assert c.count_entry(rich) == 10 + 1_600 + 8
    assert c.count_entry(ToolResultEntry(call_id="c", output="o" * 403)) == 100 + 8


class Estimator:
    """A provider that estimates each entry (and counts how often it is asked)."""

    def __init__(self, *, broken: bool = False) -> None:
        self.asked: list[str] = []
        self.broken = broken

    def estimate_tokens(self, entries: list[Any]) -> int:
        if self.broken:
            raise RuntimeError("no tokenizer here")
        self.asked.extend(e.content for e in entries)
        return 100 * len(entries)


def test_provider_estimates_are_memoized_per_entry_with_lru_eviction():
    provider = Estimator()
    c = TokenCounter(provider, memo_size=2)
    a, b, d = (InputEntry(role="user", content=x) for x in "abd")
    assert c.count_entry(a) == 100 and c.count_entry(b) == 100
    assert c.count_entry(a) == 100  # a hit: not asked again, and now the most recent
    c.count_entry(d)  # evicts b, the least recently used
    c.count_entry(a)
    assert provider.asked == ["a", "b", "d"]
    c.count_entry(b)
    assert provider.asked == ["a", "b", "d", "b"]
    assert c.count([a, b]) == 200
    broken = TokenCounter(Estimator(broken=True))
    assert broken.count_entry(a) == TokenCounter().count_entry(a)  # the heuristic stands in


def test_count_tools_prices_openai_schemas_by_identity():
    @tool
    def lookup(query: str, limit: int = 5) -> str:
        """Look something up."""
        return query

    schema = json.dumps(lookup.openai_schema(), separators=(",", ":"), ensure_ascii=False)
    one = len(schema.encode("utf-8")) // 4 + 8

    class Plain:
        name = "plain"

    class Raising:
        asked = 0

        def openai_schema(self) -> dict[str, Any]:
            Raising.asked += 1
            raise RuntimeError("no schema")

    c = TokenCounter()
    assert c.count_tools([]) == 0
    assert c.count_tools([lookup]) == one
    raising = Raising()
    assert c.count_tools([lookup, Plain(), raising]) == one + 8 + 8
    assert c.count_tools([raising, lookup]) == 8 + one
    assert Raising.asked == 1  # memoized by the tool object


async def test_tool_schemas_add_to_the_estimate_outside_the_calibration_ratio():
    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return query

    entries = [SYSTEM, InputEntry(role="user", content="hello " * 200)]
    policy = Compaction(context_window=100_000)
    scratch: dict[str, Any] = {"version": 1, "ratio": 2.0}
    bare = await policy.compact(request(list(entries), dict(scratch)))
    with_tools = await policy.compact(request(list(entries), dict(scratch), tools=[lookup]))
    assert with_tools.tokens_after - bare.tokens_after == TokenCounter().count_tools([lookup])


@pytest.mark.parametrize(
    "kw",
    [
        {"window": 0},
        {"window": 100, "reserve_output": -1},
        {"window": 100, "trigger": True},
        {"window": 100, "target": False},
        {"window": 100, "trigger": 0.0},
        {"window": 100, "trigger": 1.5},
        {"window": 100, "target": -0.2},
        {"window": 100, "trigger": 0, "target": 0.5},
        {"window": 100, "trigger": 0.6, "target": 0.6},
        {"window": 100, "trigger": 50, "target": 80},
    ],
)
def test_budget_rejects_bad_levels(kw):
    with pytest.raises(ValueError):
        TokenBudget(**kw)


def test_compaction_rejects_bad_settings():
    bad: list[dict[str, Any]] = [
        {"keep_recent_tokens": 0},
        {"compact_at": 1.2},
        {"compact_at": 0.5, "compact_to": 0.5},
        {"context_window": 0},
        {"reserve_output_tokens": -1},
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            Compaction(**kw)


def test_integer_levels_clamp_to_the_usable_window():
    b = TokenBudget(1_000, reserve_output=0, trigger=5_000, target=4_000)
    assert (b.usable, b.trigger_tokens, b.target_tokens) == (1_000, 1_000, 999)
    mixed = TokenBudget(1_000, reserve_output=0, trigger=0.5, target=900)  # mixed types: no order check
    assert (mixed.trigger_tokens, mixed.target_tokens) == (500, 499)
    assert TokenBudget(1, reserve_output=5, trigger=1, target=0.5).usable == 1


async def test_the_reactive_retry_does_not_pass_the_last_input_count():
    seen: list[tuple[bool, int | None]] = []

    class Recording:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            seen.append((req.overflow, req.last_input_tokens))
            return ContextResult(entries=req.entries, compacted=req.overflow)

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedProvider(
        [
            call("ping", {}, call_id="p1", usage=Usage(input_tokens=700, output_tokens=5)),
            fail(ContextOverflowError("prompt is too long")),
            text("done"),
        ]
    )
    agent = Agent(name="a", model=model, tools=[ping], context_policy=Recording())
    result = await Runner.run(agent, "go")
    assert result.output == "done"
    assert seen == [(False, None), (False, 700), (True, None)]  # the overflow pass gets no stale count
