"""The reference's eval page, checked from the outside.

Each test restates a behaviour the reference's eval page (and the ``lovia.eval*`` listing of its
API page) documents for cases, checks, the LLM judge, ``evaluate``, reports and baselines, and
checks lovia against it with public names only. Everything is offline: agents and judges run on
``lovia.testing.ScriptedProvider`` scripts, and the tools are real functions.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lovia import Agent, RunResult, UserError, tool
from lovia.eval import (
    Case,
    CaseResult,
    CheckResult,
    Diff,
    Report,
    SampleResult,
    Verdict,
    all_of,
    any_of,
    contains,
    equals,
    evaluate,
    llm_judge,
    matches,
    max_tokens,
    max_turns,
    no_error,
    not_contains,
    regex,
    run_check,
    tool_called,
    tool_not_called,
    weighted,
)
from lovia.messages import Usage
from lovia.providers import ModelSettings, register_provider
from lovia.testing import ScriptedProvider, call, text

# ------------------------------------------------------------------ shared pieces


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def calculator(expression: str) -> str:
    """Evaluate a product like '23.4 * 91'."""
    left, right = (float(x) for x in expression.split("*"))
    return f"{left * right:.1f}"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def verdict(score: float, reasoning: str = "fine") -> Any:
    return text(f'{{"score": {score}, "reasoning": "{reasoning}"}}')


def judge_model(*scores: float, reasoning: str = "fine") -> ScriptedProvider:
    return ScriptedProvider([verdict(s, reasoning) for s in scores])


def unused_model() -> ScriptedProvider:
    """An agent default that no case should reach: any call to it runs dry."""
    return ScriptedProvider([])


async def run_of(*turns: Any, tools: Sequence[Any] = (add, explode), output_type: Any = None) -> RunResult[Any]:
    agent: Agent[Any] = Agent(name="subject", model=ScriptedProvider(list(turns)), tools=list(tools))
    if output_type is not None:
        agent = agent.clone(output_type=output_type)
    return await agent.run("question")


# ------------------------------------------------------------------ the page's opening suite


def _haiku_agent_factory(made: list[Agent[Any]]) -> Callable[[], Agent[Any]]:
    def make() -> Agent[Any]:
        agent: Agent[Any] = Agent(
            name="poet",
            model=ScriptedProvider(
                [text("Blossoms drift and fall / warm rain wakes the sleeping seeds / the hills turn to green")]
            ),
            tools=[calculator],
        )
        made.append(agent)
        return agent

    return make


def _opening_cases(judge: ScriptedProvider) -> list[Case]:
    return [
        Case(
            "What is the capital of France?",
            checks=[contains("Paris")],
            model=ScriptedProvider([text("Paris is the capital of France.")]),
        ),
        Case(
            "What's 23.4 * 91?",
            checks=[tool_called("calculator")],
            model=ScriptedProvider([call("calculator", {"expression": "23.4 * 91"}), text("2129.4")]),
        ),
        Case(
            "Write a haiku about spring",
            checks=[llm_judge("A 5-7-5 haiku that evokes spring", model=judge)],
            samples=4,
            pass_threshold=0.75,
        ),
    ]


async def test_opening_suite_passes_when_three_of_four_haiku_samples_pass() -> None:
    made: list[Agent[Any]] = []
    judge = judge_model(0.9, 0.8, 0.3, 0.95, reasoning="syllables check out")
    report = await evaluate(_haiku_agent_factory(made), _opening_cases(judge))
    assert report.passed and report.pass_rate == 1.0
    capital, product, haiku = report.cases
    assert [c.name for c in report.cases] == [
        "What is the capital of France?",
        "What's 23.4 * 91?",
        "Write a haiku about spring",
    ]
    assert [len(c.samples) for c in report.cases] == [1, 1, 4]
    assert [s.passed for s in haiku.samples] == [True, True, False, True] and haiku.pass_rate == 0.75
    assert capital.passed and product.passed and haiku.passed
    assert len(made) == 6  # the factory is called once per sample
    lines = str(report).splitlines()
    assert re.fullmatch(r"eval: 3/3 cases passed \(100%\) · 6 samples · [\d,]+ tokens · \d+\.\ds", lines[0])
    assert len(lines) == 4
    assert lines[1].lstrip().startswith("✓ What is the capital of France?") and lines[1].endswith("1/1")
    assert lines[3].lstrip().startswith("✓ Write a haiku about spring") and lines[3].endswith("3/4")


async def test_opening_suite_fails_when_only_two_haiku_samples_pass() -> None:
    judge = judge_model(0.9, 0.55, 0.2, 0.8, reasoning="third line has eight syllables")
    report = await evaluate(_haiku_agent_factory([]), _opening_cases(judge))
    assert not report.passed
    assert report.pass_rate == pytest.approx(2 / 3)
    haiku = report.cases[2]
    assert not haiku.passed and haiku.pass_rate == 0.5
    first_line, *case_lines = str(report).splitlines()
    assert first_line.startswith("eval: 2/3 cases passed (67%) · 6 samples · ")
    failing = case_lines[2]
    assert failing.lstrip().startswith("✗ Write a haiku about spring")
    assert "2/4" in failing
    assert "llm_judge (score 0.55) — third line has eight syllables" in failing


# ------------------------------------------------------------------ cases


def test_case_defaults_match_the_table() -> None:
    case = Case("What is 2 + 3?")
    assert case.input == "What is 2 + 3?"
    assert tuple(case.checks) == ()
    assert case.name == "What is 2 + 3?"  # derived from the input
    assert (case.samples, case.pass_threshold, case.deps, case.output_type) == (1, 1.0, None, None)
    assert (case.model, case.max_turns, case.timeout, case.metadata) == (None, 50, None, {})


async def test_a_case_with_a_message_list_input_runs() -> None:
    from lovia import system, user

    case = Case(
        [system("Answer in one word."), user("Capital of Italy?")],
        checks=[equals("Rome")],
        model=ScriptedProvider([text("Rome")]),
    )
    assert isinstance(case.name, str) and case.name
    report = await evaluate(Agent(name="geo", model=unused_model()), [case])
    assert report.passed


async def test_per_case_scripted_transcript_replaces_the_agent_model() -> None:
    agent_default = unused_model()
    agent = Agent(name="calc", model=agent_default, tools=[add])
    case_model = ScriptedProvider([call("add", {"a": 2, "b": 3}), text("2 + 3 = 5")])
    case = Case("What is 2 + 3?", checks=[contains("5"), tool_called("add")], model=case_model)
    report = await evaluate(agent, [case])
    assert report.passed
    assert agent_default.calls == [] and len(case_model.calls) == 2
    [sample] = report.cases[0].samples
    assert sample.output == "2 + 3 = 5" and sample.turns == 2 and sample.error is None
    assert [c.passed for c in sample.checks] == [True, True]


async def test_deps_output_type_max_turns_and_metadata_reach_the_run() -> None:
    class Answer(BaseModel):
        value: int

    @tool
    def secret(ctx: Any) -> str:
        """Read the secret from the run's deps."""
        return str(ctx.deps["secret"])

    agent = Agent(name="a", model=unused_model(), tools=[secret])
    cases = [
        Case(
            "what is the secret?",
            name="deps",
            deps={"secret": 7},
            checks=[contains("7")],
            model=ScriptedProvider([call("secret", {}), text("the secret is 7")]),
            metadata={"owner": "qa", "tags": ["x"]},
        ),
        Case(
            "structured",
            name="typed",
            output_type=Answer,
            checks=[matches({"value": 3}), lambda r: isinstance(r.output, Answer)],
            model=ScriptedProvider([text('{"value": 3}')]),
        ),
        Case(
            "loop forever",
            name="capped",
            max_turns=1,
            model=ScriptedProvider([call("secret", {}), text("never reached")]),
        ),
    ]
    report = await evaluate(agent, cases)
    deps_case, typed, capped = report.cases
    assert deps_case.passed and deps_case.metadata == {"owner": "qa", "tags": ["x"]}
    assert typed.passed and typed.samples[0].output == Answer(value=3)
    assert not capped.passed and capped.samples[0].error  # turn cap hit: a failed sample with its error


