"""The crash kit: kill a real process at a persistence boundary, re-issue the call, check invariants.

A *scenario* is a module-level factory ``module:function`` taking the store location (a SQLite
path or a DSN) and returning a :class:`CrashScenario`. The kit runs it in a child process, and the
child SIGKILLs itself at the chosen :class:`Boundary` (the kit wraps the scenario's checkpointer to
see every save; tools mark their own kill point with :func:`crash_point`). Then the same call is
re-issued from a fresh process and :func:`check_invariants` verifies design section 4.4:

* the answer equals an uninterrupted run's;
* tool results that were stored before the crash were never executed again;
* the session holds the run exactly once, every call paired with its result;
* a further re-issue replays the stored result without calling the model.

Tools report executions to a ledger file with :func:`record_effect`, so "never re-ran" is checked
on real side effects, not on what the runtime believes.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpointer import Checkpointer, CheckpointOptions, RunHead, RunSnapshot
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

if TYPE_CHECKING:
    from ..agent import Agent
    from ..session import Session

__all__ = [
    "Boundary",
    "ChildOutcome",
    "CrashReport",
    "CrashScenario",
    "check_invariants",
    "crash_point",
    "crash_test",
    "ledger",
    "record_effect",
    "run_child",
]

_ENV_BOUNDARY = "LOVIA_CRASH_AT"
_ENV_OCCURRENCE = "LOVIA_CRASH_OCCURRENCE"
_ENV_LEDGER = "LOVIA_CRASH_LEDGER"


class Boundary(str, enum.Enum):
    """Where the child kills itself."""

    AFTER_MODEL_SAVE = "after_model_save"
    """Right after the save that persisted a model turn's tool calls."""
    IN_TOOL = "in_tool"
    """Inside a tool, at its :func:`crash_point` call."""
    AFTER_TOOL_SAVE = "after_tool_save"
    """Right after the save that persisted a tool result."""
    AFTER_HANDOFF = "after_handoff"
    """Right after the save that recorded a fired handoff (not yet applied)."""
    BEFORE_SESSION_APPEND = "before_session_append"
    """After the checkpoint was finalized as completed, before the session append."""
    AFTER_SAVE = "after_save"
    """Right after *any* checkpoint save, whatever it held: with ``occurrence=k`` the child dies
    after its k-th save. Counting the saves of an uninterrupted run and killing after each one in
    turn covers every persistence point the loop has (see ``tests/run/test_crash_fuzz.py``)."""


@dataclass
class CrashScenario:
    """What a scenario factory returns: the agent, its input and its stores."""

    agent: Agent[Any]
    input: Any
    session: Session
    checkpointer: Checkpointer
    session_id: str = "crash-session"
    model_calls: Callable[[], int] = field(default=lambda: 0)
    """How many model calls this process made (for the replay check)."""
    close: Callable[[], Awaitable[None]] | None = None


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    """Call inside a tool: the child dies here when the kit asked for ``in_tool`` at ``name``."""
    if os.environ.get(_ENV_BOUNDARY) == f"{Boundary.IN_TOOL.value}:{name}":
        _die()


