"""examples/eval_suite.py works both as a script and as a `lovia eval` suite file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "eval_suite.py"


def test_example_as_a_script() -> None:
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith("eval: 4/4 cases passed (100%)")
    assert "diff: REGRESSED" in out and "regressed: refund policy" in out


def test_example_as_a_suite_file(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "lovia.cli", "eval", str(EXAMPLE), "--junit", "j.xml", "--no-checkpoint", "--quiet"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "✓ tone" in out.stdout and out.stderr == ""
    assert 'testsuite name="support-desk" tests="4" failures="0"' in (tmp_path / "j.xml").read_text()
