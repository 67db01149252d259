"""Crash fuzzing: SIGKILL after every checkpoint save, at random times, twice in a row, and
cancellation at random points, each followed by re-issues that must heal the run.

The scenario (``tests/run/crash_fuzz_scenarios.py``) hands off, runs a parallel batch of three
calls, then a batch with a ``parallel=False`` barrier and two non-idempotent tools, and ends in a
structured answer that needs one repair turn. Invariants checked after every interruption:

* the answer equals the uninterrupted run's, and a further re-issue is a pure replay (no model);
* a tool result stored before an interruption is never executed again, and no call runs twice in
  one process (each process writes its own effects ledger);
* a non-idempotent effect is applied at most once per ``ctx.idempotency_key``: ``charge`` exactly
  once (its reconciler returns the receipt or asks for a re-run), ``notify`` at most once (a
  dangling started call gets the "outcome unknown" error result instead of a blind re-run);
* the session holds the run exactly once, every call paired with one result.

Default suite (SQLite ``wal=True``): a kill after each of the ~21 saves of the run, a seeded sample
of double crashes (kill after save k, then kill the resume after its save j), a few seeded
random-time kills per journal mode, and seeded in-process cancellations (cancel token and task
cancellation).

``LOVIA_CRASH_FUZZ=1`` runs the larger matrix: the exhaustive loop in both journal modes (WAL and
rollback), more double-crash pairs, 12 random-time seeds per journal mode, more cancellation seeds.
``LOVIA_CRASH_FUZZ_SEED=<int>`` shifts every seed (to explore beyond the fixed ones).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lovia import CheckpointOptions, Runner
from lovia.exceptions import RunCancelled
from lovia.hooks import AgentHooks
from lovia.run.tool_phase import OUTCOME_UNKNOWN
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing.crash import Boundary, ChildOutcome, check_invariants, ledger, run_child
from lovia.transcript import ToolCallEntry, ToolResultEntry, entry_to_dict
from tests.run import crash_fuzz_scenarios as fz

FACTORY = "tests.run.crash_fuzz_scenarios:fuzz_scenario"
RUN_ID = "fuzz-job-1"
SESSION_ID = "crash-session"
FULL = os.environ.get("LOVIA_CRASH_FUZZ") == "1"
SEED_BASE = int(os.environ.get("LOVIA_CRASH_FUZZ_SEED", "0"))
WORKERS = 2

JOURNALS = [True, False] if FULL else [True]
RANDOM_SEEDS = 12 if FULL else 4
DOUBLE_PAIRS = 40 if FULL else 5
CANCEL_SEEDS = 24 if FULL else 8

# ---------------------------------------------------------------------- helpers


def _env(wal: bool, kill_after: float | None = None) -> dict[str, str]:
    env = {fz.ENV_WAL: "1" if wal else "0"}
    if kill_after is not None:
        env[fz.ENV_KILL_AFTER] = f"{kill_after:.4f}"
    return env


def _child(store: Path, wal: bool, ledger_path: Path, **kw: Any) -> ChildOutcome:
    kill_after = kw.pop("kill_after", None)
    return run_child(FACTORY, str(store), RUN_ID, ledger_path=ledger_path, env=_env(wal, kill_after), timeout=90, **kw)


def _store_files(store: Path) -> list[Path]:
    return [p for p in store.parent.iterdir() if p.name.startswith(store.name)]


def _copy_store(src: Path, dst: Path) -> None:
    """Copy a (crashed, closed) SQLite file with its -wal/-shm/-journal and side files."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for p in _store_files(src):
        shutil.copy2(p, dst.parent / (dst.name + p.name[len(src.name) :]))


def _load_snapshot(store: Path, wal: bool) -> Any:
    async def go() -> Any:
        cp = SQLiteCheckpointer(str(store), wal=wal)
        try:
            return await cp.load(RUN_ID)
        finally:
            await cp.close()

    return asyncio.run(go())


