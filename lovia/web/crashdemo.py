"""``lovia demo``: a run is SIGKILLed in the middle of a slow tool, then resumed from its checkpoint.

Offline and core-only (no web extra): a child process runs a scripted agent with two tools,
``fetch_rows`` (fast) and ``build_report`` (slow). The parent watches the checkpoint, kills the
child with SIGKILL while ``build_report`` runs, shows what the checkpoint kept, then re-issues the
same call with the same ``run_id``: the stored ``fetch_rows`` result is reused (not re-run) and
only the interrupted ``build_report`` call runs again.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..checkpointer import CheckpointOptions
from ..providers.scripted import ScriptedProvider, call, text
from ..runner import Runner
from ..tools import tool
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

__all__ = ["demo_agent", "demo_agents", "run_demo"]

RUN_ID = "demo-report-run"
SESSION_ID = "demo-session"
PROMPT = "Build the weekly sales report."
DEFAULT_DB = Path(".lovia") / "demo" / "demo.db"
LEASE_TTL = 1.0
"""The worker's run lease: once it is SIGKILLed, the lease runs out and the run lists as interrupted."""


def _log(line: str) -> None:
    log = os.environ.get("LOVIA_DEMO_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


@tool
def fetch_rows(source: str) -> list[dict[str, Any]]:
    """Fetch the sales rows of a source (fast)."""
    _log("fetch_rows")
    return [{"region": "north", "sales": 120}, {"region": "south", "sales": 95}, {"region": "west", "sales": 143}]


@tool
async def build_report(rows: int) -> str:
    """Build the report (slow: about two seconds)."""
    _log("build_report:start")
    for _ in range(20):
        await asyncio.sleep(float(os.environ.get("LOVIA_DEMO_STEP", "0.1")))
    _log("build_report:done")
    return f"report of {rows} rows: total 358, best region west"


def _script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    """Deterministic: the next step depends only on how many tool results the transcript holds."""
    done = sum(1 for e in entries if isinstance(e, ToolResultEntry))
    if done == 0:
        return call("fetch_rows", {"source": "sales.csv"}, call_id="call_fetch")
    if done == 1:
        return call("build_report", {"rows": 3}, call_id="call_report")
    return text("The weekly report is ready: total sales 358, best region **west**.")


def demo_agent() -> Agent[Any]:
    """The scripted agent of the demo (a fresh provider each call)."""
    return Agent(name="reporter", model=ScriptedProvider(_script), tools=[fetch_rows, build_report])


def demo_agents() -> dict[str, Agent[Any]]:
    """``{name: agent}`` of the demo, for ``lovia runs resume ID --app lovia.web.crashdemo:demo_agents``."""
    return {"reporter": demo_agent()}


async def _run(db: str, *, lease: bool) -> Any:
    from ..stores import SQLiteCheckpointer, SQLiteSession

    async with SQLiteCheckpointer(db, wal=True) as cp, SQLiteSession(db, wal=True) as session:
        options = CheckpointOptions(cp, RUN_ID, lease_ttl=LEASE_TTL if lease else None)
        return await Runner.run(demo_agent(), PROMPT, checkpoint=options, session=session, session_id=SESSION_ID)


async def _child(db: str) -> None:
    await _run(db, lease=True)


def _describe(entries: list[TranscriptEntry]) -> list[str]:
    results = {e.call_id for e in entries if isinstance(e, ToolResultEntry)}
    lines = []
    for e in entries:
        if isinstance(e, ToolCallEntry):
            state = "result stored" if e.call_id in results else "NO result (interrupted)"
            lines.append(f"      tool call {e.name:<13} {state}")
    return lines


class _Steps:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.n = 0

    def say(self, line: str) -> None:
        self.n += 1
        print(f"[{time.monotonic() - self.t0:5.1f}s] {self.n}. {line}", flush=True)


def _wait_for(predicate: Any, timeout: float, bar: str = "") -> bool:
    deadline = time.monotonic() + timeout
    ticks = 0
    live = bool(bar) and sys.stdout.isatty()
    if bar and not live:
        print(f"      {bar}...", flush=True)
    while time.monotonic() < deadline:
        if predicate():
            if live:
                print(flush=True)
            return True
        if live:
            ticks += 1
            print(f"\r      {bar} [{'#' * (ticks % 21):<20}]", end="", flush=True)
        time.sleep(0.05)
    return False


async def _progress(task: asyncio.Future[Any], log: Path) -> None:
    """A progress line while the resumed run works (a bar on a terminal, one line otherwise)."""
    live = sys.stdout.isatty()
    if not live:
        print("      resuming: build_report runs again...", flush=True)
    ticks = 0
    while not task.done():
        if live:
            ticks += 1
            state = "finishing" if _count(log, "build_report:done") else "build_report running again"
            print(f"\r      {state:<28} [{'#' * min(ticks // 2, 20):<20}]", end="", flush=True)
        await asyncio.sleep(0.05)
    if live:
        print(flush=True)


def _count(log: Path, what: str) -> int:
    return log.read_text(encoding="utf-8").splitlines().count(what) if log.exists() else 0


def run_demo(*, fast: bool = False, db: str | os.PathLike[str] | None = None) -> int:
    """Run the crash-and-resume demo, keeping its files (default ``./.lovia/demo``); 0 when resume behaved."""
    path = Path(db) if db is not None else DEFAULT_DB
    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_forget_previous(str(path)))
    log = path.parent / "tools.log"
    log.unlink(missing_ok=True)
    code = _run_demo(str(path), log, fast=fast)
    _print_where(path, log)
    return code


