"""The suite's own plumbing: a test that logs hostile text does not end a parallel run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_a_lone_surrogate_in_captured_logs_does_not_crash_the_xdist_transport(tmp_path: Path) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # this folder is the run's root: none of our options
    (tmp_path / "test_hostile_log.py").write_text(
        "import logging\n\n"
        "def test_logs_hostile_text():\n"
        "    logging.getLogger('fuzz').warning('text with a lone surrogate: \\ud800')\n\n"
        "def test_after_it():\n"
        "    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