def _stored_results(store: Path, wal: bool) -> set[str]:
    snap = _load_snapshot(store, wal)
    return {e.call_id for e in snap.entries if isinstance(e, ToolResultEntry)} if snap else set()


def _saves_by_pid(store: Path) -> Counter[int]:
    return Counter(row["pid"] for row in fz.read_lines(str(store) + ".saves"))


@dataclass
class Reference:
    output: str
    saves: int
    duration: float
    turns: int


_references: dict[bool, Reference] = {}


def _reference(wal: bool, root: Path) -> Reference:
    if wal not in _references:
        work = root / f"reference-{'wal' if wal else 'rollback'}"
        work.mkdir(parents=True, exist_ok=True)
        store = work / "ref.db"
        out = _child(store, wal, work / "ref.ledger")
        assert out.result is not None, out.stderr[-2000:]
        assert not out.result["replayed"] and out.result["model_calls"] == 5, out.result
        duration = fz.read_lines(str(store) + ".duration")[-1]["seconds"]
        saves = len(fz.read_lines(str(store) + ".saves"))
        _references[wal] = Reference(out.result["output"], saves, duration, out.result["turns"])
    return _references[wal]


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crash-fuzz")


# ---------------------------------------------------------------------- one interrupted history


@dataclass
class History:
    """A run interrupted one or more times, then re-issued until done, then re-issued once more."""

    label: str
    store: Path
    wal: bool
    crashes: list[ChildOutcome] = field(default_factory=list)
    stored_after: list[set[str]] = field(default_factory=list)  # results stored after each crash
    ledgers: list[Path] = field(default_factory=list)  # one per process, in order
    resumed: ChildOutcome | None = None
    replayed: ChildOutcome | None = None
    resume_saves: int = 0  # saves made by the finishing re-issue
    problems: list[str] = field(default_factory=list)


def _run_history(
    label: str,
    store: Path,
    wal: bool,
    kills: list[dict[str, Any]],
    *,
    base: Path | None = None,
    expect_kill: bool = True,
) -> History:
    """``kills``: one ``run_child`` keyword set per interrupted process (``base`` = a crashed store
    to start from instead of a fresh one). Then one finishing re-issue and one replay."""
    h = History(label, store, wal)
    work = store.parent
    work.mkdir(parents=True, exist_ok=True)
    if base is not None:
        _copy_store(base, store)
    for i, kw in enumerate(kills):
        lp = work / f"crash{i}.ledger"
        out = _child(store, wal, lp, **kw)
        h.ledgers.append(lp)
        h.crashes.append(out)
        if expect_kill and not out.killed:
            h.problems.append(f"process {i} was not killed ({kw}); exit {out.returncode}: {out.stderr[-1500:]}")
        if out.returncode not in (0, -9):
            h.problems.append(f"process {i} failed (exit {out.returncode}): {out.stderr[-1500:]}")
        h.stored_after.append(_stored_results(store, wal))
    before = _saves_by_pid(store)
    lp = work / "resume.ledger"
    h.resumed = _child(store, wal, lp)
    h.ledgers.append(lp)
    after = _saves_by_pid(store)
    h.resume_saves = sum(after.values()) - sum(before.values())
    lp = work / "replay.ledger"
    h.replayed = _child(store, wal, lp)
    h.ledgers.append(lp)
    return h


def _check_effects(h: History) -> list[str]:
    problems: list[str] = []
    rows = fz.read_lines(str(h.store) + ".effects")
    per_key = Counter(row["key"] for row in rows)
    for key, n in per_key.items():
        if n > 1:
            tool = next(r["tool"] for r in rows if r["key"] == key)
            problems.append(f"non-idempotent {tool} applied its effect {n} times (key {key})")
    charges = [r for r in rows if r["tool"] == "charge"]
    if len(charges) != 1:
        problems.append(f"charge applied {len(charges)} times, expected exactly once")
    return problems


