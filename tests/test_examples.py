"""Every example in examples/ runs offline and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_crash_and_resume_example():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "crash_and_resume.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = proc.stdout
    assert "killed (SIGKILL) mid-tool" in out
    assert out.count("measuring a") == 1, "the stored result of measure(a) was not re-run"
    assert out.count("measuring b") == 2, "the dangling call ran again"
    assert "finished: 'Total: 42.'" in out
    assert "replayed from the checkpoint: 'Total: 42.' (model calls in this process: 0)" in out
    assert "status=completed" in out and "session: 1 run(s)" in out


@pytest.mark.skipif(not Path("/usr/bin/redis-server").exists(), reason="redis-server is not installed")
def test_celery_worker_crash_example():
    pytest.importorskip("celery")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "celery_worker_crash.py")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "SIGKILL the worker's pool process" in out
    for n in (1, 2, 3):
        line = next(line for line in out.splitlines() if line.startswith(f"order-{n}:"))
        assert f"'Order {n} is on its way.'" in line and "shipped 1x, session: 1 run(s)" in line, line
    first = next(line for line in out.splitlines() if line.startswith("order-1:"))
    assert "ship() ran 2x" in first, first  # the call in flight ran again; its effect did not