def record_effect(call_id: str, tool_name: str, phase: str = "start") -> None:
    """Append one line to the effects ledger (a no-op outside the kit)."""
    path = os.environ.get(_ENV_LEDGER)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"call_id": call_id, "tool": tool_name, "phase": phase}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def ledger(path: str | Path) -> list[dict[str, str]]:
    """Read an effects ledger."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


class _KillSwitch:
    """Checkpointer proxy that dies right after the save matching the boundary."""

    def __init__(self, inner: Checkpointer, boundary: str, occurrence: int) -> None:
        self.inner = inner
        self.boundary = boundary
        self.remaining = occurrence

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load(self, run_id: str) -> RunSnapshot | None:
        return await self.inner.load(run_id)

    async def delete(self, run_id: str) -> None:
        await self.inner.delete(run_id)

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        await self.inner.append(run_id, entries, head)
        if self._matches(entries, head):
            self.remaining -= 1
            if self.remaining == 0:
                _die()

    def _matches(self, entries: Sequence[TranscriptEntry], head: RunHead) -> bool:
        b = self.boundary
        if b == Boundary.AFTER_SAVE.value:
            return True
        if b == Boundary.AFTER_MODEL_SAVE.value:
            return any(isinstance(e, ToolCallEntry) for e in entries)
        if b == Boundary.AFTER_TOOL_SAVE.value:
            return any(isinstance(e, ToolResultEntry) for e in entries)
        if b == Boundary.AFTER_HANDOFF.value:
            return head.pending_handoff is not None
        if b == Boundary.BEFORE_SESSION_APPEND.value:
            return head.status == "completed"
        return False


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """How a child process ended."""

    returncode: int
    result: dict[str, Any] | None
    stderr: str

    @property
    def killed(self) -> bool:
        """Whether the child died of SIGKILL."""
        return self.returncode == -signal.SIGKILL


def _load_factory(spec: str) -> Callable[[str], CrashScenario | Awaitable[CrashScenario]]:
    module, _, attr = spec.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    if not callable(factory):
        raise TypeError(f"{spec} is not callable")
    return factory  # type: ignore[no-any-return]


async def _child_main(factory_spec: str, store: str, run_id: str) -> dict[str, Any]:
    from ..runner import Runner

    built = _load_factory(factory_spec)(store)
    scenario = await built if asyncio.iscoroutine(built) else built
    assert isinstance(scenario, CrashScenario)
    boundary = os.environ.get(_ENV_BOUNDARY, "")
    checkpointer: Any = scenario.checkpointer
    if boundary and not boundary.startswith(Boundary.IN_TOOL.value):
        checkpointer = _KillSwitch(scenario.checkpointer, boundary, int(os.environ.get(_ENV_OCCURRENCE, "1")))
    try:
        result = await Runner.run(
            scenario.agent,
            scenario.input,
            session=scenario.session,
            session_id=scenario.session_id,
            checkpoint=CheckpointOptions(checkpointer, run_id),
        )
    finally:
        if scenario.close is not None:
            await scenario.close()
    return {
        "output": result.output
        if isinstance(result.output, (str, int, float, bool, type(None)))
        else str(result.output),
        "replayed": result.replayed,
        "turns": result.turns,
        "model_calls": scenario.model_calls(),
    }


def run_child(
    factory: str,
    store: str,
    run_id: str,
    *,
    boundary: Boundary | str | None = None,
    tool: str | None = None,
    occurrence: int = 1,
    ledger_path: str | Path | None = None,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> ChildOutcome:
    """Run the scenario once in a fresh Python process (optionally dying at ``boundary``)."""
    child_env = {**os.environ, **(env or {})}
    child_env.pop(_ENV_BOUNDARY, None)
    if boundary is not None:
        value = Boundary(boundary).value
        if value == Boundary.IN_TOOL.value:
            if not tool:
                raise ValueError("Boundary.IN_TOOL needs tool= (the name passed to crash_point)")
            value = f"{value}:{tool}"
        child_env[_ENV_BOUNDARY] = value
        child_env[_ENV_OCCURRENCE] = str(occurrence)
    if ledger_path is not None:
        child_env[_ENV_LEDGER] = str(ledger_path)
    proc = subprocess.run(
        [sys.executable, "-m", "lovia.testing.crash", factory, store, run_id],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env,
        cwd=os.getcwd(),
    )
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith("LOVIA_RESULT "):
            result = json.loads(line[len("LOVIA_RESULT ") :])
    return ChildOutcome(proc.returncode, result, proc.stderr)


@dataclass
class CrashReport:
    """Everything :func:`crash_test` observed."""

    crashed: ChildOutcome
    resumed: ChildOutcome
    replayed: ChildOutcome
    reference: ChildOutcome
    stored_before_crash: set[str]
    starts: Counter[str]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every invariant held."""
        return not self.problems