def _check_reruns(h: History) -> list[str]:
    """Per process: no call starts twice; nothing stored before a process starts in it."""
    problems: list[str] = []
    stored: set[str] = set()
    for i, lp in enumerate(h.ledgers):
        starts = Counter(row["call_id"] for row in ledger(lp) if row["phase"] == "start")
        for call_id, n in starts.items():
            if n > 1:
                problems.append(f"process {i} started {call_id} {n} times")
            if call_id in stored:
                problems.append(f"process {i} re-ran {call_id}, whose result was stored before it started")
        if i < len(h.stored_after):
            stored |= h.stored_after[i]
    return problems


async def _check_session(h: History) -> list[str]:
    problems: list[str] = []
    session = SQLiteSession(str(h.store), wal=h.wal)
    try:
        segments = [s for s in await session.segments(SESSION_ID) if s.run_id == RUN_ID]
    finally:
        await session.close()
    effects = {r["call_id"] for r in fz.read_lines(str(h.store) + ".effects")}
    for seg in segments[:1]:
        calls = {e.call_id: e.name for e in seg.entries if isinstance(e, ToolCallEntry)}
        results = {e.call_id: e for e in seg.entries if isinstance(e, ToolResultEntry)}
        notify = results.get("c-notify")
        if notify is not None and notify.output == OUTCOME_UNKNOWN and "c-notify" not in effects and not h.crashes:
            problems.append("notify reported outcome unknown without any interruption")
        if notify is not None and notify.output == "sent" and "c-notify" not in effects:
            problems.append("notify reported 'sent' but no effect was applied")
        if notify is not None and notify.output not in ("sent", OUTCOME_UNKNOWN):
            problems.append(f"notify result is neither 'sent' nor outcome unknown: {notify.output!r}")
        charge = results.get("c-charge")
        if charge is None or charge.is_error or not charge.output.startswith("rcpt-"):
            problems.append(f"charge result is not a receipt: {charge}")
        if set(calls) != set(results):
            problems.append(f"calls without results: {sorted(set(calls) - set(results))}")
    return problems


def _verify(h: History, ref: Reference) -> list[str]:
    assert h.resumed is not None and h.replayed is not None
    expected = ref.output
    first_stored = h.stored_after[0] if h.stored_after else set()
    later_starts: Counter[str] = Counter()
    for lp in h.ledgers[1:]:
        later_starts.update(row["call_id"] for row in ledger(lp) if row["phase"] == "start")

    async def go() -> list[str]:
        session = SQLiteSession(str(h.store), wal=h.wal)
        try:
            problems = await check_invariants(
                session,
                SESSION_ID,
                RUN_ID,
                expected_output=expected,
                resumed=h.resumed,
                replayed=h.replayed,
                stored_before_crash=first_stored,
                starts=later_starts,
            )
        finally:
            await session.close()
        return problems + await _check_session(h)

    problems = h.problems + asyncio.run(go()) + _check_reruns(h) + _check_effects(h)
    for name, out in (("resumed", h.resumed), ("replayed", h.replayed)):
        if out.result is not None and out.result["turns"] != ref.turns:
            problems.append(f"the {name} run counts {out.result['turns']} turns, the uninterrupted one {ref.turns}")
    dupes = _duplicates(_load_snapshot(h.store, h.wal))
    if dupes:
        problems.append(f"the checkpoint holds duplicated entries: {dupes[:3]}")
    return [f"[{h.label}] {p}" for p in problems]


def _run_all(jobs: list[Callable[[], list[str]]]) -> list[str]:
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(lambda job: job(), jobs))
    return [p for r in results for p in r]


def _summary(problems: list[str]) -> str:
    return "\n".join(problems[:40]) + (f"\n... and {len(problems) - 40} more" if len(problems) > 40 else "")


# ---------------------------------------------------------------------- kill after every save

_bases: dict[bool, dict[int, tuple[Path, int]]] = {}  # wal -> k -> (crashed store copy, resume saves)


