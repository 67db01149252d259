"""Benchmark: Compaction policy time per turn as a tool-heavy transcript grows to 2,000 entries.

Each turn appends one call/result pair (outputs alternate 6,000 and 600 characters) and asks the
policy for the view, as the run loop does. Compactions (rare, by design: hysteresis) are counted
separately; the per-turn figure that matters is the steady state, which should stay flat.

Run: ``.venv/bin/python bench/context_policy.py``
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from lovia.context import Compaction, CompactionRequest, InMemoryResultStore
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

ENTRIES = 2_000
WINDOW = 200_000


def pair(i: int) -> list[TranscriptEntry]:
    size = 6_000 if i % 2 == 0 else 600
    return [
        ToolCallEntry(call_id=f"c{i}", name="fetch", arguments=f'{{"i": {i}}}'),
        ToolResultEntry(call_id=f"c{i}", output=(f"[{i}] " + "data " * size)[:size]),
    ]


async def main() -> None:
    policy = Compaction(context_window=WINDOW, store=InMemoryResultStore())
    transcript: list[TranscriptEntry] = [
        InputEntry(role="system", content="sys"),
        InputEntry(role="user", content="go"),
    ]
    scratch: dict[str, Any] = {}
    timings: list[tuple[int, float, bool]] = []
    i = 0
    while len(transcript) < ENTRIES:
        transcript.extend(pair(i))
        i += 1
        t0 = time.perf_counter()
        res = await policy.compact(CompactionRequest(entries=transcript, provider=None, model=None, scratch=scratch))
        timings.append((len(transcript), time.perf_counter() - t0, res.compacted))

    def steady_near(n: int) -> float:
        window = [t for size, t, compacted in timings if abs(size - n) <= 100 and not compacted]
        return statistics.median(window) * 1e6

    small, large = steady_near(200), steady_near(ENTRIES - 100)
    compactions = [(size, t * 1e3) for size, t, compacted in timings if compacted]
    print(f"turns: {len(timings)}, final transcript: {len(transcript)} entries, compactions: {len(compactions)}")
    print(f"steady per-turn time at ~200 entries:  {small:8.1f} us")
    print(f"steady per-turn time at ~{ENTRIES - 100} entries: {large:8.1f} us")
    print(f"ratio large/small: {large / small:.2f}")
    if compactions:
        worst = max(compactions, key=lambda c: c[1])
        print(
            f"compaction turns: mean {statistics.mean(c[1] for c in compactions):.2f} ms, worst {worst[1]:.2f} ms at "
            f"{worst[0]} entries"
        )
    print(f"final view: {len(res.entries)} entries, ~{res.tokens_after} tokens (transcript ~{res.tokens_before})")


if __name__ == "__main__":
    asyncio.run(main())