async def test_timeout_fails_the_sample_not_the_suite() -> None:
    @tool
    async def slow() -> str:
        """Takes its time."""
        await asyncio.sleep(30)
        return "late"

    agent = Agent(name="a", model=unused_model(), tools=[slow])
    cases = [
        Case("slow one", timeout=0.2, model=ScriptedProvider([call("slow", {}), text("late")])),
        Case("fast one", checks=[contains("ok")], model=ScriptedProvider([text("ok")])),
    ]
    started = time.perf_counter()
    report = await evaluate(agent, cases)
    assert time.perf_counter() - started < 10
    slow_case, fast_case = report.cases
    assert not slow_case.passed and slow_case.samples[0].error
    assert fast_case.passed


# ------------------------------------------------------------------ checks


async def test_any_callable_is_a_check_sync_or_async_bool_or_result() -> None:
    result = await run_of(text("short answer"))

    def concise(r: RunResult[Any]) -> bool:
        return len(str(r.output)) < 400

    async def mentions_answer(r: RunResult[Any]) -> bool:
        await asyncio.sleep(0)
        return "answer" in str(r.output)

    def graded(r: RunResult[Any]) -> CheckResult:
        return CheckResult(name="graded", passed=True, score=0.8, reason="mostly good")

    assert await run_check(concise, result) == CheckResult(name="concise", passed=True)
    async_outcome = await run_check(mentions_answer, result)
    assert (async_outcome.name, async_outcome.passed) == ("mentions_answer", True)
    assert await run_check(graded, result) == CheckResult(name="graded", passed=True, score=0.8, reason="mostly good")

    def too_strict(r: RunResult[Any]) -> bool:
        return len(str(r.output)) < 3

    assert (await run_check(too_strict, result)).passed is False