def _every_save(wal: bool, root: Path) -> tuple[list[str], dict[int, tuple[Path, int]]]:
    ref = _reference(wal, root)
    mode = "wal" if wal else "rollback"
    bases: dict[int, tuple[Path, int]] = {}

    def case(k: int) -> list[str]:
        work = root / f"every-{mode}-{k}"
        store = work / "run.db"
        work.mkdir(parents=True, exist_ok=True)
        # crash after save k, keep a copy of the crashed store for the double-crash test
        out = _child(store, wal, work / "crash0.ledger", boundary=Boundary.AFTER_SAVE, occurrence=k)
        base = root / f"base-{mode}-{k}" / "run.db"
        _copy_store(store, base)
        h = History(f"{mode} kill after save {k}/{ref.saves}", store, wal)
        h.crashes.append(out)
        h.ledgers.append(work / "crash0.ledger")
        if not out.killed:
            h.problems.append(f"not killed (exit {out.returncode}): {out.stderr[-1500:]}")
        h.stored_after.append(_stored_results(store, wal))
        before = sum(_saves_by_pid(store).values())
        h.resumed = _child(store, wal, work / "resume.ledger")
        h.ledgers.append(work / "resume.ledger")
        h.resume_saves = sum(_saves_by_pid(store).values()) - before
        h.replayed = _child(store, wal, work / "replay.ledger")
        h.ledgers.append(work / "replay.ledger")
        bases[k] = (base, h.resume_saves)
        return _verify(h, ref)

    problems = _run_all([lambda k=k: case(k) for k in range(1, ref.saves + 1)])
    _bases[wal] = bases
    return problems, bases


@pytest.mark.parametrize("wal", JOURNALS, ids=lambda w: "wal" if w else "rollback")
def test_kill_after_every_save(fuzz_root: Path, wal: bool) -> None:
    ref = _reference(wal, fuzz_root)
    assert ref.saves >= 15, f"the scenario should save often, saw {ref.saves} saves"
    problems, bases = _every_save(wal, fuzz_root)
    assert len(bases) == ref.saves
    assert not problems, _summary(problems)


@pytest.mark.parametrize("tool", ["charge", "notify"])
def test_kill_inside_non_idempotent_tool(fuzz_root: Path, tool: str) -> None:
    """The window no save boundary reaches: the effect applied, its result not stored yet."""
    ref = _reference(True, fuzz_root)
    store = fuzz_root / f"in-tool-{tool}" / "run.db"
    h = _run_history(
        f"kill inside {tool} after its effect", store, True, [{"boundary": Boundary.IN_TOOL, "tool": tool}]
    )
    problems = _verify(h, ref)
    assert not problems, _summary(problems)
    effects = Counter(row["tool"] for row in fz.read_lines(str(store) + ".effects"))
    assert effects[tool] == 1, effects

    async def notify_result() -> str:
        session = SQLiteSession(str(store), wal=True)
        try:
            (segment,) = [s for s in await session.segments(SESSION_ID) if s.run_id == RUN_ID]
        finally:
            await session.close()
        return next(e.output for e in segment.entries if isinstance(e, ToolResultEntry) and e.call_id == "c-notify")

    if tool == "notify":  # no reconciler: the dangling started call is not re-run
        assert asyncio.run(notify_result()) == OUTCOME_UNKNOWN


# ---------------------------------------------------------------------- double crash


@pytest.mark.parametrize("wal", JOURNALS, ids=lambda w: "wal" if w else "rollback")
def test_double_crash(fuzz_root: Path, wal: bool) -> None:
    ref = _reference(wal, fuzz_root)
    bases = _bases.get(wal) or _every_save(wal, fuzz_root)[1]
    mode = "wal" if wal else "rollback"
    rng = random.Random(1000 + SEED_BASE + (0 if wal else 1))
    pairs = [(k, j) for k, (_, m) in sorted(bases.items()) for j in range(1, m + 1) if m >= 1]
    chosen = pairs if len(pairs) <= DOUBLE_PAIRS else rng.sample(pairs, DOUBLE_PAIRS)
    # always include the two extremes: the earliest and the latest double kill
    for extra in (pairs[0], pairs[-1]):
        if extra not in chosen:
            chosen.append(extra)

    def case(k: int, j: int) -> list[str]:
        base, _ = bases[k]
        store = fuzz_root / f"double-{mode}-{k}-{j}" / "run.db"
        h = _run_history(
            f"{mode} kill after save {k}, then after resume save {j}",
            store,
            wal,
            [{"boundary": Boundary.AFTER_SAVE, "occurrence": j}],
            base=base,
        )
        # the first crash happened in the base: account for what it stored
        h.stored_after.insert(0, _stored_results(base, wal))
        h.ledgers.insert(0, base.parent / "none.ledger")
        h.crashes.insert(0, ChildOutcome(-9, None, ""))
        return _verify(h, ref)

    problems = _run_all([lambda k=k, j=j: case(k, j) for k, j in chosen])
    assert not problems, _summary(problems)


