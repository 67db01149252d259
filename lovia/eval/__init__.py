"""Evals: grade an agent's answers on cases with checks, compare reports with a baseline.

``Case`` pairs an input with checks; ``evaluate()`` runs cases (concurrently, with a bound) and
returns a ``Report``; ``Report.compare(baseline)`` gives a ``Diff`` of regressions. The ``lovia
eval SUITE_FILE`` command wraps all of that for CI (see :mod:`lovia.eval.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
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

_LAZY = {
    "AgentSource": ".runner",
    "Case": ".runner",
    "CaseResult": ".report",
    "Check": ".checks",
    "CheckResult": ".checks",
    "Diff": ".report",
    "Report": ".report",
    "SampleResult": ".report",
    "Verdict": ".judge",
    "all_of": ".checks",
    "any_of": ".checks",
    "contains": ".checks",
    "equals": ".checks",
    "evaluate": ".runner",
    "llm_judge": ".judge",
    "matches": ".checks",
    "max_tokens": ".checks",
    "max_turns": ".checks",
    "no_error": ".checks",
    "not_contains": ".checks",
    "regex": ".checks",
    "run_check": ".checks",
    "tool_called": ".checks",
    "tool_not_called": ".checks",
    "weighted": ".checks",
}

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

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
