"""The LLM judge: a check that asks another agent to grade a run against a rubric."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel, Field

from ..exceptions import UserError
from ..providers.base import ModelSettings, Provider, is_provider
from ..result import RunResult
from ..transcript import InputEntry
from .checks import Check, CheckResult, _check_threshold

__all__ = ["Verdict", "llm_judge"]

JUDGE_MODEL_ENV = "LOVIA_EVAL_JUDGE_MODEL"


@dataclass
class JudgeScope:
    """Set by ``evaluate`` when the suite is checkpointed, so a judge's own run resumes too."""

    checkpointer: Any
    run_ids: list[str] = field(default_factory=list)


judge_checkpointer: ContextVar[JudgeScope | None] = ContextVar("lovia_eval_judge_checkpointer", default=None)

_INSTRUCTIONS = (
    "You grade the answer of an AI assistant against a rubric. Read the request, the answer and the "
    "rubric, then give a score from 0.0 (fails the rubric completely) to 1.0 (meets it fully) and a "
    "short reasoning that names the main shortcoming, if any. Grade only what the rubric asks."
)


class Verdict(BaseModel):
    """What the judge returns."""

    score: float = Field(ge=0.0, le=1.0)
    reasoning: str


ModelSpec = str | Provider | Callable[[], Provider] | None


def _resolve(model: ModelSpec) -> str | Provider:
    if model is None:
        env = os.environ.get(JUDGE_MODEL_ENV)
        if not env:
            raise UserError(
                "llm_judge: no model configured",
                hint=f"pass llm_judge(..., model='vendor:model') or set ${JUDGE_MODEL_ENV}; it never uses the agent "
                "under test",
            )
        return env
    if isinstance(model, str) or is_provider(model):
        return cast("str | Provider", model)
    return cast("Callable[[], Provider]", model)()


def _request_text(result: RunResult[Any]) -> str:
    asked = [e.text for e in result.entries if isinstance(e, InputEntry) and e.role == "user"]
    return "\n".join(asked) or "(no user message)"


def _prompt(rubric: str, result: RunResult[Any]) -> str:
    output = result.output
    answer = (
        output
        if isinstance(output, str)
        else (output.model_dump_json() if hasattr(output, "model_dump_json") else repr(output))
    )
    return f"Rubric:\n{rubric}\n\nRequest:\n{_request_text(result)}\n\nAnswer:\n{answer}"


async def _grade(rubric: str, model: ModelSpec, threshold: float, name: str, result: RunResult[Any]) -> CheckResult:
    from ..agent import Agent
    from ..checkpointer import CheckpointOptions
    from ..runner import Runner

    judge: Agent[Any] = Agent(
        name="judge",
        instructions=_INSTRUCTIONS,
        model=_resolve(model),
        output_type=Verdict,
        settings=ModelSettings(temperature=0.0),
    )
    scope = judge_checkpointer.get()
    options = None
    if scope is not None and result.run_id:
        run_id = f"{result.run_id}:{name}"
        scope.run_ids.append(run_id)
        options = CheckpointOptions(scope.checkpointer, run_id)
    run = await Runner.run(judge, _prompt(rubric, result), checkpoint=options, max_turns=3)
    verdict: Verdict = run.output
    passed = verdict.score >= threshold
    return CheckResult(name=name, passed=passed, score=verdict.score, reason=verdict.reasoning)


def llm_judge(rubric: str, *, model: ModelSpec = None, threshold: float = 0.7, name: str = "llm_judge") -> Check:
    """A check graded by a model: ``passed = score >= threshold``.

    The judge model comes from ``model=`` (a ``vendor:model`` string, a ``Provider``, or a zero-arg
    factory of providers, handy for single-use scripted ones) or ``$LOVIA_EVAL_JUDGE_MODEL``. The
    check is a plain async function whose ``__name__`` is ``name``.

    Raises:
        UserError: The rubric is empty, or there is neither ``model=`` nor
            ``$LOVIA_EVAL_JUDGE_MODEL`` (raised here, not when the suite runs).
        EvalValueError: ``threshold`` is outside [0, 1] (also a ``ValueError``).
    """
    if not rubric.strip():
        raise UserError("llm_judge needs a rubric", hint="describe what a passing answer looks like")
    _check_threshold("llm_judge", threshold)
    if model is None:
        _resolve(None)  # no model configured: say so now, not in the middle of a suite

    async def judge(result: RunResult[Any]) -> CheckResult:
        return await _grade(rubric, model, threshold, name, result)

    judge.__name__ = name
    judge.__qualname__ = name
    return judge
