"""What the workspace gate costs: lovia's checked operations against the bare equivalents.

Run it: ``.venv/bin/python bench/workspace_ops.py [--quick]``. Each repetition times, back to back
on the same tree: reading a file (``read_text`` vs ``Path.read_text`` on a thread), searching a
tree (``grep`` vs a plain ``os.walk`` + ``re`` loop on a thread), writing a file (``write_text``
vs a bare temporary-file + fsync + rename) and running a command (``run`` vs
``asyncio.create_subprocess_shell``). It prints the median ratio lovia / bare [min-max].
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from lovia.workspace import Workspace


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"pkg{i % 20}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text("".join(f"value_{j} = {j}  # TODO {j}\n" for j in range(40)))


def bare_grep(root: Path, rx: re.Pattern[str]) -> int:
    hits = 0
    for folder, _, names in os.walk(root):
        for name in names:
            for line in (Path(folder) / name).read_text().splitlines():
                if rx.search(line):
                    hits += 1
    return hits


def bare_atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


async def timed(fn, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        await fn()
    return time.perf_counter() - started


async def repetition(root: Path, n: int) -> dict[str, float]:
    ws = await Workspace.local(
        str(root),
        mode="trusted",
    ).open()
    target = root / "pkg1" / "mod1.py"
    rx = re.compile(r"TODO 3\d")
    pairs = {
        "read": (
            lambda: ws.read_text("pkg1/mod1.py"),
            lambda: asyncio.to_thread(target.read_text),
        ),
        "grep": (
            lambda: ws.grep(r"TODO 3\d", max_matches=1000),
            lambda: asyncio.to_thread(bare_grep, root, rx),
        ),
        "write": (
            lambda: ws.write_text("out.txt", f"{time.perf_counter()}\n"),
            lambda: asyncio.to_thread(bare_atomic_write, root / "bare.txt", f"{time.perf_counter()}\n"),
        ),
        "shell": (lambda: ws.run("true"), lambda: _bare_shell(root)),
    }
    ratios = {}
    for name, (ours, bare) in pairs.items():
        count = n if name != "grep" else max(n // 20, 3)
        ratios[name] = await timed(ours, count) / await timed(bare, count)
    await ws.close()
    return ratios


async def _bare_shell(root: Path) -> None:
    proc = await asyncio.create_subprocess_shell("true", cwd=root, stdout=asyncio.subprocess.PIPE)
    await proc.communicate()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps, n, files = (3, 20, 100) if args.quick else (7, 100, 400)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        make_tree(root, files)
        for _ in range(reps):
            for key, value in (await repetition(root, n)).items():
                results.setdefault(key, []).append(value)
    print(f"workspace operations, ratio lovia / bare (median [min-max] of {reps} repetitions)")
    for key, values in results.items():
        print(f"  {key:<6} {statistics.median(values):6.2f} [{min(values):.2f}-{max(values):.2f}]")


if __name__ == "__main__":
    asyncio.run(main())
