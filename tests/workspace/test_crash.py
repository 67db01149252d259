"""SIGKILL during write_file, edit_file and a foreground shell, then resume from the checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .crash_child import BIG

CHILD = [sys.executable, "-m", "tests.workspace.crash_child"]
REPO = Path(__file__).resolve().parents[2]


def _run(scenario: str, db: Path, root: Path, phase: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CHILD, scenario, str(db), str(root), phase],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "ws"
    r.mkdir()
    return r


def _killed(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr[-2000:])


def _kill_mid_write(scenario: str, tmp_path: Path, root: Path, original: str) -> Path:
    """SIGKILL the child while the write is in flight; a lost race (the write finished first) is retried."""
    for attempt in range(4):
        db = tmp_path / f"runs-{attempt}.db"
        (root / "big.txt").write_text(original)
        proc = _run(scenario, db, root, "kill")
        if proc.returncode == -signal.SIGKILL:
            return db
        assert proc.returncode == 0, proc.stderr[-2000:]
    raise AssertionError("the child never died mid-write")


def _no_litter(root: Path) -> None:
    assert not [p.name for p in root.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
async def test_sigkill_during_write_file_then_resume(tmp_path, root):
    db = _kill_mid_write("write", tmp_path, root, "old content\n")
    assert (root / "big.txt").read_text() in ("old content\n", BIG)  # never a torn file
    resumed = _run("write", db, root, "resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (root / "big.txt").read_text() == BIG
    _no_litter(root)
    assert json.loads(resumed.stdout.splitlines()[-1])["output"].startswith("RESULT")


@pytest.mark.slow
async def test_sigkill_during_edit_file_then_resume(tmp_path, root):
    original = BIG[: len(BIG) // 2] + "MARKER-OLD\n" + BIG[len(BIG) // 2 :]
    db = _kill_mid_write("edit", tmp_path, root, original)
    assert (root / "big.txt").read_text() in (original, original.replace("MARKER-OLD", "MARKER-NEW"))
    resumed = _run("edit", db, root, "resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    final = (root / "big.txt").read_text()
    assert final.count("MARKER-NEW") == 1 and "MARKER-OLD" not in final
    _no_litter(root)


async def test_sigkill_during_a_foreground_shell_is_outcome_unknown_on_resume(tmp_path, root):
    db = tmp_path / "runs.db"
    _killed(_run("shell", db, root, "kill"))
    resumed = _run("shell", db, root, "resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    output = json.loads(resumed.stdout.splitlines()[-1])["output"]
    assert "outcome unknown" in output
    assert (root / "ledger.txt").read_text().splitlines() == ["ran"]  # the command ran exactly once