async def test_a_raising_check_fails_itself_with_the_exception_as_reason() -> None:
    result = await run_of(text("anything"))

    def broken(r: RunResult[Any]) -> bool:
        raise KeyError("no such field")

    outcome = await run_check(broken, result)
    assert outcome.name == "broken" and outcome.passed is False
    assert "no such field" in outcome.reason

    report = await evaluate(
        Agent(name="a", model=unused_model()),
        [
            Case("one", name="raises", checks=[broken, contains("any")], model=ScriptedProvider([text("anything")])),
            Case("two", name="fine", checks=[contains("any")], model=ScriptedProvider([text("anything")])),
        ],
    )
    raises, fine = report.cases
    assert not raises.passed and fine.passed
    assert [c.passed for c in raises.samples[0].checks] == [False, True]
    assert raises.samples[0].error is None  # the run itself was fine


async def test_text_checks() -> None:
    result = await run_of(text("The capital is Paris, on the Seine."))
    assert (await run_check(contains("Paris"), result)).passed
    assert not (await run_check(contains("paris"), result)).passed
    assert (await run_check(contains("paris", ignore_case=True), result)).passed
    assert (await run_check(not_contains("Lyon"), result)).passed
    assert not (await run_check(not_contains("Seine"), result)).passed
    assert not (await run_check(not_contains("seine", ignore_case=True), result)).passed
    assert (await run_check(regex(r"capital is \w+"), result)).passed
    assert not (await run_check(regex(r"^Paris"), result)).passed
    assert (await run_check(regex(r"^the capital", flags=re.IGNORECASE), result)).passed
    assert (await run_check(equals("The capital is Paris, on the Seine."), result)).passed
    failed = await run_check(equals("Paris"), result)
    assert not failed.passed and failed.name


class Ticket(BaseModel):
    title: str
    tags: list[str]
    owner: dict[str, Any]


async def test_matches_is_a_recursive_subset_match_or_a_predicate() -> None:
    doc = '{"title": "Printer jam", "tags": ["hw", "urgent"], "owner": {"name": "Ana", "team": "it"}}'
    result = await run_of(text(doc), output_type=Ticket)
    assert isinstance(result.output, Ticket)

    async def check(spec: Any) -> bool:
        return (await run_check(matches(spec), result)).passed

    assert await check({"title": "Printer jam"})  # other fields ignored
    assert await check({"owner": {"name": "Ana"}})  # recursive: nested extra fields ignored too
    assert await check({"tags": ["hw", "urgent"]})
    assert not await check({"tags": ["hw"]})  # list lengths are exact
    assert not await check({"owner": {"name": "Bo"}})
    assert not await check({"title": "Printer jam", "missing": 1})
    assert await check(lambda out: "urgent" in out.tags)
    assert not await check(lambda out: out.title == "other")


async def test_tool_turn_token_and_error_checks() -> None:
    clean = await run_of(call("add", {"a": 1, "b": 2}), text("3"))
    assert (await run_check(tool_called("add"), clean)).passed
    assert not (await run_check(tool_called("explode"), clean)).passed
    assert (await run_check(tool_not_called("explode"), clean)).passed
    assert not (await run_check(tool_not_called("add"), clean)).passed
    assert clean.turns == 2
    assert (await run_check(max_turns(2), clean)).passed
    assert not (await run_check(max_turns(1), clean)).passed
    tokens = clean.usage.total_tokens
    assert tokens == clean.usage.input_tokens + clean.usage.output_tokens > 0
    assert (await run_check(max_tokens(tokens), clean)).passed
    assert not (await run_check(max_tokens(tokens - 1), clean)).passed
    assert (await run_check(no_error(), clean)).passed

    failing_tool = await run_of(call("explode", {"reason": "test"}), text("it failed, sorry"))
    assert failing_tool.output == "it failed, sorry"  # the run completed
    assert not (await run_check(no_error(), failing_tool)).passed


