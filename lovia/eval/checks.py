"""Checks: callables that grade one finished run.

A check is any callable ``(RunResult) -> CheckResult | bool`` (sync or async). The built-ins below
are small objects with a ``name``; :func:`run_check` turns whatever a check does (returns a bool,
returns a :class:`CheckResult`, raises) into a :class:`CheckResult`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ..exceptions import UserError
from ..result import RunResult
from ..transcript import ToolCallEntry, ToolResultEntry

__all__ = [
    "Check",
    "CheckResult",
    "EvalValueError",
    "all_of",
    "any_of",
    "contains",
    "equals",
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


class EvalValueError(UserError, ValueError):
    """A bad value given to the eval API (also a ``ValueError``)."""


@dataclass(slots=True)
class CheckResult:
    """The verdict of one check on one sample; ``score`` is set by graded checks (0..1)."""

    name: str
    passed: bool
    score: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {"name": self.name, "passed": self.passed, "score": self.score, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        """Inverse of :meth:`to_dict`."""
        score = data.get("score")
        return cls(
            name=str(data.get("name", "")),
            passed=bool(data.get("passed")),
            score=None if score is None else float(score),
            reason=str(data.get("reason", "")),
        )


CheckOutcome = Union[CheckResult, bool]
Check = Callable[[RunResult[Any]], Union[CheckOutcome, Awaitable[CheckOutcome]]]
"""Anything that grades a run: returns (or awaits to) a ``CheckResult`` or a bool."""


def check_name(check: Check) -> str:
    """The label a check reports under: its ``name`` attribute, else its function name."""
    name = getattr(check, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(check, "__name__", None) or type(check).__name__


async def run_check(check: Check, result: RunResult[Any]) -> CheckResult:
    """Run one check and normalize its outcome; a check that raises fails with the error as reason."""
    name = check_name(check)
    try:
        outcome = check(result)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except Exception as exc:
        return CheckResult(name=name, passed=False, reason=f"check raised {type(exc).__name__}: {exc}")
    if isinstance(outcome, CheckResult):
        return outcome
    if isinstance(outcome, bool):
        return CheckResult(name=name, passed=outcome)
    return CheckResult(name=name, passed=False, reason=f"check returned {type(outcome).__name__}, not bool/CheckResult")


class _Check(ABC):
    """Base of the built-ins: a name plus a synchronous predicate with a failure reason."""

    name: str = "check"

    def __call__(self, result: RunResult[Any]) -> CheckResult | Awaitable[CheckResult]:
        passed, reason = self.test(result)
        return CheckResult(name=self.name, passed=passed, reason="" if passed else reason)

    @abstractmethod
    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        """``(passed, reason)`` for one run; each built-in check defines it."""

    def __repr__(self) -> str:
        return f"<check {self.name}>"


def _text(result: RunResult[Any]) -> str:
    out = result.output
    if isinstance(out, str):
        return out
    if hasattr(out, "model_dump_json"):
        return str(out.model_dump_json())
    return "" if out is None else str(out)


def _clip(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class _Contains(_Check):
    def __init__(self, value: str, ignore_case: bool, negate: bool) -> None:
        self.value, self.ignore_case, self.negate = value, ignore_case, negate
        self.name = f"{'not_contains' if negate else 'contains'}({value!r})"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        text, needle = _text(result), self.value
        if self.ignore_case:
            text, needle = text.casefold(), needle.casefold()
        found = needle in text
        if self.negate:
            return not found, f"output contains {self.value!r}"
        return found, f"{self.value!r} not in output {_clip(_text(result))!r}"


def contains(value: str, *, ignore_case: bool = False) -> Check:
    """Pass when the output text contains ``value``."""
    return _Contains(value, ignore_case, negate=False)


def not_contains(value: str, *, ignore_case: bool = False) -> Check:
    """Pass when the output text does not contain ``value``."""
    return _Contains(value, ignore_case, negate=True)


class _Regex(_Check):
    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = re.compile(pattern, flags)
        self.name = f"regex({pattern!r})"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        return self.pattern.search(_text(result)) is not None, f"no match in {_clip(_text(result))!r}"


def regex(pattern: str, *, flags: int = 0) -> Check:
    """Pass when ``re.search(pattern, output_text)`` finds a match."""
    return _Regex(pattern, flags)


class _Equals(_Check):
    def __init__(self, value: Any) -> None:
        self.value = value
        self.name = f"equals({_clip(repr(value), 40)})"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        return result.output == self.value, f"output {_clip(repr(result.output))} != {_clip(repr(self.value))}"


def equals(value: Any) -> Check:
    """Pass when the output equals ``value`` (``==``)."""
    return _Equals(value)


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _subset(actual: Any, expected: Any, path: str) -> str | None:
    """``None`` when ``expected`` is a subset of ``actual``; else where they differ."""
    actual, expected = _plain(actual), _plain(expected)
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return f"{path or 'output'}: expected an object, got {type(actual).__name__}"
        for key, want in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing"
            diff = _subset(actual[key], want, f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"{path or 'output'}: expected a list of {len(expected)}, got {_clip(repr(actual), 40)}"
        for i, (have, want) in enumerate(zip(actual, expected, strict=True)):
            diff = _subset(have, want, f"{path}[{i}]")
            if diff:
                return diff
        return None
    return None if actual == expected else f"{path or 'output'}: {actual!r} != {expected!r}"


class _Matches(_Check):
    def __init__(self, spec: Mapping[str, Any] | Callable[[Any], bool]) -> None:
        self.spec = spec
        predicate = callable(spec) and not isinstance(spec, Mapping)
        self.name = f"matches({getattr(spec, '__name__', type(spec).__name__)})" if predicate else "matches"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        if callable(self.spec) and not isinstance(self.spec, Mapping):
            return bool(self.spec(result.output)), "predicate returned false"
        diff = _subset(result.output, self.spec, "")
        return diff is None, diff or ""


def matches(spec: Mapping[str, Any] | Callable[[Any], bool]) -> Check:
    """Recursive subset match of structured output (extra fields ignored, list lengths exact), or a predicate."""
    return _Matches(spec)


def _tool_names(result: RunResult[Any]) -> list[str]:
    return [e.name for e in result.entries if isinstance(e, ToolCallEntry)]


class _ToolCalled(_Check):
    def __init__(self, tool: str, negate: bool) -> None:
        self.tool, self.negate = tool, negate
        self.name = f"{'tool_not_called' if negate else 'tool_called'}({tool!r})"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        names = _tool_names(result)
        if self.negate:
            return self.tool not in names, f"{self.tool} was called"
        return self.tool in names, f"{self.tool} not called (called: {', '.join(names) or 'none'})"


def tool_called(name: str) -> Check:
    """Pass when the run called the tool ``name`` at least once."""
    return _ToolCalled(name, negate=False)


def tool_not_called(name: str) -> Check:
    """Pass when the run never called the tool ``name``."""
    return _ToolCalled(name, negate=True)


class _Limit(_Check):
    def __init__(self, what: str, n: int, read: Callable[[RunResult[Any]], int]) -> None:
        self.what, self.n, self.read = what, n, read
        self.name = f"max_{what}({n})"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        value = self.read(result)
        return value <= self.n, f"{value} {self.what} > {self.n}"


def max_turns(n: int) -> Check:
    """Pass when the run took at most ``n`` model turns."""
    return _Limit("turns", n, lambda r: r.turns)


def max_tokens(n: int) -> Check:
    """Pass when the run used at most ``n`` tokens (input plus output)."""
    return _Limit("tokens", n, lambda r: r.usage.total_tokens)


class _NoError(_Check):
    name = "no_error"

    def test(self, result: RunResult[Any]) -> tuple[bool, str]:
        failed = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.is_error]
        return not failed, f"{len(failed)} tool call(s) failed: {_clip(failed[0].output) if failed else ''}"


def no_error() -> Check:
    """Pass when no tool call in the run failed (a run that raised never reaches checks)."""
    return _NoError()


async def _all(checks: tuple[Check, ...], result: RunResult[Any]) -> list[CheckResult]:
    return list(await asyncio.gather(*(run_check(c, result) for c in checks)))


class _AllOf:
    def __init__(self, checks: tuple[Check, ...], name: str) -> None:
        self.checks, self.name = checks, name

    async def __call__(self, result: RunResult[Any]) -> CheckResult:
        results = await _all(self.checks, result)
        failed = [r for r in results if not r.passed]
        reason = "; ".join(f"{r.name}: {r.reason}".rstrip(": ") for r in failed)
        return CheckResult(name=self.name, passed=not failed, reason=reason)


class _AnyOf(_AllOf):
    async def __call__(self, result: RunResult[Any]) -> CheckResult:
        results = await _all(self.checks, result)
        passed = any(r.passed for r in results)
        reason = "" if passed else "none passed: " + "; ".join(f"{r.name}: {r.reason}".rstrip(": ") for r in results)
        return CheckResult(name=self.name, passed=passed, reason=reason)


def all_of(*checks: Check, name: str = "all_of") -> Check:
    """Pass when every child check passes."""
    return _AllOf(checks, name)


def any_of(*checks: Check, name: str = "any_of") -> Check:
    """Pass when at least one child check passes."""
    return _AnyOf(checks, name)


class _Weighted:
    def __init__(self, weights: Mapping[Check, float], threshold: float, name: str) -> None:
        if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise EvalValueError(
                "weighted() needs at least one check with a positive weight", hint="e.g. weighted({contains('x'): 1.0})"
            )
        _check_threshold("weighted", threshold)
        self.weights, self.threshold, self.name = dict(weights), threshold, name

    async def __call__(self, result: RunResult[Any]) -> CheckResult:
        checks = tuple(self.weights)
        results = await _all(checks, result)
        total = sum(self.weights.values())
        score = 0.0
        for check, res in zip(checks, results, strict=True):
            part = res.score if res.score is not None else (1.0 if res.passed else 0.0)
            score += self.weights[check] * part
        score /= total
        lows = [f"{r.name}: {r.reason}".rstrip(": ") for r in results if not r.passed]
        passed = score >= self.threshold
        return CheckResult(name=self.name, passed=passed, score=score, reason="" if passed else "; ".join(lows))


def _check_threshold(owner: str, threshold: float) -> None:
    """``threshold`` is a score in [0, 1], else :class:`EvalValueError` (a ``ValueError``)."""
    if not isinstance(threshold, (int, float)) or not 0.0 <= float(threshold) <= 1.0:
        raise EvalValueError(f"{owner}(): threshold must be in [0, 1], got {threshold!r}", hint="e.g. threshold=0.7")


def weighted(weights: Mapping[Check, float], *, threshold: float = 0.7, name: str = "weighted") -> Check:
    """One graded verdict from weighted child scores (a pass counts 1, a failure 0); passes at ``threshold``."""
    return _Weighted(weights, threshold, name)
