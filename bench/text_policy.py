"""Cost of the text policy (lone surrogates -> U+FFFD) in the run loop, as a ratio.

Needs only lovia. Run from the repository root:

    .venv/bin/python bench/text_policy.py

Each repetition times 200 back-to-back runs ("one tool call, then a final answer", scripted model,
non-ASCII text in every message, with a SQLite checkpoint) twice, moments apart: once as shipped
and once with the policy's functions replaced by the identity in the loop (alternating which
goes first). The figure printed is
the median [min-max] over repetitions of ``with policy / without policy`` (1.00 = free).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import lovia.run.loop as loop_module
import lovia.run.model_call as model_call_module
from lovia import Agent, CheckpointOptions, Runner, SQLiteCheckpointer, tool
from lovia.testing import ScriptedProvider, call, text

RUNS = 200
REPEATS = 7
QUESTION = "Wie viel ist 2 + 3? Antworte bitte kurz, mit Einheit – danke! 🙂"
ANSWER = "2 + 3 = 5 (fünf). Gern geschehen – bis bald! ✓"


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"Ergebnis: {a + b} ✓ — überprüft"


async def batch(cp: SQLiteCheckpointer, tag: str) -> float:
    start = time.perf_counter()
    for i in range(RUNS):
        model = ScriptedProvider([call("add", {"a": 2, "b": 3}), text(ANSWER)])
        agent = Agent(name="calc", model=model, tools=[add])
        await Runner.run(agent, QUESTION, checkpoint=CheckpointOptions(cp, f"{tag}-{i}"))
    return time.perf_counter() - start


def _identity(value: Any) -> Any:
    return value


async def main() -> None:
    ratios = []
    on_off: list[tuple[float, float]] = []
    shipped = (loop_module.clean_entries, model_call_module.clean_text)
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteCheckpointer(Path(tmp) / "b.db", wal=True) as cp:
            await batch(cp, "warm")
            for rep in range(REPEATS):
                timed = {}
                for policy in (True, False) if rep % 2 == 0 else (False, True):  # alternate the order
                    if policy:
                        loop_module.clean_entries, model_call_module.clean_text = shipped  # type: ignore[assignment]
                    else:
                        loop_module.clean_entries = lambda entries: list(entries)  # type: ignore[assignment]
                        model_call_module.clean_text = _identity  # type: ignore[assignment]
                    timed[policy] = await batch(cp, f"{policy}-{rep}")
                with_policy, without = timed[True], timed[False]
                ratios.append(with_policy / without)
                on_off.append((with_policy / RUNS, without / RUNS))
    loop_module.clean_entries, model_call_module.clean_text = shipped  # type: ignore[assignment]
    print(
        f"per run, with policy: {statistics.median(a for a, _ in on_off) * 1e3:.3f} ms; "
        f"without: {statistics.median(b for _, b in on_off) * 1e3:.3f} ms"
    )
    print(
        f"ratio with/without: {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] "
        f"over {REPEATS} repetitions of {RUNS} runs"
    )


if __name__ == "__main__":
    asyncio.run(main())