async def _forget_previous(db: str) -> None:
    """A second demo starts over: its own run and session go, nothing else in the file."""
    from ..stores import SQLiteCheckpointer, SQLiteSession

    async with SQLiteCheckpointer(db, wal=True) as cp, SQLiteSession(db, wal=True) as session:
        await cp.delete(RUN_ID)
        await session.clear(SESSION_ID)


def _print_where(db: Path, log: Path) -> None:
    where = str(db)
    flag = "" if os.environ.get("LOVIA_DB") == where else f" --db {where}"
    cmd = lovia_command()
    print(f"\nthe demo's files are kept: {where} (store) and {log} (tool log). Inspect them with:")
    print(f"  {cmd} runs ls{flag}")
    print(f"  {cmd} runs show {RUN_ID}{flag}")
    print(f"  {cmd} sessions show {SESSION_ID}{flag}")


def lovia_command() -> str:
    """How the reader can call ``lovia`` from where they are: bare when it is on PATH, else the venv's script.

    README installs into ``./.venv`` without activating it, so right after ``lovia demo`` a bare
    ``lovia`` is usually not found; the script beside this interpreter is.
    """
    script = Path(sys.executable).parent / "lovia"
    found = shutil.which("lovia")
    if found and Path(found).resolve() == script.resolve():
        return "lovia"
    if not script.exists():
        return "lovia"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def _run_demo(db: str, log: Path, *, fast: bool) -> int:
    env = {**os.environ, "LOVIA_DEMO_LOG": str(log), "LOVIA_DEMO_STEP": "0.1"}
    steps = _Steps()
    print("lovia demo: a run killed mid-tool and resumed from its checkpoint (offline, scripted model)\n")
    steps.say(f"start a worker process running agent 'reporter' as run_id={RUN_ID!r} (store: {db})")
    child = subprocess.Popen([sys.executable, "-m", "lovia.web.crashdemo", "--child", db], env=env)
    steps.say(f"worker pid {child.pid}: the model calls fetch_rows, then build_report (slow)")
    if not _wait_for(lambda: _count(log, "build_report:start") > 0, 30, "waiting for build_report to start"):
        child.kill()
        print("the worker never reached build_report", file=sys.stderr)
        return 1
    time.sleep(0.1 if fast else 0.6)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    steps.say(f"SIGKILL the worker in the middle of build_report (exit {child.returncode})")
    return asyncio.run(_resume_part(db, log, steps))


async def _lease_gone(db: str) -> None:
    """Wait until the dead worker's lease ran out (then ``lovia runs ls`` lists the run as interrupted)."""
    deadline = time.monotonic() + LEASE_TTL * 5 + 5
    while time.monotonic() < deadline and _lease_expiry(db) > time.time():
        await asyncio.sleep(0.05)


def _lease_expiry(db: str) -> float:
    """When the demo run's lease expires (0 when there is none); read-only, like ``lovia runs ls``."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT expires_at FROM run_leases WHERE run_id = ?", (RUN_ID,)).fetchone()
    except sqlite3.Error:
        return 0.0
    return float(row[0]) if row else 0.0


async def _resume_part(db: str, log: Path, steps: _Steps) -> int:
    from ..stores import SQLiteCheckpointer

    os.environ["LOVIA_DEMO_LOG"] = str(log)
    async with SQLiteCheckpointer(db, wal=True) as cp:
        snap = await cp.load(RUN_ID)
        assert snap is not None
        steps.say(f"the checkpoint survived: status={snap.status!r}, {len(snap.entries)} entries, turn {snap.turns}")
        for line in _describe(snap.entries):
            print(line)
    await _lease_gone(db)
    steps.say(f"the dead worker's {LEASE_TTL:g} s lease ran out: `lovia runs ls` lists the run as interrupted")
    steps.say("re-issue the same call with the same run_id (no new input is needed)")
    task = asyncio.ensure_future(_run(db, lease=False))
    await _progress(task, log)
    result = await task
    fetches, reports = _count(log, "fetch_rows"), _count(log, "build_report:start")
    steps.say(f"resumed run finished: {result.output}")
    print(f"      fetch_rows executed {fetches} time(s) in total: its stored result was reused, not re-run")
    print(f"      build_report started {reports} time(s): the interrupted call ran again, once")
    ok = fetches == 1 and reports == 2 and _count(log, "build_report:done") == 1
    print("\nok: completed tool results were not re-run" if ok else "\nunexpected tool counts", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        asyncio.run(_child(sys.argv[2]))
