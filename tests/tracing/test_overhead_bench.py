"""The tracing overhead benchmark runs end to end (tiny counts) and reports every workload."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tracing_overhead.py"


def test_the_benchmark_reports_overhead_floor_and_a_verdict_per_workload() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "4", "--repeats", "2"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for profile in ("scripted", "streamed", "http"):
        # The three traced modes exported the same six spans per run (the floors replay what lovia emits).
        assert f"{profile}: 2 steps/run, 6 spans/run" in text, text
        assert re.search(
            rf"^  (PASS|MISS) {profile}: [+-]\d+\.\d% per step \(CPU time\) against at most 15%", text, re.M
        )
    assert len(re.findall(r"overhead per step, on vs off: [+-]\d", text)) == 4  # http has a wall-clock block too
    assert len(re.findall(r"SDK floor, sdk vs off: +[+-]\d", text)) == 4
    assert len(re.findall(r"direct-path floor, dir vs off: +[+-]\d", text)) == 4
    assert text.count("lovia's own work on it") == 3
    assert text.count("lovia's adapter on top") == 3
    assert text.rstrip().splitlines()[-1].startswith("overall: ")