async def test_composition_all_any_and_weighted() -> None:
    result = await run_of(text("Paris"))
    yes, no = contains("Paris"), contains("Berlin")
    assert (await run_check(all_of(yes, contains("ari")), result)).passed
    assert not (await run_check(all_of(yes, no), result)).passed
    assert (await run_check(any_of(no, yes), result)).passed
    assert not (await run_check(any_of(no, contains("Rome")), result)).passed
    assert (await run_check(all_of(yes, name="both"), result)).name == "both"

    def graded(score: float) -> Callable[[RunResult[Any]], CheckResult]:
        def check(r: RunResult[Any]) -> CheckResult:
            return CheckResult(name=f"graded{score}", passed=score >= 0.5, score=score)

        return check

    # pass/fail children count as 1/0, graded children by their score: (3*1 + 1*0) / 4 = 0.75
    mix = await run_check(weighted({yes: 3.0, no: 1.0}), result)
    assert mix.passed and mix.score == pytest.approx(0.75)
    strict = await run_check(weighted({yes: 3.0, no: 1.0}, threshold=0.8), result)
    assert not strict.passed and strict.score == pytest.approx(0.75)
    scored = await run_check(weighted({graded(0.4): 1.0, graded(1.0): 1.0}), result)
    assert scored.score == pytest.approx(0.7) and scored.passed  # the default threshold is 0.7
    low = await run_check(weighted({graded(0.2): 1.0, yes: 1.0}), result)
    assert low.score == pytest.approx(0.6) and not low.passed


# ------------------------------------------------------------------ the LLM judge


class RecordingProvider:
    """A provider that remembers the settings and response format of each call, then replays a script."""

    def __init__(self, inner: ScriptedProvider, *, native_schema: bool) -> None:
        self.inner = inner
        self.native_schema = native_schema
        self.settings: list[ModelSettings | None] = []
        self.formats: list[dict[str, Any] | None] = []

    @property
    def name(self) -> str:
        return "recording"

    @property
    def model(self) -> str:
        return "judge-1"

    @property
    def supports_json_schema(self) -> bool:
        return self.native_schema

    async def stream(
        self, entries: Any, *, tools: Any = None, response_format: Any = None, settings: Any = None
    ) -> AsyncIterator[Any]:
        self.settings.append(settings)
        self.formats.append(response_format)
        async for delta in self.inner.stream(entries, tools=tools, response_format=response_format, settings=settings):
            yield delta


async def test_judge_passes_at_threshold_and_reports_score_and_reasoning() -> None:
    result = await run_of(text("Sorry about that! I'll send a replacement tomorrow."))
    rubric = "A polite, actionable reply that proposes a concrete next step."
    ok = await run_check(llm_judge(rubric, model=judge_model(0.7, reasoning="polite and concrete")), result)
    assert ok == CheckResult(name="llm_judge", passed=True, score=0.7, reason="polite and concrete")
    low = await run_check(llm_judge(rubric, model=judge_model(0.69, reasoning="vague")), result)
    assert (low.passed, low.score, low.reason) == (False, 0.69, "vague")
    strict = await run_check(llm_judge(rubric, model=judge_model(0.85), threshold=0.9), result)
    assert not strict.passed and strict.score == 0.85


async def test_judge_is_an_agent_with_verdict_output_at_temperature_zero() -> None:
    result = await run_of(text("Here is the plan: call them Monday."))
    provider = RecordingProvider(judge_model(0.9), native_schema=True)
    rubric = "Proposes a concrete next step"
    outcome = await run_check(llm_judge(rubric, model=provider), result)  # type: ignore[arg-type]
    assert outcome.passed and outcome.score == 0.9
    [settings] = provider.settings
    assert settings is not None and settings.temperature == 0
    [fmt] = provider.formats
    assert fmt is not None and set(fmt["schema"]["properties"]) == {"score", "reasoning"}
    prompt = provider.inner.calls[0]
    seen = "\n".join(str(m.content) for m in prompt)
    assert rubric in seen and "call them Monday" in seen


