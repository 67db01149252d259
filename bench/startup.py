"""Start-up cost: CPU seconds of ``import lovia``, ``lovia --help`` and ``lovia web`` to its first answer.

Each figure is the CPU time (user + system) of a fresh Python process, read from
``resource.getrusage(RUSAGE_CHILDREN)`` once it exited, or from ``/proc/<pid>/stat`` for the
server, which is still running when its first answer arrives. Medians over the repetitions;
wall-clock time is not used (the machine is shared).

``lovia web`` runs in a fresh temporary directory with no model configured, so it serves the
offline demo model; the clock stops when ``POST /api/chat`` has returned the first answer.

Usage: ``python bench/startup.py [--repeats N]``. The target is an absolute figure: ``import
lovia`` at most 0.30 s of CPU on the reference 2-core machine (no earlier version to compare with).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IMPORT_TARGET = 0.30
"""CPU seconds ``import lovia`` may cost (the issue's figure)."""


@dataclass(frozen=True)
class Figures:
    """Median and spread of one measurement, in CPU seconds."""

    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def cell(self) -> str:
        return f"{self.median:.3f} s [{min(self.values):.3f}–{max(self.values):.3f}]"


def _env(home: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOVIA_")}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)  # no provider key: lovia web serves its offline demo model
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if home is not None:
        env["HOME"] = home
    return env


def child_cpu(argv: list[str], cwd: str | None = None) -> float:
    """CPU seconds a child process used from start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def proc_cpu(pid: int) -> float:
    """CPU seconds a running process (and its waited-for children) used so far, from ``/proc``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ask(port: int) -> str | None:
    """The first chat answer, or ``None`` while the server is not listening yet."""
    body = json.dumps({"message": "hello"}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/chat", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return str(json.loads(response.read())["output"])
    except (ConnectionError, urllib.error.URLError):
        return None


def web_first_answer_cpu() -> float:
    """CPU seconds of ``lovia web`` from start until its first ``POST /api/chat`` answer."""
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "lovia.cli", "web", "--port", str(port)],
            cwd=tmp,
            env=_env(home=tmp),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                if server.poll() is not None:
                    err = server.stderr.read().decode() if server.stderr else ""
                    raise RuntimeError(f"lovia web exited: {err[-2000:]}")
                if _ask(port) is not None:
                    return proc_cpu(server.pid)
                if time.monotonic() > deadline:
                    raise RuntimeError("lovia web gave no answer within 120 s")
                time.sleep(0.05)
        finally:
            server.terminate()
            server.wait(timeout=30)


def measure(repeats: int) -> dict[str, Figures]:
    """Every start-up figure, ``repeats`` times each, interleaved so load spikes hit all alike."""
    python = sys.executable
    lovia_cli = [python, "-m", "lovia.cli", "--help"]
    runs: dict[str, list[float]] = {"python -c pass": [], "import lovia": [], "lovia --help": [], "lovia web": []}
    for _ in range(repeats):
        runs["python -c pass"].append(child_cpu([python, "-c", "pass"]))
        runs["import lovia"].append(child_cpu([python, "-c", "import lovia"]))
        runs["lovia --help"].append(child_cpu(lovia_cli))
        runs["lovia web"].append(web_first_answer_cpu())
    return {name: Figures(values) for name, values in runs.items()}


def report(figures: dict[str, Figures]) -> list[str]:
    """The table and the PASS/MISS line, as printed."""
    bytecode = "off (PYTHONDONTWRITEBYTECODE: sources are compiled each run)" if sys.dont_write_bytecode else "on"
    repeats = len(figures["import lovia"].values)
    lines = [
        f"Start-up CPU (user + system), median [min–max] of {repeats}; bytecode cache {bytecode}.",
        "",
        "| command | CPU |",
        "| --- | --- |",
    ]
    labels = {"lovia web": "lovia web, to its first chat answer (demo model)"}
    lines += [f"| {labels.get(name, name)} | {f.cell()} |" for name, f in figures.items()]
    value = figures["import lovia"].median
    verdict = "PASS" if value <= IMPORT_TARGET else f"MISS (by {value / IMPORT_TARGET:.2f}x the limit)"
    lines += ["", f"- **{verdict}** import lovia <= {IMPORT_TARGET:.2f} s CPU: {figures['import lovia'].cell()}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=10, help="repetitions of each measurement (default 10)")
    args = parser.parse_args(argv)
    figures = measure(args.repeats)
    for line in report(figures):
        print(line)
    return 0 if figures["import lovia"].median <= IMPORT_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
