"""Eval results: samples, cases, the report, and a diff against a baseline."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..messages import Usage
from .checks import CheckResult, EvalValueError

__all__ = ["CaseResult", "Diff", "EvalValueError", "Report", "SampleResult"]

SCHEMA_VERSION = 1
"""The ``schema_version`` :meth:`Report.to_dict` writes and :meth:`Report.from_dict` reads."""


def _output_json(output: Any) -> Any:
    """A sample's output for JSON: models and dataclasses as dicts, else as is; its ``repr()``
    when it is not JSON-serializable."""
    dump = getattr(output, "model_dump", None)
    if callable(dump) and not isinstance(output, type):
        output = dump(mode="json")
    elif dataclasses.is_dataclass(output) and not isinstance(output, type):
        output = dataclasses.asdict(output)
    try:
        json.dumps(output, allow_nan=False)
    except (TypeError, ValueError):
        return repr(output)
    return output


@dataclass
class SampleResult:
    """One run of one case: its checks, output, usage, latency (seconds), optional cost and error."""

    checks: list[CheckResult] = field(default_factory=list)
    output: Any = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    latency: float = 0.0
    cost: float | None = None
    error: str | None = None
    resumed: bool = False
    """True when the run came back from the suite's checkpoint instead of running again."""

    @property
    def passed(self) -> bool:
        """No error and every check passed."""
        return self.error is None and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "passed": self.passed,
            "checks": [c.to_dict() for c in self.checks],
            "output": _output_json(self.output),
            "turns": self.turns,
            "usage": self.usage.to_dict(),
            "latency": self.latency,
            "cost": self.cost,
            "error": self.error,
            "resumed": self.resumed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SampleResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            checks=[CheckResult.from_dict(c) for c in data.get("checks", [])],
            output=data.get("output"),
            turns=int(data.get("turns", 0)),
            usage=Usage.from_dict(data.get("usage")),
            latency=float(data.get("latency", 0.0)),
            cost=data.get("cost"),
            error=data.get("error"),
            resumed=bool(data.get("resumed", False)),
        )