async def test_a_scripted_judge_keeps_the_suite_offline() -> None:
    agent = Agent(name="support", model=unused_model())
    case = Case(
        "My order is late",
        checks=[llm_judge("Apologizes and offers a next step", model=judge_model(0.8, reasoning="good"))],
        model=ScriptedProvider([text("Sorry! I've reshipped it; tracking follows by mail.")]),
    )
    report = await evaluate(agent, [case])
    assert report.passed
    [check] = report.cases[0].samples[0].checks
    assert (check.name, check.score, check.reason) == ("llm_judge", 0.8, "good")


def test_verdict_is_a_score_in_zero_to_one_with_reasoning() -> None:
    assert Verdict(score=0.5, reasoning="half").score == 0.5
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError):
            Verdict(score=bad, reasoning="out of range")


async def test_judge_never_falls_back_to_the_agent_under_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOVIA_EVAL_JUDGE_MODEL", raising=False)
    subject = ScriptedProvider([text("an answer"), verdict(1.0)])  # a verdict it must never be asked for
    with pytest.raises(UserError, match="no model configured"):  # refused while the suite is written
        llm_judge("anything")
    assert subject.calls == []  # the agent's model was never asked to judge


async def test_judge_model_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def factory(model: str, **_: Any) -> ScriptedProvider:
        built.append(model)
        return judge_model(0.95, reasoning="from the env judge")

    register_provider("outsiderjudge", factory)
    monkeypatch.setenv("LOVIA_EVAL_JUDGE_MODEL", "outsiderjudge:grader-2")
    result = await run_of(text("answer"))
    outcome = await run_check(llm_judge("anything"), result)
    assert built == ["grader-2"]
    assert outcome.passed and outcome.reason == "from the env judge"


# ------------------------------------------------------------------ running suites


def _hold_tool(state: dict[str, Any], key: str = "now") -> Any:
    @tool
    async def hold(label: str) -> str:
        """Stay busy for a moment, counting how many calls overlap."""
        state[key] = state.get(key, 0) + 1
        state["peak"] = max(state.get("peak", 0), state[key])
        await asyncio.sleep(0.05)
        state[key] -= 1
        return label

    return hold


