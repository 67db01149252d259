"""Cases and ``evaluate``: run a suite of cases against an agent, concurrently with a bound."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from ..agent import Agent
from ..checkpointer import Checkpointer, CheckpointOptions
from ..exceptions import UserError
from ..messages import Message, Usage
from ..result import RunResult
from ..runner import Runner
from .checks import Check, run_check
from .judge import JudgeScope, judge_checkpointer
from .report import CaseResult, EvalValueError, Report, SampleResult

__all__ = ["AgentSource", "Case", "evaluate"]

AgentSource = Union[Agent[Any], Callable[[], Agent[Any]]]
"""An agent, or a zero-arg factory called once per sample (use one for stateful agents)."""


def _derive_name(value: str | list[Message]) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = next((str(m.content) for m in reversed(value) if m.role == "user"), "") or "case"
    flat = " ".join(text.split())
    return flat if len(flat) <= 48 else flat[:47] + "…"


@dataclass
class Case:
    """One eval case: an input, the checks a sample must pass, and per-case run settings.

    ``model`` clones the agent onto another model (a vendor string, a provider, or a zero-arg
    provider factory called per sample); ``timeout`` caps each sample's wall clock (a timeout is a
    failed sample; it must be above 0); ``name`` defaults to the input text, whitespace collapsed
    and cut to 48 characters ending in "…", and is the join key of ``Report.compare``.
    """

    input: str | list[Message]
    checks: Sequence[Check] = ()
    name: str = ""
    samples: int = 1
    pass_threshold: float = 1.0
    deps: Any = None
    output_type: Any = None
    model: Any = None
    max_turns: int = 50
    timeout: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = _derive_name(self.input)
        if self.samples < 1:
            raise EvalValueError(f"case {self.name!r}: samples must be at least 1", hint="use samples=1 or more")
        if not 0.0 <= self.pass_threshold <= 1.0:
            raise EvalValueError(f"case {self.name!r}: pass_threshold must be in 0..1", hint="e.g. pass_threshold=0.75")
        if self.timeout is not None and not self.timeout > 0:
            raise EvalValueError(
                f"case {self.name!r}: timeout must be above 0 seconds, got {self.timeout!r}",
                hint="give seconds, e.g. timeout=30, or None for no limit",
            )
        self.checks = tuple(self.checks)


@dataclass
class _Suite:
    source: AgentSource
    price: Callable[[Usage], float] | None
    checkpointer: Checkpointer | None
    suite: str
    run_ids: list[str] = field(default_factory=list)


_DEPS_KEYWORD: str | None = None


def _deps_keyword() -> str:
    """``deps`` when the runner takes it, else the older ``context`` keyword."""
    global _DEPS_KEYWORD
    if _DEPS_KEYWORD is None:
        _DEPS_KEYWORD = "deps" if "deps" in inspect.signature(Runner.run).parameters else "context"
    return _DEPS_KEYWORD


def _agent_for(source: AgentSource, case: Case) -> Agent[Any]:
    agent = source if isinstance(source, Agent) else source()
    if not isinstance(agent, Agent):
        raise UserError(
            "the agent factory did not return an Agent", hint="pass an Agent or a zero-arg callable returning one"
        )
    if case.model is None:
        return agent
    model = case.model
    if callable(model) and not hasattr(model, "stream"):
        model = model()
    return agent.clone(model=model)


def _run_id(suite: _Suite, case: Case, index: int) -> str:
    digest = hashlib.sha256(case.name.encode()).hexdigest()[:16]
    return f"eval:{suite.suite}:{digest}:{index}"


async def _run_once(suite: _Suite, case: Case, index: int) -> RunResult[Any]:
    agent = _agent_for(suite.source, case)
    options = None
    if suite.checkpointer is not None:
        run_id = _run_id(suite, case, index)
        suite.run_ids.append(run_id)
        options = CheckpointOptions(suite.checkpointer, run_id)
    kwargs: dict[str, Any] = {_deps_keyword(): case.deps, "max_turns": case.max_turns, "checkpoint": options}
    if case.output_type is not None:
        kwargs["output_type"] = case.output_type
    coro = Runner.run(agent, case.input, **kwargs)
    if case.timeout is None:
        return await coro
    return await asyncio.wait_for(coro, case.timeout)


async def _sample(suite: _Suite, case: Case, index: int) -> SampleResult:
    start = time.perf_counter()
    try:
        result = await _run_once(suite, case, index)
    except asyncio.TimeoutError:
        return SampleResult(latency=time.perf_counter() - start, error=f"timed out after {case.timeout}s")
    except Exception as exc:
        return SampleResult(latency=time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
    latency = time.perf_counter() - start
    checks = list(await asyncio.gather(*(run_check(c, result) for c in case.checks)))
    cost: float | None = None
    if suite.price is not None:
        try:
            cost = float(suite.price(result.usage))
        except Exception:
            cost = None
    return SampleResult(
        checks=checks,
        output=result.output,
        turns=result.turns,
        usage=result.usage.copy(),
        latency=latency,
        cost=cost,
        resumed=result.replayed,
    )


async def _case(suite: _Suite, case: Case) -> CaseResult:
    samples = [await _sample(suite, case, i) for i in range(case.samples)]
    return CaseResult(name=case.name, samples=samples, pass_threshold=case.pass_threshold, metadata=dict(case.metadata))


def _as_list(cases: Case | Iterable[Case]) -> list[Case]:
    items = [cases] if isinstance(cases, Case) else list(cases)
    bad = [c for c in items if not isinstance(c, Case)]
    if bad:
        raise UserError(f"evaluate() got {type(bad[0]).__name__}, not Case", hint="wrap each input in Case(...)")
    return items


async def _run_cases(
    suite: _Suite, cases: list[Case], concurrency: int, fail_fast: bool, on_case: Callable[[CaseResult], None] | None
) -> list[CaseResult]:
    if fail_fast:
        done: list[CaseResult] = []
        for case in cases:
            done.append(await _case(suite, case))
            if on_case is not None:
                on_case(done[-1])
            if not done[-1].passed:
                break
        return done
    gate = asyncio.Semaphore(max(1, concurrency))

    async def bounded(case: Case) -> CaseResult:
        async with gate:
            result = await _case(suite, case)
        if on_case is not None:
            on_case(result)
        return result

    return list(await asyncio.gather(*(bounded(c) for c in cases)))


async def evaluate(
    agent: AgentSource,
    cases: Case | Iterable[Case],
    *,
    concurrency: int = 4,
    fail_fast: bool = False,
    price: Callable[[Usage], float] | None = None,
    checkpointer: Checkpointer | None = None,
    suite: str = "suite",
    on_case: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Run every case and return a :class:`Report`; errors and timeouts are failed samples, never a crash.

    No cases give an empty report, which passes (``pass_rate`` 1.0).

    Concurrency is across cases (a case's samples run one after another, a sample's checks
    together). ``fail_fast`` runs cases in order and stops after the first failing case.
    ``price`` turns a sample's usage into a cost. With ``checkpointer`` every sample (and every
    judge run) is checkpointed under ``suite`` + case name + sample index, so a suite that was
    interrupted replays its finished samples instead of running them again; once the suite has
    finished, those checkpoints are deleted. ``on_case`` is called as each case finishes.
    """
    if not isinstance(concurrency, int) or concurrency < 1:
        raise EvalValueError(
            f"evaluate(): concurrency must be at least 1, got {concurrency!r}", hint="the default is 4"
        )
    items = _as_list(cases)
    state = _Suite(agent, price, checkpointer, suite)
    scope = JudgeScope(checkpointer) if checkpointer is not None else None
    token = judge_checkpointer.set(scope)
    started = time.perf_counter()
    try:
        results = await _run_cases(state, items, concurrency, fail_fast, on_case)
    finally:
        judge_checkpointer.reset(token)
    report = Report(cases=results, duration=time.perf_counter() - started)
    if checkpointer is not None and len(results) == len(items):
        for run_id in [*state.run_ids, *(scope.run_ids if scope else [])]:
            await checkpointer.delete(run_id)
    return report