async def check_invariants(
    session: Session,
    session_id: str,
    run_id: str,
    *,
    expected_output: Any,
    resumed: ChildOutcome,
    replayed: ChildOutcome,
    stored_before_crash: set[str],
    starts: Counter[str],
) -> list[str]:
    """The invariants of a crash-and-re-issue, as a list of violations (empty = all hold)."""
    problems: list[str] = []
    if resumed.result is None:
        problems.append(f"the re-issued call did not finish (exit {resumed.returncode}): {resumed.stderr[-2000:]}")
    elif resumed.result["output"] != expected_output:
        problems.append(f"answer after resume {resumed.result['output']!r} != uninterrupted answer {expected_output!r}")
    for call_id in sorted(stored_before_crash):
        if starts[call_id] > 1:
            problems.append(f"tool call {call_id} had a stored result but ran {starts[call_id]} times")
    segments = await session.segments(session_id)
    matching = [s for s in segments if s.run_id == run_id]
    if len(matching) != 1:
        problems.append(f"session holds run {run_id} {len(matching)} times, expected exactly once")
    for seg in matching:
        calls = {e.call_id for e in seg.entries if isinstance(e, ToolCallEntry)}
        results = [e.call_id for e in seg.entries if isinstance(e, ToolResultEntry)]
        if calls != set(results) or len(results) != len(set(results)):
            problems.append(
                f"session segment of {run_id} is not tool-consistent: calls {sorted(calls)} results {results}"
            )
    if replayed.result is None:
        problems.append(f"the second re-issue failed (exit {replayed.returncode}): {replayed.stderr[-2000:]}")
    elif not replayed.result["replayed"] or replayed.result["model_calls"] != 0:
        problems.append(f"the second re-issue was not a pure replay: {replayed.result}")
    elif replayed.result["output"] != expected_output:
        problems.append(f"replayed answer {replayed.result['output']!r} != {expected_output!r}")
    return problems


async def crash_test(
    factory: str,
    *,
    store: str,
    reference_store: str,
    run_id: str,
    boundary: Boundary | str,
    workdir: str | Path,
    tool: str | None = None,
    occurrence: int = 1,
    session_id: str = "crash-session",
    open_stores: Callable[[str], Awaitable[tuple[Session, Checkpointer]]],
) -> CrashReport:
    """Run the whole kill / re-issue / replay cycle and check every invariant.

    ``store`` and ``reference_store`` are two separate store locations (the reference run is an
    uninterrupted run of the same scenario). ``open_stores(store)`` opens the stores in this
    process for inspection.
    """
    work = Path(workdir)
    ref_ledger, crash_ledger = work / "reference.ledger", work / "crash.ledger"
    reference = run_child(factory, reference_store, run_id, ledger_path=ref_ledger)
    if reference.result is None:
        raise RuntimeError(f"the reference run failed: {reference.stderr[-2000:]}")
    crashed = run_child(
        factory, store, run_id, boundary=boundary, tool=tool, occurrence=occurrence, ledger_path=crash_ledger
    )
    session, checkpointer = await open_stores(store)
    snapshot = await checkpointer.load(run_id)
    stored = {e.call_id for e in snapshot.entries if isinstance(e, ToolResultEntry)} if snapshot else set()
    resumed = run_child(factory, store, run_id, ledger_path=crash_ledger)
    replayed = run_child(factory, store, run_id, ledger_path=crash_ledger)
    starts = Counter(row["call_id"] for row in ledger(crash_ledger) if row["phase"] == "start")
    report = CrashReport(crashed, resumed, replayed, reference, stored, starts)
    if not crashed.killed:
        report.problems.append(
            f"the child was not killed at {boundary} (exit {crashed.returncode}): {crashed.stderr[-2000:]}"
        )
    report.problems += await check_invariants(
        session,
        session_id,
        run_id,
        expected_output=reference.result["output"],
        resumed=resumed,
        replayed=replayed,
        stored_before_crash=stored,
        starts=starts,
    )
    return report


def _main(argv: list[str]) -> int:
    factory, store, run_id = argv
    result = asyncio.run(_child_main(factory, store, run_id))
    print("LOVIA_RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    # Run the imported module's copy, so scenarios and the kit share one CrashScenario class.
    from lovia.testing.crash import _main as _imported_main

    raise SystemExit(_imported_main(sys.argv[1:]))
