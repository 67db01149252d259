"""Evals: grade an agent's answers on cases with checks, compare reports with a baseline.

``Case`` pairs an input with checks; ``evaluate()`` runs cases (concurrently, with a bound) and
returns a ``Report``; ``Report.compare(baseline)`` gives a ``Diff`` of regressions. The ``lovia
eval SUITE_FILE`` command wraps all of that for CI (see :mod:`lovia.eval.cli`).
"""

from __future__ import annotations

from .checks import (
    Check,
    CheckResult,
    all_of,
    any_of,
    contains,
    equals,
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
from .judge import Verdict, llm_judge
from .report import CaseResult, Diff, Report, SampleResult
from .runner import AgentSource, Case, evaluate

__all__ = [
    "AgentSource",
    "Case",
    "CaseResult",
    "Check",
    "CheckResult",
    "Diff",
    "Report",
    "SampleResult",
    "Verdict",
    "all_of",
    "any_of",
    "contains",
    "equals",
    "evaluate",
    "llm_judge",
    "matches",
    "max_tokens",
    "max_turns",
    "no_error",
    "not_contains",
    "regex",
    "run_check",
    "tool_called",
    "tool_not_called",
    "weighted",
]