# ---------------------------------------------------------------------- kill at random times


@pytest.mark.parametrize("wal", [True, False], ids=lambda w: "wal" if w else "rollback")
def test_kill_at_random_times(fuzz_root: Path, wal: bool) -> None:
    ref = _reference(wal, fuzz_root)
    mode = "wal" if wal else "rollback"

    killed: list[int] = []

    def case(seed: int) -> list[str]:
        rng = random.Random(seed + SEED_BASE + (0 if wal else 500))
        kills = [{"kill_after": rng.uniform(0.0, ref.duration)}]
        if rng.random() < 0.5:  # half the seeds also kill the first re-issue at a random time
            kills.append({"kill_after": rng.uniform(0.0, ref.duration)})
        store = fuzz_root / f"random-{mode}-{seed}" / "run.db"
        h = _run_history(
            f"{mode} seed {seed} kill after {[round(k['kill_after'], 4) for k in kills]} s",
            store,
            wal,
            kills,
            expect_kill=False,  # a timer may fire after the run finished: then nothing was killed
        )
        killed.extend(1 for c in h.crashes if c.killed)
        return _verify(h, ref)

    problems = _run_all([lambda s=s: case(s) for s in range(RANDOM_SEEDS)])
    assert killed, "no random-time kill landed inside a run"
    assert not problems, _summary(problems)


# ---------------------------------------------------------------------- cancellation, in process


async def _run_in_process(store: Path, *, cancel_at: int | None = None, how: str = "token") -> tuple[Any, int]:
    """Run the scenario in this process; cancel after ``cancel_at`` events. Returns (result or error, events)."""
    hooks = AgentHooks()
    scenario = fz.build(str(store), wal=True, hooks=hooks)
    options = CheckpointOptions(scenario.checkpointer, RUN_ID)
    seen = 0
    try:
        if how == "token":
            handle = Runner.stream(
                scenario.agent, scenario.input, session=scenario.session, session_id=SESSION_ID, checkpoint=options
            )
            async for _event in handle:
                seen += 1
                if cancel_at is not None and seen == cancel_at:
                    handle.cancel("fuzz")
            try:
                return await handle.result(), seen
            except (RunCancelled, asyncio.CancelledError) as exc:
                return exc, seen
        outer: asyncio.Task[Any] | None = None

        def count(event: Any, ctx: Any) -> None:
            nonlocal seen
            seen += 1
            if cancel_at is not None and seen == cancel_at and outer is not None:
                outer.cancel()

        hooks.on_any(count)
        outer = asyncio.ensure_future(
            Runner.run(
                scenario.agent, scenario.input, session=scenario.session, session_id=SESSION_ID, checkpoint=options
            )
        )
        try:
            return await outer, seen
        except asyncio.CancelledError as exc:
            return exc, seen
    finally:
        if scenario.close is not None:
            await scenario.close()


async def _count_events(root: Path, how: str) -> tuple[str, int, int]:
    store = root / f"cancel-ref-{how}" / "run.db"
    store.parent.mkdir(parents=True, exist_ok=True)
    result, events = await _run_in_process(store, how=how)
    assert not isinstance(result, BaseException), result
    return str(result.output), result.turns, events


