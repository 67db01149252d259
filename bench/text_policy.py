"""Cost of the text policy (lone surrogates -> U+FFFD) in the run loop, as a ratio.

Needs only lovia. Run from the repository root:

    .venv/bin/python bench/text_policy.py

Workload: "one tool call, then a final answer" with a scripted model and non-ASCII text in every
message (the policy's slow path is taken on every string), no persistence, so the figure is loop
time only. Runs alternate one by one between the policy as shipped and the policy's functions
replaced by the identity, so both see the same machine load; each repetition sums 200 runs of
each. Printed: the median [min-max] over repetitions of ``with policy / without`` (1.00 = free).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import lovia.run.loop as loop_module
import lovia.run.model_call as model_call_module
from lovia import Agent, Runner, tool
from lovia.testing import ScriptedProvider, call, text

RUNS = 200
REPEATS = 9
QUESTION = "Wie viel ist 2 + 3? Antworte bitte kurz, mit Einheit – danke! 🙂"
ANSWER = "2 + 3 = 5 (fünf). Gern geschehen – bis bald! ✓"
SHIPPED = (loop_module.clean_entries, model_call_module.clean_text)


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"Ergebnis: {a + b} ✓ — überprüft"


def _identity(value: Any) -> Any:
    return value


def _policy(on: bool) -> None:
    if on:
        loop_module.clean_entries, model_call_module.clean_text = SHIPPED  # type: ignore[assignment]
    else:
        loop_module.clean_entries = lambda entries: list(entries)  # type: ignore[assignment]
        model_call_module.clean_text = _identity  # type: ignore[assignment]


async def one_run() -> float:
    agent = Agent(name="calc", model=ScriptedProvider([call("add", {"a": 2, "b": 3}), text(ANSWER)]), tools=[add])
    start = time.perf_counter()
    await Runner.run(agent, QUESTION)
    return time.perf_counter() - start


async def main() -> None:
    ratios: list[float] = []
    totals = {True: 0.0, False: 0.0}
    for _ in range(20):
        await one_run()  # warm up
    try:
        for rep in range(REPEATS):
            spent = {True: 0.0, False: 0.0}
            for i in range(2 * RUNS):
                on = (i + rep) % 2 == 0
                _policy(on)
                spent[on] += await one_run()
            ratios.append(spent[True] / spent[False])
            totals[True] += spent[True]
            totals[False] += spent[False]
    finally:
        _policy(True)
    n = REPEATS * RUNS
    print(f"per run: with policy {totals[True] / n * 1e3:.3f} ms, without {totals[False] / n * 1e3:.3f} ms")
    print(
        f"ratio with/without: {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] over {REPEATS} x "
        f"{RUNS} runs"
    )


if __name__ == "__main__":
    asyncio.run(main())
