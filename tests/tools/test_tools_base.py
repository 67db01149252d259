"""``lovia.tools.base``: the documented helpers for running, rendering and clipping one tool call."""

from __future__ import annotations

import asyncio

import pytest

from lovia import Agent, UserError
from lovia.exceptions import BudgetExceeded
from lovia.reliability import RetryPolicy, RunBudget
from lovia.run_context import RunContext
from lovia.tools.base import (
    Tool,
    apply_tool_policies,
    clip_text,
    render_tool_result,
    run_tool,
    tool,
    truncate_tool_output,
)


def ctx() -> RunContext[None]:
    return RunContext(context=None, agent=Agent(name="a"), run_id="r1")


def test_clip_text_keeps_the_head_or_the_tail_and_says_what_was_cut():
    text = "".join(str(i % 10) for i in range(1000))
    assert clip_text(text, 2000) == (text, False)
    head, clipped = clip_text(text, 200, hint="ask for a narrower range")
    assert clipped and len(head) <= 200 and head.startswith("0123456789")
    assert "more characters cut: ask for a narrower range]" in head
    tail, clipped = clip_text(text, 200, keep_tail=True)
    assert clipped and len(tail) <= 200 and tail.endswith(text[-50:]) and tail.startswith("[...")
    tiny, clipped = clip_text(text, 5)
    assert clipped and tiny == "01234"
    assert clip_text(text, 0) == ("", True)
    with pytest.raises(ValueError):
        clip_text(text, -1)


def test_truncate_tool_output_keeps_both_ends():
    text = "A" * 500 + "Z" * 500
    out = truncate_tool_output(text, 300)
    assert len(out) <= 300 and out.startswith("A") and out.endswith("Z") and "truncated" in out
    assert truncate_tool_output("short", 300) == "short"


async def test_run_tool_uses_the_defaults_only_when_the_tool_sets_none():
    calls = {"n": 0}

    @tool
    async def flaky() -> str:
        """Fails once."""
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    assert await run_tool(flaky, {}, ctx(), default_retries=1) == "ok"

    calls["n"] = 0
    strict = tool(retries=0)(_flaky_fn(calls))
    with pytest.raises(RuntimeError, match="first attempt fails"):
        await run_tool(strict, {}, ctx(), default_retries=5)

    @tool
    async def slow() -> str:
        """Sleeps."""
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(asyncio.TimeoutError):
        await run_tool(slow, {}, ctx(), default_timeout=0.05)


def _flaky_fn(calls: dict[str, int]):
    async def flaky() -> str:
        """Fails once."""
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    return flaky


async def test_apply_tool_policies_runs_the_first_policy_outermost():
    seen: list[str] = []

    async def invoke(args, c):
        seen.append(f"invoke {args['x']}")
        return args["x"] * 2

    async def outer(inner, args, c):
        seen.append("outer")
        return await inner({**args, "x": args["x"] + 1}, c)

    async def inner_policy(inner, args, c):
        seen.append("inner")
        return await inner(args, c) + 100

    assert await apply_tool_policies(invoke, (outer, inner_policy), {"x": 1}, ctx()) == 104
    assert seen == ["outer", "inner", "invoke 2"]


async def test_render_tool_result_prefers_the_tool_renderer_then_the_default():
    plain = Tool(name="p", description="", parameters={"type": "object"}, invoke=_noop)
    assert await render_tool_result(plain, {"a": 1}, ctx()) == '{"a": 1}'
    assert await render_tool_result(plain, {"a": 1}, ctx(), default=lambda r, c: "default") == "default"
    own = Tool(
        name="o", description="", parameters={"type": "object"}, invoke=_noop, result_renderer=lambda r, c: "own"
    )
    assert await render_tool_result(own, {"a": 1}, ctx(), default=lambda r, c: "default") == "own"


async def _noop(args, c):
    return None


def test_requires_approval_and_openai_schema():
    base = {"name": "pay", "description": "Pay.", "parameters": {"type": "object"}, "invoke": _noop}
    assert Tool(**base).requires_approval({}, ctx()) is False
    assert Tool(**base, needs_approval=True).requires_approval({}, ctx()) is True
    big = Tool(**base, needs_approval=lambda args, c: args.get("amount", 0) > 100)
    assert big.requires_approval({"amount": 500}, ctx()) and not big.requires_approval({"amount": 5}, ctx())

    async def later(args, c):
        return True

    with pytest.raises(UserError) as info:
        Tool(**base, needs_approval=later).requires_approval({}, ctx())
    assert info.value.hint
    assert Tool(**base).openai_schema() == {
        "type": "function",
        "function": {"name": "pay", "description": "Pay.", "parameters": {"type": "object"}},
    }
    assert Tool(**base, strict=True).openai_schema()["function"]["strict"] is True