@pytest.mark.parametrize("how", ["token", "task"])
async def test_cancel_at_random_points_then_resume(fuzz_root: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    ref_ledger = fuzz_root / f"cancel-ref-{how}.ledger"
    monkeypatch.setenv("LOVIA_CRASH_LEDGER", str(ref_ledger))
    expected, turns, total = await _count_events(fuzz_root, how)
    assert total > 20
    problems: list[str] = []
    for seed in range(CANCEL_SEEDS):
        rng = random.Random(5000 + seed + SEED_BASE)
        cancels = [rng.randint(1, total - 1)]
        if rng.random() < 0.4:  # cancel the first resume too (it emits fewer events)
            cancels.append(rng.randint(1, total // 2))
        work = fuzz_root / f"cancel-{how}-{seed}"
        work.mkdir(parents=True, exist_ok=True)
        store = work / "run.db"
        label = f"[{how} seed {seed} cancel after events {cancels} (of {total})]"
        stored: set[str] = set()  # results stored before the current run started
        second: Any = None
        for i, cancel_at in enumerate([*cancels, None]):
            monkeypatch.setenv("LOVIA_CRASH_LEDGER", str(work / f"run{i}.ledger"))
            outcome, _ = await _run_in_process(store, cancel_at=cancel_at, how=how)
            starts = Counter(r["call_id"] for r in ledger(work / f"run{i}.ledger") if r["phase"] == "start")
            for call_id, n in starts.items():
                if n > 1:
                    problems.append(f"{label} {call_id} started {n} times in run {i}")
                if call_id in stored:
                    problems.append(f"{label} {call_id} had a stored result but ran again in run {i}")
            if cancel_at is not None and isinstance(outcome, BaseException) and await _segments(store):
                problems.append(f"{label} a cancelled run was appended to the session")
            stored |= await _stored(store)
            second = outcome
        if isinstance(second, BaseException):
            problems.append(f"{label} the resume failed: {second!r}")
            continue
        if str(second.output) != expected:
            problems.append(f"{label} resumed answer {second.output!r} != {expected!r}")
        if second.turns != turns:
            problems.append(f"{label} the resumed run counts {second.turns} turns, the uninterrupted one {turns}")
        effects = Counter(r["key"] for r in fz.read_lines(str(store) + ".effects"))
        if any(n > 1 for n in effects.values()):
            problems.append(f"{label} a non-idempotent effect was applied twice: {effects}")
        segments = await _segments(store)
        if len(segments) != 1:
            problems.append(f"{label} session holds the run {len(segments)} times")
        for seg in segments:
            calls = [e.call_id for e in seg.entries if isinstance(e, ToolCallEntry)]
            results = [e.call_id for e in seg.entries if isinstance(e, ToolResultEntry)]
            if sorted(calls) != sorted(results) or len(set(calls)) != len(calls):
                problems.append(f"{label} session segment not tool-consistent: calls {calls} results {results}")
        dupes = _duplicates(await _snapshot(store))
        if dupes:
            problems.append(f"{label} the checkpoint holds duplicated entries: {dupes[:3]}")
    assert not problems, _summary(problems)


async def _stored(store: Path) -> set[str]:
    snap = await _snapshot(store)
    return {e.call_id for e in snap.entries if isinstance(e, ToolResultEntry)} if snap else set()


async def _snapshot(store: Path) -> Any:
    cp = SQLiteCheckpointer(str(store), wal=True)
    try:
        return await cp.load(RUN_ID)
    finally:
        await cp.close()


async def _segments(store: Path) -> list[Any]:
    session = SQLiteSession(str(store), wal=True)
    try:
        return [s for s in await session.segments(SESSION_ID) if s.run_id == RUN_ID]
    finally:
        await session.close()


def _duplicates(snap: Any) -> list[str]:
    """Entries stored twice in a snapshot (every entry of this scenario is distinct)."""
    rows = [json.dumps(entry_to_dict(e), sort_keys=True) for e in snap.entries] if snap else []
    return [row for row, n in Counter(rows).items() if n > 1]
