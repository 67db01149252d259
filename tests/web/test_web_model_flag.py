"""`lovia web --model`: the default agent's model from the command line, winning over saved Settings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# 0.9.119's own Settings file: one profile, model "gpt-x" at a closed local port.
SAVED = ROOT.parent / "shared" / "fixtures" / "lovia-0.9.119" / "config.json"


def _web(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOVIA_MODEL", "LOVIA_APP")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(cwd), OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="sk-x")
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", "web", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=90
    )


def test_help_names_the_flag_and_its_variable(tmp_path: Path) -> None:
    out = _web(tmp_path, "--help").stdout
    assert "--model MODEL" in out and "LOVIA_MODEL" in out


@pytest.mark.skipif(not SAVED.exists(), reason="needs ../shared/fixtures beside the repository")
def test_the_flag_wins_over_a_model_saved_in_settings(tmp_path: Path) -> None:
    (tmp_path / ".lovia").mkdir()
    shutil.copy(SAVED, tmp_path / ".lovia" / "config.json")
    saved = _web(tmp_path, "--check")
    flagged = _web(tmp_path, "--check", "--model", "openai:gpt-from-flag")
    assert "gpt-x" in saved.stdout + saved.stderr
    assert "gpt-from-flag" in flagged.stdout + flagged.stderr
    assert "gpt-x" not in flagged.stdout + flagged.stderr


def test_the_flag_is_refused_with_an_app(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text("from lovia import Agent\nagent = Agent(name='a', model='openai:gpt-x')\n")
    out = _web(tmp_path, "--app", "mine:agent", "--model", "openai:gpt-y", "--check")
    assert out.returncode == 2 and "--model" in out.stderr and "hint:" in out.stderr
