"""`lovia eval` end to end in real subprocesses: table, JSON, JUnit, baselines, SIGKILL and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from lovia.cli import main

SUITE = str(Path(__file__).with_name("suite_math.py"))
ALL_CALLS = 22 * 2 + 3  # 22 tool cases of two turns, a greeting, a refusal and its judge


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_")}
    env["EVAL_CALL_LOG"] = str(tmp / "calls.log")
    env.update(extra)
    return env


def _lovia(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "lovia.cli", "eval", SUITE, "--checkpoint", str(tmp / "eval.db"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp, **env), cwd=tmp, timeout=120)


def _calls(tmp: Path) -> Counter[str]:
    log = tmp / "calls.log"
    return Counter(log.read_text().split("\n")[:-1]) if log.exists() else Counter()


def test_a_passing_suite_prints_a_table_and_writes_json_and_junit(tmp_path: Path) -> None:
    out = _lovia(tmp_path, "--json", "r.json", "--junit", "ci/junit.xml")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("eval: 24/24 cases passed (100%) · 24 samples")
    assert "  ✓ polite refusal  1/1" in out.stdout
    assert out.stderr.count("✓") == 24 and "[24/24]" in out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and len(report["cases"]) == 24
    judge = next(c for c in report["cases"] if c["name"] == "polite refusal")
    assert judge["samples"][0]["checks"][0] == {
        "name": "llm_judge",
        "passed": True,
        "score": 0.9,
        "reason": "polite and clear",
    }
    suite = ET.parse(tmp_path / "ci" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "24" and suite.get("failures") == "0"
    assert sum(_calls(tmp_path).values()) == ALL_CALLS
    # A finished suite leaves no checkpoints behind: the next run evaluates again from scratch.
    assert _lovia(tmp_path).returncode == 0
    assert sum(_calls(tmp_path).values()) == 2 * ALL_CALLS


def test_a_regression_against_the_baseline_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In process (the same `main` the console script calls) to keep the test quick.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVAL_BREAK", raising=False)
    base = ["eval", SUITE, "--checkpoint", str(tmp_path / "eval.db"), "--quiet"]
    assert main([*base, "--save-baseline", "baseline.json"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("EVAL_BREAK", "add 3 10")
    assert main([*base, "--baseline", "baseline.json", "--junit", "j.xml", "--json", "now.json"]) == 1
    out = capsys.readouterr().out
    assert "eval: 23/24 cases passed" in out
    assert "✗ add 3 10" in out and "contains('13')" in out
    assert "diff: REGRESSED" in out and "regressed: add 3 10" in out
    failed = [tc for tc in ET.parse(tmp_path / "j.xml").getroot().iter("testcase") if tc.find("failure") is not None]
    assert [tc.get("name") for tc in failed] == ["add 3 10"]
    assert json.loads((tmp_path / "now.json").read_text())["passed"] is False
    # The same failure is no regression against a baseline in which it already failed.
    assert main([*base, "--baseline", "now.json"]) == 0
    assert "diff: ok" in capsys.readouterr().out
    # Without a baseline a failing case fails the command.
    assert main(base) == 1


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert "no suite file" in err and "hint:" in err
    bad = tmp_path / "empty_suite.py"
    bad.write_text("cases = []\n")
    assert main(["eval", str(bad)]) == 2
    assert "defines no agent" in capsys.readouterr().err
    assert main(["eval", SUITE, "--baseline", str(tmp_path / "missing.json")]) == 2
    assert "no report at" in capsys.readouterr().err


def test_sigkill_mid_suite_then_rerun_finishes_only_the_missing_cases(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "lovia.cli",
        "eval",
        SUITE,
        "--checkpoint",
        str(tmp_path / "eval.db"),
        "--concurrency",
        "2",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path, EVAL_DELAY="0.01"),
        cwd=tmp_path,
    )
    assert proc.stderr is not None
    finished: list[str] = []
    deadline = time.monotonic() + 60
    while len(finished) < 8 and time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "the suite ended before it could be killed"
        if line.startswith("["):
            finished.append(line.split("✓ ", 1)[1].split("  ")[0])
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL and len(finished) == 8
    first = _calls(tmp_path)
    assert 0 < sum(first.values()) < ALL_CALLS
    (tmp_path / "calls.log").unlink()

    out = _lovia(tmp_path, "--json", "r.json")
    assert out.returncode == 0, out.stderr
    second = _calls(tmp_path)
    assert not set(finished) & set(second), "a finished case ran its model again"
    never_started = {f"add {a} {a * 3 + 1}" for a in range(22)} - set(first)
    assert never_started, "the kill came too late to leave cases unstarted"
    assert all(second[name] == 2 for name in never_started)
    assert sum(second.values()) < ALL_CALLS
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and len(report["cases"]) == 24
    resumed = {c["name"] for c in report["cases"] if c["samples"][0]["resumed"]}
    assert set(finished) <= resumed
    assert "(resumed)" in out.stderr