@dataclass
class CaseResult:
    """All samples of one case; it passes when at least ``pass_threshold`` of them pass."""

    name: str
    samples: list[SampleResult]
    pass_threshold: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        """Fraction of samples that passed (0 with no samples)."""
        return sum(s.passed for s in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def passed(self) -> bool:
        """``pass_rate >= pass_threshold`` (a case without samples fails)."""
        return bool(self.samples) and self.pass_rate >= self.pass_threshold - 1e-9

    def pass_at_k(self, k: int) -> float:
        """Unbiased pass@k: the chance that at least one of ``k`` samples drawn from these passes."""
        n, c = len(self.samples), sum(s.passed for s in self.samples)
        if k < 1 or k > n:
            raise EvalValueError(
                f"pass_at_k needs 1 <= k <= {n} (the number of samples), got {k}",
                hint="run the case with Case(..., samples=k) or more",
            )
        if n - c < k:
            return 1.0
        return 1.0 - comb(n - c, k) / comb(n, k)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        from ..transcript import to_json_safe

        return {
            "name": self.name,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "pass_threshold": self.pass_threshold,
            "metadata": to_json_safe(self.metadata) or {},
            "samples": [s.to_dict() for s in self.samples],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            name=str(data["name"]),
            samples=[SampleResult.from_dict(s) for s in data.get("samples", [])],
            pass_threshold=float(data.get("pass_threshold", 1.0)),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass
class Diff:
    """How a report differs from a baseline, by case name; ``ok`` (and truthiness) means no regression."""

    regressions: list[str]
    improvements: list[str]
    added: list[str]
    removed: list[str]

    @property
    def ok(self) -> bool:
        """True when no case that passed in the baseline fails now."""
        return not self.regressions

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [f"diff: {'ok' if self.ok else 'REGRESSED'}"]
        for label, names in (
            ("regressed", self.regressions),
            ("improved", self.improvements),
            ("added", self.added),
            ("removed", self.removed),
        ):
            lines.extend(f"  {label}: {n}" for n in names)
        return "\n".join(lines)


def _by_name(cases: list[CaseResult], which: str) -> dict[str, CaseResult]:
    out: dict[str, CaseResult] = {}
    for case in cases:
        if case.name in out:
            raise EvalValueError(
                f"duplicate case name {case.name!r} in the {which} report",
                hint="give cases unique names (Case(..., name=...)) when their inputs repeat",
            )
        out[case.name] = case
    return out


@dataclass
class Report:
    """The outcome of a suite: one :class:`CaseResult` per case, in input order."""

    cases: list[CaseResult]
    duration: float = 0.0
    """Wall-clock seconds the suite took."""

    @property
    def passed(self) -> bool:
        """Every case passed."""
        return all(c.passed for c in self.cases)

    @property
    def pass_rate(self) -> float:
        """Fraction of cases that passed (1.0 for a report without cases: it passes vacuously)."""
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 1.0

    @property
    def usage(self) -> Usage:
        """Tokens over every sample."""
        total = Usage()
        for case in self.cases:
            for sample in case.samples:
                total.add(sample.usage)
        return total

    @property
    def cost(self) -> float | None:
        """Summed cost, when every sample has one."""
        costs = [s.cost for c in self.cases for s in c.samples]
        return None if not costs or any(x is None for x in costs) else float(sum(x for x in costs if x is not None))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (what :meth:`save` writes)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "version": SCHEMA_VERSION,  # the key older lovia releases wrote
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "duration": self.duration,
            "usage": self.usage.to_dict(),
            "cost": self.cost,
            "cases": [c.to_dict() for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise UserError("not an eval report (no 'cases' list)", hint="pass a file written by Report.save")
        version = data.get("schema_version", data.get("version", SCHEMA_VERSION))
        if version != SCHEMA_VERSION:
            raise EvalValueError(
                f"eval report schema_version {version!r} is not supported (this lovia reads {SCHEMA_VERSION})",
                hint="write the report again with this lovia, or read it with the release that wrote it",
            )
        return cls(cases=[CaseResult.from_dict(c) for c in data["cases"]], duration=float(data.get("duration", 0.0)))

    def save(self, path: str | Path) -> None:
        """Write the report as JSON."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read a report written by :meth:`save`."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(
                f"no report at {path}", hint="save one first with report.save(path) (or --save-baseline)"
            ) from None
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} is not JSON: {exc}", hint="pass a file written by Report.save") from None
        return cls.from_dict(data)

    def compare(self, baseline: Report) -> Diff:
        """Join with ``baseline`` by case name: what regressed, improved, appeared or disappeared."""
        now, before = _by_name(self.cases, "current"), _by_name(baseline.cases, "baseline")
        common = [n for n in now if n in before]
        return Diff(
            regressions=[n for n in common if before[n].passed and not now[n].passed],
            improvements=[n for n in common if not before[n].passed and now[n].passed],
            added=[n for n in now if n not in before],
            removed=[n for n in before if n not in now],
        )

    def __str__(self) -> str:
        samples = sum(len(c.samples) for c in self.cases)
        passed = sum(c.passed for c in self.cases)
        head = (
            f"eval: {passed}/{len(self.cases)} cases passed ({self.pass_rate:.0%}) · {samples} samples"
            f" · {self.usage.total_tokens:,} tokens · {self.duration:.1f}s"
        )
        if self.cost is not None:
            head += f" · ${self.cost:.4f}"
        width = max((len(_label(c.name)) for c in self.cases), default=0)
        return "\n".join([head, *(_case_line(c, width) for c in self.cases)])


def _label(name: str, limit: int = 50) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _case_line(case: CaseResult, width: int) -> str:
    ok = sum(s.passed for s in case.samples)
    line = f"  {'✓' if case.passed else '✗'} {_label(case.name).ljust(width)}  {ok}/{len(case.samples)}"
    if case.passed:
        return line
    return f"{line}  {_first_failure(case)}"


def _first_failure(case: CaseResult) -> str:
    for sample in case.samples:
        if sample.error:
            return f"error: {sample.error}"
        for check in sample.checks:
            if not check.passed:
                score = f" (score {check.score:.2f})" if check.score is not None else ""
                reason = f" — {check.reason}" if check.reason else ""
                return f"{check.name}{score}{reason}"
    return ""