def test_backoff_delay_doubles_within_jitter_and_caps():
    policy = RetryPolicy(backoff_base=1.0, backoff_max=4.0)
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)):
        for _ in range(20):
            assert 0.5 * base <= policy.backoff_delay(attempt) <= 1.5 * base


def test_record_tool_call_counts_and_stops_at_the_limit():
    budget = RunBudget(max_tool_calls=2)
    budget.record_tool_call()
    budget.record_tool_call()
    with pytest.raises(BudgetExceeded) as info:
        budget.record_tool_call()
    assert budget.tool_calls == 2 and info.value.hint


# ---------------------------------------------------------------------- 0.9.119 behaviours


def test_run_context_takes_the_deps_object_as_deps():
    deps = {"tenant": "acme"}
    made = RunContext(deps=deps, agent=Agent(name="a"), run_id="r1")
    assert made.deps is deps and made.context is deps
    assert RunContext(context=deps, agent=Agent(name="a")).deps is deps  # the older keyword still works
    with pytest.raises(UserError) as info:
        RunContext(deps=deps, context={"other": 1}, agent=Agent(name="a"))
    assert info.value.hint


async def test_each_retry_attempt_gets_a_fresh_copy_of_the_arguments():
    seen: list[dict] = []

    async def consume(inner, args, c):
        seen.append(dict(args))
        args.pop("n")  # a policy that eats an argument must not take it from the next attempt
        args["extra"] = True
        raise RuntimeError("try again")

    @tool(retries=2, policies=[consume])
    async def needs_n(n: int) -> int:
        """Never reached."""
        return n

    original = {"n": 3}
    with pytest.raises(RuntimeError):
        await run_tool(needs_n, original, ctx())
    assert seen == [{"n": 3}] * 3 and original == {"n": 3}


async def test_a_renderer_that_returns_no_string_is_rendered_as_json():
    rows = Tool(
        name="rows",
        description="",
        parameters={"type": "object"},
        invoke=_noop,
        result_renderer=lambda raw, c: {"rows": [1, 2]},
    )
    assert await render_tool_result(rows, None, ctx()) == '{"rows": [1, 2]}'


def test_result_to_text_converts_values_json_cannot_hold():
    import dataclasses
    import datetime
    import decimal
    import enum
    import pathlib
    import uuid

    import pydantic

    from lovia.tools import result_to_text

    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Point:
        x: int
        when: datetime.date

    class Item(pydantic.BaseModel):
        price: decimal.Decimal
        tags: set[str]

    ident = uuid.UUID(int=7)
    value = {
        Color.RED: Color.RED,
        "point": Point(1, datetime.date(2026, 1, 2)),
        "item": Item(price=decimal.Decimal("1.50"), tags={"a"}),
        "at": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "money": decimal.Decimal("2.5"),
        "id": ident,
        "path": pathlib.PurePosixPath("/tmp/x"),
        "bytes": "héllo".encode(),
        "pair": (1, 2),
        "set": {3},
    }
    import json

    assert json.loads(result_to_text(value)) == {
        "red": "red",
        "point": {"x": 1, "when": "2026-01-02"},
        "item": {"price": "1.50", "tags": ["a"]},
        "at": "2026-01-02T03:04:05+00:00",
        "money": "2.5",
        "id": str(ident),
        "path": "/tmp/x",
        "bytes": "héllo",
        "pair": [1, 2],
        "set": [3],
    }

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    assert result_to_text({"x": Opaque()}) == "{'x': <opaque>}"  # str() of the tree, no exception


async def test_a_rendered_result_over_16000_chars_keeps_no_raw_value():
    from lovia import Runner
    from lovia.testing import ScriptedProvider, call, text
    from lovia.transcript import ToolResultEntry

    @tool
    def big(n: int) -> list[int]:
        """A long list."""
        return list(range(n))

    model = ScriptedProvider([call("big", {"n": 10}, call_id="a"), call("big", {"n": 5000}, call_id="b"), text("ok")])
    result = await Runner.run(Agent(name="a", model=model, tools=[big]), "go")
    small, large = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert small.raw == list(range(10))
    assert len(large.output) > 16_000 and "truncated" not in large.output and large.raw is None
