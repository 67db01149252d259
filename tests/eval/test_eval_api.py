"""lovia.eval in process: checks, the judge, evaluate's semantics, reports and baselines."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lovia import Agent, tool
from lovia.eval import (
    Case,
    CaseResult,
    CheckResult,
    Report,
    SampleResult,
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
from lovia.exceptions import UserError
from lovia.result import RunResult
from lovia.stores import SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, text


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def broken(x: int) -> int:
    """Fails."""
    raise RuntimeError("nope")


class Ticket(BaseModel):
    title: str
    tags: list[str]
    priority: int


async def _run(turns: list[Any], **agent_kw: Any) -> RunResult[Any]:
    from lovia import Runner

    agent = Agent(name="t", model=ScriptedProvider(turns), tools=[add, broken], **agent_kw)
    return await Runner.run(agent, "question")


async def test_builtin_checks_pass_and_fail_with_reasons() -> None:
    result = await _run([call("add", {"a": 2, "b": 3}), text("The answer is 5.")])
    expectations = [
        (contains("5"), True),
        (contains("ANSWER", ignore_case=True), True),
        (contains("ANSWER"), False),
        (not_contains("6"), True),
        (regex(r"answer is \d+"), True),
        (regex(r"^\d+$"), False),
        (equals("The answer is 5."), True),
        (tool_called("add"), True),
        (tool_called("broken"), False),
        (tool_not_called("broken"), True),
        (max_turns(2), True),
        (max_turns(1), False),
        (max_tokens(4), True),  # two calls, 1 + 1 tokens each
        (max_tokens(3), False),
        (no_error(), True),
    ]
    for check, want in expectations:
        got = await run_check(check, result)
        assert got.passed is want, (check, got)
        assert bool(got.reason) is (not want), got
    missing = await run_check(tool_called("broken"), result)
    assert missing.reason == "broken not called (called: add)"


async def test_no_error_sees_failed_tool_calls() -> None:
    result = await _run([call("broken", {"x": 1}), text("sorry")])
    got = await run_check(no_error(), result)
    assert not got.passed and "1 tool call(s) failed" in got.reason


async def test_matches_is_a_recursive_subset_match() -> None:
    result = await _run([text('{"title": "Login bug", "tags": ["auth", "web"], "priority": 2}')], output_type=Ticket)
    assert (await run_check(matches({"title": "Login bug", "tags": ["auth", "web"]}), result)).passed
    short = await run_check(matches({"tags": ["auth"]}), result)
    assert not short.passed and "expected a list of 1" in short.reason
    wrong = await run_check(matches({"priority": 3}), result)
    assert not wrong.passed and wrong.reason == ".priority: 2 != 3"
    assert (await run_check(matches(lambda t: t.priority < 3), result)).passed


async def test_custom_checks_composition_and_a_raising_check() -> None:
    result = await _run([text("short answer")])

    def concise(r: RunResult[Any]) -> bool:
        return len(r.output) < 20

    async def graded(r: RunResult[Any]) -> CheckResult:
        return CheckResult(name="graded", passed=True, score=0.5)

    def explodes(r: RunResult[Any]) -> bool:
        raise KeyError("missing")

    assert (await run_check(concise, result)) == CheckResult(name="concise", passed=True)
    boom = await run_check(explodes, result)
    assert not boom.passed and boom.reason == "check raised KeyError: 'missing'"
    assert not (await run_check(all_of(concise, contains("long")), result)).passed
    assert (await run_check(any_of(contains("long"), concise), result)).passed
    w = await run_check(weighted({concise: 1.0, graded: 1.0, contains("long"): 2.0}, threshold=0.3), result)
    assert w.score == pytest.approx((1.0 + 0.5 + 0.0) / 4) and w.passed
    assert not (await run_check(weighted({contains("long"): 1.0, concise: 1.0}), result)).passed
    with pytest.raises(UserError):
        weighted({})


async def test_llm_judge_with_a_scripted_model() -> None:
    result = await _run([text("I cannot help, sorry.")])
    judge_model = ScriptedProvider([text('{"score": 0.4, "reasoning": "curt"}')])
    got = await run_check(llm_judge("A warm refusal", model=judge_model, threshold=0.5), result)
    assert got == CheckResult(name="llm_judge", passed=False, score=0.4, reason="curt")
    prompt = judge_model.calls[0][-1].content
    assert "A warm refusal" in prompt and "I cannot help, sorry." in prompt and "question" in prompt


async def test_llm_judge_never_falls_back_to_the_agent_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOVIA_EVAL_JUDGE_MODEL", raising=False)
    with pytest.raises(UserError, match="no model configured") as info:  # at once, before any run
        llm_judge("anything")
    assert "LOVIA_EVAL_JUDGE_MODEL" in (info.value.hint or "")


async def test_evaluate_errors_timeouts_and_samples_are_data() -> None:
    def agent() -> Agent[Any]:
        return Agent(name="a", tools=[add])

    cases = [
        Case("ok", checks=[contains("fine")], model=lambda: ScriptedProvider([text("fine")])),
        Case("dry", name="dry", model=lambda: ScriptedProvider([])),
        Case("slow", timeout=0.05, model=lambda: ScriptedProvider([text("late", delay=0.05)])),
        Case(
            "flaky",
            samples=4,
            pass_threshold=0.5,
            checks=[contains("yes")],
            model=_alternating(),
        ),
    ]
    report = await evaluate(agent, cases)
    ok, dry, slow, flaky = report.cases
    assert ok.passed and ok.samples[0].turns == 1 and ok.samples[0].usage.total_tokens > 0
    assert not dry.passed and "ran out" in (dry.samples[0].error or "")
    assert not slow.passed and slow.samples[0].error == "timed out after 0.05s"
    assert flaky.pass_rate == 0.5 and flaky.passed
    assert flaky.pass_at_k(1) == pytest.approx(0.5) and flaky.pass_at_k(3) == 1.0
    assert flaky.pass_at_k(2) == pytest.approx(5 / 6)
    assert dry.pass_at_k(1) == 0.0
    with pytest.raises(ValueError):
        flaky.pass_at_k(0)
    assert not report.passed and report.pass_rate == 0.5
    text_report = str(report)
    assert text_report.startswith("eval: 2/4 cases passed (50%) · 7 samples")
    assert re.search(r"✗ slow\s+0/1  error: timed out after 0.05s", text_report)


def _alternating() -> Any:
    count = {"n": 0}

    def make() -> ScriptedProvider:
        count["n"] += 1
        return ScriptedProvider([text("yes" if count["n"] % 2 else "no")])

    return make


async def test_concurrency_is_bounded_across_cases() -> None:
    live = {"now": 0, "peak": 0}

    @tool
    async def work() -> str:
        """Hold a slot."""
        live["now"] += 1
        live["peak"] = max(live["peak"], live["now"])
        await asyncio.sleep(0.02)
        live["now"] -= 1
        return "done"

    cases = [
        Case(f"c{i}", model=lambda: ScriptedProvider([call("work", {}), text("ok")]), checks=[contains("ok")])
        for i in range(9)
    ]
    report = await evaluate(lambda: Agent(name="w", tools=[work]), cases, concurrency=3)
    assert report.passed and live["peak"] == 3


async def test_fail_fast_stops_after_the_first_failing_case() -> None:
    cases = [
        Case(f"c{i}", checks=[contains("ok")], model=lambda i=i: ScriptedProvider([text("ok" if i != 1 else "no")]))
        for i in range(4)
    ]
    report = await evaluate(Agent(name="a"), cases, fail_fast=True)
    assert [c.name for c in report.cases] == ["c0", "c1"]


async def test_price_and_cost_in_the_report() -> None:
    cases = [Case("a", model=lambda: ScriptedProvider([text("hi", usage=_usage(100, 10))]))]
    report = await evaluate(Agent(name="a"), cases, price=lambda u: u.input_tokens * 1e-6 + u.output_tokens * 2e-6)
    assert report.cases[0].samples[0].cost == pytest.approx(120e-6)
    assert "· $0.0001" in str(report)


def _usage(i: int, o: int) -> Any:
    from lovia.messages import Usage

    return Usage(input_tokens=i, output_tokens=o)


async def test_checkpointed_suite_replays_finished_samples(tmp_path: Path) -> None:
    cp = SQLiteCheckpointer(str(tmp_path / "e.db"))
    providers: dict[str, list[ScriptedProvider]] = {}

    def model(name: str, answer: str) -> Any:
        def make() -> ScriptedProvider:
            provider = ScriptedProvider([text(answer)])
            providers.setdefault(name, []).append(provider)
            return provider

        return make

    judge = llm_judge("says ok", model=model("judge", '{"score": 1.0, "reasoning": "fine"}'))
    cases = [
        Case("good", checks=[contains("ok"), judge], model=model("good", "ok")),
        Case("bad", checks=[contains("ok")], model=model("bad", "no")),
        Case("later", checks=[contains("ok")], model=model("later", "ok")),
    ]
    # fail_fast stops at "bad": the suite did not finish, so its checkpoints stay.
    partial = await evaluate(Agent(name="a"), cases, checkpointer=cp, suite="s", fail_fast=True)
    assert [c.name for c in partial.cases] == ["good", "bad"]
    assert len(await cp.list_runs(limit=10)) == 3  # good, its judge, bad

    full = await evaluate(Agent(name="a"), cases, checkpointer=cp, suite="s")
    assert [c.passed for c in full.cases] == [True, False, True]
    good, bad, later = (c.samples[0] for c in full.cases)
    assert good.resumed and bad.resumed and not later.resumed
    assert good.checks[1] == CheckResult(name="llm_judge", passed=True, score=1.0, reason="fine")
    # The second pass asked no model again for finished runs, the judge included.
    assert [len(p.calls) for p in providers["good"]] == [1, 0]
    assert [len(p.calls) for p in providers["judge"]] == [1, 0]
    assert [len(p.calls) for p in providers["later"]] == [1]
    assert await cp.list_runs(limit=10) == []  # a finished suite cleans up
    await cp.close()


def test_report_round_trip_compare_and_duplicate_names(tmp_path: Path) -> None:
    def case(name: str, passed: bool) -> CaseResult:
        return CaseResult(name=name, samples=[SampleResult(checks=[CheckResult(name="c", passed=passed)])])

    baseline = Report(cases=[case("a", True), case("b", False), case("gone", True)])
    baseline.save(tmp_path / "b.json")
    loaded = Report.load(tmp_path / "b.json")
    assert [(c.name, c.passed) for c in loaded.cases] == [("a", True), ("b", False), ("gone", True)]
    current = Report(cases=[case("a", False), case("b", True), case("new", True)])
    diff = current.compare(loaded)
    assert (diff.regressions, diff.improvements, diff.added, diff.removed) == (["a"], ["b"], ["new"], ["gone"])
    assert not diff.ok and not diff
    assert Report(cases=[case("b", True)]).compare(loaded).ok
    with pytest.raises(UserError, match="duplicate case name"):
        Report(cases=[case("x", True), case("x", True)]).compare(loaded)
    with pytest.raises(UserError):
        Report.load(tmp_path / "missing.json")
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(UserError):
        Report.load(tmp_path / "junk.json")


def test_case_validation_and_names() -> None:
    assert Case("What is the capital of France?").name == "What is the capital of France?"
    assert len(Case("x" * 200).name) == 48
    with pytest.raises(UserError):
        Case("x", samples=0)
    with pytest.raises(UserError):
        Case("x", pass_threshold=1.5)


async def test_a_judge_that_answers_garbage_fails_only_its_check() -> None:
    result = await _run([text("fine answer")])
    garbage = ScriptedProvider([text("not json"), text("still not json"), text("nope"), text("no")])
    got = await run_check(llm_judge("anything", model=garbage), result)
    assert not got.passed and got.reason.startswith("check raised ")
    assert got.score is None


def test_cli_rejects_a_bad_concurrency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lovia.cli import main

    suite = Path(__file__).with_name("suite_math.py")
    assert main(["eval", str(suite), "--concurrency", "0", "--no-checkpoint"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err


# ---------------------------------------------------------------------- 0.9.119 behaviours


def test_bad_numbers_are_value_errors() -> None:
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError):
            weighted({contains("x"): 1.0}, threshold=bad)
        with pytest.raises(ValueError):
            llm_judge("rubric", model="openai:judge", threshold=bad)
    for timeout in (0, -1.0):
        with pytest.raises(ValueError) as info:
            Case("x", timeout=timeout)
        assert isinstance(info.value, UserError) and info.value.hint


async def test_evaluate_refuses_a_concurrency_below_one() -> None:
    with pytest.raises(ValueError):
        await evaluate(Agent(name="a"), [Case("x")], concurrency=0)


async def test_no_cases_pass_vacuously() -> None:
    assert Report(cases=[]).passed and Report(cases=[]).pass_rate == 1.0
    report = await evaluate(Agent(name="a"), [])
    assert report.passed and report.pass_rate == 1.0


def test_report_schema_version_is_checked_on_load() -> None:
    data = Report(cases=[]).to_dict()
    assert data["schema_version"] == 1
    assert Report.from_dict({k: v for k, v in data.items() if k not in ("schema_version", "version")}).cases == []
    with pytest.raises(ValueError):
        Report.from_dict({**data, "schema_version": 99})


def test_pass_at_k_needs_k_within_the_samples() -> None:
    case = CaseResult(name="c", samples=[SampleResult(), SampleResult(error="x")])
    assert case.pass_at_k(2) == 1.0
    for k in (0, 3):
        with pytest.raises(ValueError):
            case.pass_at_k(k)


def test_an_output_json_cannot_hold_is_stored_as_its_repr() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque 7>"

    assert SampleResult(output=Opaque()).to_dict()["output"] == "<opaque 7>"
    assert SampleResult(output={"a": [1]}).to_dict()["output"] == {"a": [1]}
    assert SampleResult(output=Ticket(title="t", tags=[], priority=1)).to_dict()["output"]["title"] == "t"


def test_derived_case_names_collapse_whitespace_and_stop_at_48_characters() -> None:
    name = Case("  Tell me\n\tabout   " + "the sea " * 20).name
    assert len(name) == 48 and name.endswith("…") and name.startswith("Tell me about the sea the sea")


def test_check_names_for_matches_and_llm_judge() -> None:
    def is_positive(output: Any) -> bool:
        return bool(output)

    assert matches(is_positive).name == "matches(is_positive)"  # type: ignore[attr-defined]
    judge = llm_judge("rubric", model="openai:judge")
    assert inspect.isfunction(judge) and judge.__name__ == "llm_judge"
