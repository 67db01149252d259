"""``lovia eval SUITE_FILE``: run a suite file, show progress and a table, write JSON/JUnit, gate on a baseline.

A suite file is a Python file that defines ``cases`` (a list of :class:`~lovia.eval.Case`, or a
zero-arg function returning one) and ``agent`` (an ``Agent`` or a zero-arg factory). Optional:
``SUITE`` (a name; default the file's stem) and ``price`` (``Usage -> float``).

Exit status: 0 when the suite passes (with ``--baseline``: when nothing regressed), 1 on a
failing case or a regression, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import runpy
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..exceptions import LoviaError, UserError
from .checks import check_name
from .report import CaseResult, Report

if TYPE_CHECKING:
    from .runner import Case

__all__ = ["add_eval_parser", "junit_xml", "load_suite", "run_eval"]

DEFAULT_CHECKPOINT = "./.lovia/eval.db"


def add_eval_parser(sub: Any) -> argparse.ArgumentParser:
    """Register the ``eval`` subcommand on an ``add_subparsers()`` object."""
    p: argparse.ArgumentParser = sub.add_parser(
        "eval",
        help="run an eval suite file",
        description="Run an eval suite (a Python file defining `cases` and `agent`) and report the result.",
    )
    p.add_argument("suite_file", metavar="SUITE_FILE", help="Python file defining `cases` and `agent`")
    p.add_argument("--baseline", metavar="FILE", help="compare with this saved report; exit 1 on a regression")
    p.add_argument("--save-baseline", metavar="FILE", help="write this run's report as the new baseline")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per case) for CI")
    p.add_argument("--concurrency", type=int, default=4, help="cases run at once (default %(default)s)")
    p.add_argument("--fail-fast", action="store_true", help="run cases in order, stop at the first failing one")
    p.add_argument(
        "--checkpoint",
        metavar="DB",
        default=DEFAULT_CHECKPOINT,
        help="SQLite file that makes an interrupted suite resumable (default %(default)s)",
    )
    p.add_argument("--no-checkpoint", action="store_true", help="do not checkpoint; an interrupted suite starts over")
    p.add_argument(
        "--fresh", action="store_true", help="discard this suite's checkpoints from an interrupted run first"
    )
    p.add_argument("--quiet", action="store_true", help="no per-case progress lines")
    return p


def load_suite(path: str) -> tuple[str, Any, list[Case], Any]:
    """Execute a suite file; return ``(suite_name, agent_source, cases, price)``."""
    from .runner import Case

    file = Path(path)
    if not file.is_file():
        raise UserError(f"no suite file at {path}", hint="pass a Python file that defines `cases` and `agent`")
    namespace = runpy.run_path(str(file), run_name="__lovia_eval__")
    cases = namespace.get("cases")
    if callable(cases):
        cases = cases()
    agent = namespace.get("agent")
    if cases is None or agent is None:
        missing = " and ".join(n for n, v in (("cases", cases), ("agent", agent)) if v is None)
        raise UserError(
            f"{path} defines no {missing}", hint="define `cases = [Case(...), ...]` and `agent = Agent(...)`"
        )
    items = list(cases)
    if not all(isinstance(c, Case) for c in items):
        raise UserError(f"{path}: `cases` must hold Case objects", hint="wrap each input in lovia.eval.Case(...)")
    return str(namespace.get("SUITE") or file.stem), agent, items, namespace.get("price")


def junit_xml(report: Report, suite: str) -> str:
    """The report as JUnit XML: one ``testcase`` per case, a ``failure`` for each failing one."""
    failures = sum(not c.passed for c in report.cases)
    root = ET.Element("testsuites", tests=str(len(report.cases)), failures=str(failures), time=f"{report.duration:.3f}")
    node = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(report.cases)),
        failures=str(failures),
        errors="0",
        time=f"{report.duration:.3f}",
    )
    for case in report.cases:
        seconds = sum(s.latency for s in case.samples)
        tc = ET.SubElement(node, "testcase", classname=suite, name=case.name, time=f"{seconds:.3f}")
        if not case.passed:
            lines = _failure_lines(case)
            failure = ET.SubElement(tc, "failure", message=lines[0] if lines else "failed")
            failure.text = "\n".join(lines)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _failure_lines(case: CaseResult) -> list[str]:
    lines = [
        f"{sum(s.passed for s in case.samples)}/{len(case.samples)} samples passed (need {case.pass_threshold:.0%})"
    ]
    for i, sample in enumerate(case.samples):
        if sample.error:
            lines.append(f"sample {i}: error: {sample.error}")
        lines.extend(f"sample {i}: {c.name}: {c.reason or 'failed'}" for c in sample.checks if not c.passed)
    return lines


class _Progress:
    def __init__(self, total: int, out: TextIO | None) -> None:
        self.total, self.done, self.out = total, 0, out

    def __call__(self, case: CaseResult) -> None:
        self.done += 1
        if self.out is None:
            return
        ok = sum(s.passed for s in case.samples)
        seconds = sum(s.latency for s in case.samples)
        resumed = " (resumed)" if case.samples and all(s.resumed for s in case.samples) else ""
        width = len(str(self.total))
        mark = "✓" if case.passed else "✗"
        print(
            f"[{self.done:>{width}}/{self.total}] {mark} {case.name}  {ok}/{len(case.samples)}  "
            f"{seconds:.2f}s{resumed}",
            file=self.out,
            flush=True,
        )


async def _forget(checkpointer: Any, suite: str, agent: Any, cases: list[Case]) -> None:
    from .runner import _run_id, _Suite

    state = _Suite(agent, None, checkpointer, suite)
    for case in cases:
        for i in range(case.samples):
            run_id = _run_id(state, case, i)
            await checkpointer.delete(run_id)
            for check in case.checks:
                await checkpointer.delete(f"{run_id}:{check_name(check)}")


async def _evaluate(args: argparse.Namespace, suite: str, agent: Any, cases: list[Case], price: Any) -> Report:
    from .runner import evaluate

    checkpointer = None
    if not args.no_checkpoint:
        from ..stores import SQLiteCheckpointer

        Path(args.checkpoint).parent.mkdir(parents=True, exist_ok=True)
        checkpointer = SQLiteCheckpointer(args.checkpoint, wal=True)
    try:
        if checkpointer is not None and args.fresh:
            await _forget(checkpointer, suite, agent, cases)
        progress = _Progress(len(cases), None if args.quiet else sys.stderr)
        return await evaluate(
            agent,
            cases,
            concurrency=args.concurrency,
            fail_fast=args.fail_fast,
            price=price,
            checkpointer=checkpointer,
            suite=suite,
            on_case=progress,
        )
    finally:
        if checkpointer is not None:
            await checkpointer.close()


def run_eval(args: argparse.Namespace) -> int:
    """Run the ``eval`` subcommand from parsed arguments; returns the exit status."""
    if args.concurrency < 1:
        raise UserError("--concurrency must be at least 1", hint="e.g. --concurrency 4")
    baseline = Report.load(args.baseline) if args.baseline else None
    suite, agent, cases, price = load_suite(args.suite_file)
    report = asyncio.run(_evaluate(args, suite, agent, cases, price))
    print(report)
    if args.json:
        report.save(args.json)
    if args.junit:
        Path(args.junit).parent.mkdir(parents=True, exist_ok=True)
        Path(args.junit).write_text(junit_xml(report, suite), encoding="utf-8")
    if args.save_baseline:
        report.save(args.save_baseline)
    if baseline is not None:
        diff = report.compare(baseline)
        print(diff)
        return 0 if diff.ok else 1
    return 0 if report.passed else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m lovia.eval.cli SUITE_FILE ...`` (the same as ``lovia eval``)."""
    parser = argparse.ArgumentParser(prog="lovia")
    add_eval_parser(parser.add_subparsers(dest="command", required=True, metavar="{eval}"))
    args = parser.parse_args(["eval", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run_eval(args)
    except LoviaError as exc:
        print(f"lovia: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