def _busy_cases(n: int) -> list[Case]:
    return [
        Case(
            f"case {i}",
            checks=[contains(f"done {i}")],
            model=ScriptedProvider([call("hold", {"label": str(i)}), text(f"done {i}")]),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(("kwargs", "peak"), [({}, 4), ({"concurrency": 2}, 2), ({"concurrency": 1}, 1)])
async def test_concurrency_bounds_the_cases_in_flight(kwargs: dict[str, Any], peak: int) -> None:
    state: dict[str, Any] = {}
    agent = Agent(name="busy", model=unused_model(), tools=[_hold_tool(state)])
    report = await evaluate(agent, _busy_cases(9), **kwargs)
    assert report.passed and len(report.cases) == 9
    assert state["peak"] == peak
    assert [c.name for c in report.cases] == [f"case {i}" for i in range(9)]  # input order kept


async def test_samples_of_a_case_run_one_after_another() -> None:
    state: dict[str, Any] = {}
    hold = _hold_tool(state)

    def make() -> Agent[Any]:
        return Agent(name="busy", model=ScriptedProvider([call("hold", {"label": "x"}), text("done")]), tools=[hold])

    report = await evaluate(make, [Case("only case", samples=5, checks=[contains("done")])])
    assert report.passed and len(report.cases[0].samples) == 5
    assert state["peak"] == 1


async def test_checks_of_one_sample_run_concurrently() -> None:
    first, second = asyncio.Event(), asyncio.Event()

    async def waits_for_second(r: RunResult[Any]) -> bool:
        first.set()
        await asyncio.wait_for(second.wait(), 5)
        return True

    async def waits_for_first(r: RunResult[Any]) -> bool:
        second.set()
        await asyncio.wait_for(first.wait(), 5)
        return True

    case = Case("x", checks=[waits_for_second, waits_for_first], model=ScriptedProvider([text("y")]))
    report = await evaluate(Agent(name="a", model=unused_model()), [case])
    assert report.passed


async def test_a_ready_agent_is_reused_across_samples() -> None:
    agent = Agent(name="once", model=ScriptedProvider([text("first and only")]))
    report = await evaluate(agent, [Case("q", samples=2, checks=[contains("first")])])
    first, second = report.cases[0].samples
    assert first.passed and first.error is None
    assert not second.passed and "ran out of canned responses" in (second.error or "")
    assert second.checks == []  # a run that raised never reaches its checks
    assert report.cases[0].pass_rate == 0.5 and not report.passed


async def test_a_case_model_gives_each_sample_a_clone() -> None:
    made: list[Agent[Any]] = []

    def make() -> Agent[Any]:
        made.append(Agent(name="base", model=unused_model()))
        return made[-1]

    case = Case("q", checks=[contains("hi")], model=ScriptedProvider([text("hi")]))
    report = await evaluate(make, [case])
    assert report.passed and len(made) == 1
    assert made[0].model is not case.model  # the factory's agent was cloned, not changed


async def test_errors_are_data_and_the_suite_completes() -> None:
    agent = Agent(name="a", model=unused_model(), tools=[add])
    cases = [
        Case("runs dry", model=ScriptedProvider([call("add", {"a": 1, "b": 1})])),
        Case("fine", checks=[equals("ok")], model=ScriptedProvider([text("ok")])),
    ]
    report = await evaluate(agent, cases)
    dry, fine = report.cases
    assert not dry.passed and dry.samples[0].error and not dry.samples[0].passed
    assert fine.passed and fine.samples[0].error is None


async def test_fail_fast_runs_in_order_and_stops_after_the_first_failing_case() -> None:
    state: dict[str, Any] = {}
    agent = Agent(name="busy", model=unused_model(), tools=[_hold_tool(state)])
    third_model = ScriptedProvider([call("hold", {"label": "3"}), text("done 3")])
    cases = [
        Case(
            "first", checks=[contains("done")], model=ScriptedProvider([call("hold", {"label": "1"}), text("done 1")])
        ),
        Case("second", checks=[contains("done")], model=ScriptedProvider([call("hold", {"label": "2"}), text("nope")])),
        Case("third", checks=[contains("done")], model=third_model),
    ]
    report = await evaluate(agent, cases, fail_fast=True)
    assert [c.name for c in report.cases] == ["first", "second"]
    assert [c.passed for c in report.cases] == [True, False]
    assert third_model.calls == [] and state["peak"] == 1


async def test_fail_fast_false_runs_every_case() -> None:
    agent = Agent(name="a", model=unused_model())
    cases = [
        Case("bad", checks=[contains("x")], model=ScriptedProvider([text("no")])),
        Case("good", checks=[contains("x")], model=ScriptedProvider([text("x")])),
    ]
    report = await evaluate(agent, cases, fail_fast=False)
    assert [c.passed for c in report.cases] == [False, True]


async def test_price_turns_usage_into_cost() -> None:
    seen: list[Usage] = []

    def price(u: Usage) -> float:
        seen.append(u)
        return u.input_tokens * 3e-6 + u.output_tokens * 15e-6

    agent = Agent(name="a", model=unused_model())
    cases = [Case(f"q{i}", model=ScriptedProvider([text("an answer of some length")])) for i in range(2)]
    report = await evaluate(agent, cases, price=price)
    samples = [s for c in report.cases for s in c.samples]
    assert len(seen) == 2
    for sample in samples:
        assert sample.usage.total_tokens > 0
        assert sample.cost == pytest.approx(sample.usage.input_tokens * 3e-6 + sample.usage.output_tokens * 15e-6)
    total = sum(s.cost or 0.0 for s in samples)
    assert f"· ${total:.4f}" in str(report).splitlines()[0]
    unpriced = await evaluate(agent, [Case("q", model=ScriptedProvider([text("a")]))])
    assert unpriced.cases[0].samples[0].cost is None and "$" not in str(unpriced)


async def test_a_single_case_is_accepted() -> None:
    report = await evaluate(Agent(name="a", model=unused_model()), Case("q", model=ScriptedProvider([text("ok")])))
    assert len(report.cases) == 1 and report.passed


async def test_sample_result_records_output_usage_latency_and_turns() -> None:
    @tool
    async def pause() -> str:
        """Wait a little."""
        await asyncio.sleep(0.05)
        return "rested"

    agent = Agent(name="a", model=unused_model(), tools=[pause])
    case = Case("q", checks=[contains("rested")], model=ScriptedProvider([call("pause", {}), text("rested well")]))
    report = await evaluate(agent, [case])
    [sample] = report.cases[0].samples
    assert isinstance(sample, SampleResult)
    assert sample.output == "rested well" and sample.turns == 2
    assert sample.usage.total_tokens > 0 and sample.latency >= 0.05
    assert sample.cost is None and sample.error is None and sample.passed
    assert [c.name for c in sample.checks] and all(isinstance(c, CheckResult) for c in sample.checks)


# ------------------------------------------------------------------ reports and baselines


def _sample(passed: bool) -> SampleResult:
    return SampleResult(checks=[CheckResult(name="c", passed=passed)])


def _case(name: str, *passes: bool, threshold: float = 1.0) -> CaseResult:
    return CaseResult(name=name, samples=[_sample(p) for p in passes], pass_threshold=threshold)


def test_pass_rates_and_the_unbiased_pass_at_k() -> None:
    case = _case("c", True, False, True, False)
    assert case.pass_rate == 0.5 and not case.passed
    assert case.pass_at_k(1) == pytest.approx(0.5)
    assert case.pass_at_k(2) == pytest.approx(1 - 1 / 6)  # 1 - C(2,2)/C(4,2)
    assert case.pass_at_k(3) == pytest.approx(1.0)  # any 3 of 4 include a pass
    assert _case("none", False, False).pass_at_k(1) == 0.0
    assert _case("all", True, True).pass_at_k(2) == 1.0
    assert _case("lenient", True, False, threshold=0.5).passed
    report = Report(cases=[_case("a", True), _case("b", False), _case("c", True), _case("d", True)])
    assert not report.passed and report.pass_rate == 0.75
    assert Report(cases=[_case("a", True)]).passed


def test_sample_passes_only_without_error_and_with_every_check() -> None:
    assert SampleResult(checks=[CheckResult("a", True), CheckResult("b", True)]).passed
    assert not SampleResult(checks=[CheckResult("a", True), CheckResult("b", False)]).passed
    assert not SampleResult(error="RuntimeError: boom").passed


async def test_save_load_and_compare_with_a_baseline(tmp_path: Path) -> None:
    def suite(geo: str, math_answer: str) -> list[Case]:
        return [
            Case("Capital of Norway?", checks=[contains("Oslo")], model=ScriptedProvider([text(geo)])),
            Case("2 + 2?", name="sum", checks=[contains("4")], model=ScriptedProvider([text(math_answer)])),
        ]

    agent = Agent(name="geo", model=unused_model())
    baseline_path = tmp_path / "eval-baseline.json"
    good = await evaluate(agent, suite("Oslo.", "5"))
    good.save(baseline_path)
    loaded = Report.load(baseline_path)
    assert [(c.name, c.passed) for c in loaded.cases] == [("Capital of Norway?", True), ("sum", False)]
    assert loaded.pass_rate == good.pass_rate
    assert loaded.cases[0].samples[0].output == "Oslo."

    current = await evaluate(agent, suite("Bergen, I think.", "4"))
    diff = current.compare(Report.load(baseline_path))
    assert isinstance(diff, Diff)
    assert diff.regressions == ["Capital of Norway?"] and diff.improvements == ["sum"]
    assert diff.added == [] and diff.removed == []
    assert not diff.ok and not diff
    printed = str(diff)
    assert "Capital of Norway?" in printed and "sum" in printed

    same = good.compare(loaded)
    assert same.ok and same and same.regressions == []


def test_added_removed_and_improved_cases_do_not_fail_the_diff() -> None:
    baseline = Report(cases=[_case("kept", False), _case("dropped", True)])
    current = Report(cases=[_case("kept", True), _case("new", False)])
    diff = current.compare(baseline)
    assert diff.improvements == ["kept"] and diff.added == ["new"] and diff.removed == ["dropped"]
    assert diff.regressions == [] and diff.ok and bool(diff)


def test_duplicate_case_names_are_an_error_when_comparing() -> None:
    twice = Report(cases=[_case("same", True), _case("same", False)])
    once = Report(cases=[_case("same", True)])
    with pytest.raises(ValueError, match="same"):
        twice.compare(once)
    with pytest.raises(ValueError, match="same"):
        once.compare(twice)


def test_report_dict_round_trip() -> None:
    report = Report(
        cases=[
            CaseResult(
                name="c",
                samples=[
                    SampleResult(
                        checks=[CheckResult("x", False, 0.25, "why")],
                        output={"k": [1, 2]},
                        turns=3,
                        usage=Usage(input_tokens=5, output_tokens=7),
                        latency=0.5,
                        cost=0.01,
                        error=None,
                    )
                ],
                pass_threshold=0.5,
                metadata={"m": 1},
            )
        ]
    )
    back = Report.from_dict(report.to_dict())
    [case] = back.cases
    [sample] = case.samples
    assert (case.name, case.pass_threshold, case.metadata) == ("c", 0.5, {"m": 1})
    assert sample.checks == [CheckResult("x", False, 0.25, "why")]
    assert (sample.output, sample.turns, sample.latency, sample.cost) == ({"k": [1, 2]}, 3, 0.5, 0.01)
    assert (sample.usage.input_tokens, sample.usage.output_tokens) == (5, 7)
    assert back.passed == report.passed is False


# ------------------------------------------------------------------ beyond the reference page
# The reference's eval page has no command line and no resume; these follow lovia's own eval page.


SUITE_FILE = """
from lovia import Agent
from lovia.eval import Case, contains
from lovia.testing import ScriptedProvider, text

SUITE = "outsider"
agent = Agent(name="support", instructions="Answer billing questions briefly.")
ANSWER = {answer!r}
cases = [
    Case("How do I get a refund?", name="refund", checks=[contains("refund")],
         model=lambda: ScriptedProvider([text(ANSWER)])),
    Case("Hello", name="greeting", checks=[contains("Hi")], model=lambda: ScriptedProvider([text("Hi there")])),
]
"""


def test_the_eval_command_writes_json_and_junit_and_sets_the_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import xml.etree.ElementTree as ET

    from lovia.cli import main

    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "support.py"
    suite.write_text(SUITE_FILE.format(answer="Open Billing and choose refund."))
    common = ["eval", str(suite), "--no-checkpoint", "--quiet"]
    assert main([*common, "--json", "out/r.json", "--junit", "out/j.xml", "--save-baseline", "base.json"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("eval: 2/2 cases passed (100%)")
    saved = Report.load(tmp_path / "out" / "r.json")
    assert [c.name for c in saved.cases] == ["refund", "greeting"] and saved.passed
    assert json.loads((tmp_path / "out" / "r.json").read_text())["passed"] is True
    junit = ET.parse(tmp_path / "out" / "j.xml").getroot()
    cases = list(junit.iter("testcase"))
    assert [tc.get("name") for tc in cases] == ["refund", "greeting"]
    assert all(tc.find("failure") is None for tc in cases)

    suite.write_text(SUITE_FILE.format(answer="Please call us."))
    assert main([*common, "--junit", "out/j2.xml"]) == 1  # a failing case
    failed = [
        tc.get("name")
        for tc in ET.parse(tmp_path / "out" / "j2.xml").getroot().iter("testcase")
        if tc.find("failure") is not None
    ]
    assert failed == ["refund"]
    assert main([*common, "--baseline", "base.json"]) == 1  # it passed in the baseline: a regression
    assert "refund" in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "missing.py")]) == 2  # a usage error
    assert main([*common, "--baseline", "no-such-baseline.json"]) == 2


async def test_an_interrupted_checkpointed_suite_resumes_where_it_stopped(tmp_path: Path) -> None:
    from lovia import SQLiteCheckpointer

    gate: dict[str, Any] = {}

    @tool
    async def work(step: int) -> str:
        """Do one step; the third one interrupts the whole suite the first time."""
        if step == 3 and "task" in gate:
            gate.pop("task").cancel()
            await asyncio.sleep(30)
        return f"step {step} done"

    def suite(models: dict[int, ScriptedProvider]) -> list[Case]:
        return [Case(f"step {i}", checks=[contains("done")], model=models[i]) for i in (1, 2, 3)]

    def fresh_models() -> dict[int, ScriptedProvider]:
        return {i: ScriptedProvider([call("work", {"step": i}), text(f"step {i} done")]) for i in (1, 2, 3)}

    agent = Agent(name="worker", model=unused_model(), tools=[work])
    checkpointer = SQLiteCheckpointer(str(tmp_path / "eval.db"))
    try:
        task = asyncio.ensure_future(
            evaluate(agent, suite(fresh_models()), concurrency=1, checkpointer=checkpointer, suite="steps")
        )
        gate["task"] = task
        with pytest.raises(asyncio.CancelledError):
            await task

        second = fresh_models()
        report = await evaluate(agent, suite(second), concurrency=1, checkpointer=checkpointer, suite="steps")
        assert report.passed
        assert [c.samples[0].resumed for c in report.cases] == [True, True, False]
        assert second[1].calls == [] and second[2].calls == [] and second[3].calls  # only the unfinished one ran

        third = fresh_models()
        again = await evaluate(agent, suite(third), concurrency=1, checkpointer=checkpointer, suite="steps")
        assert [c.samples[0].resumed for c in again.cases] == [False, False, False]  # a finished suite starts over
        assert all(len(m.calls) == 2 for m in third.values())
    finally:
        await checkpointer.close()
