"""Run starts reuse what earlier runs computed, and the result is what a fresh computation gives.

Compaction seeds a new run's bookkeeping from the run whose history it continues (same entry
objects, as the stores' history cache hands out); here a shared policy is compared, run after
run, with a brand-new policy on the same request, including runs where decisions (cleared tool
results) are carried between runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia.context import Compaction, CompactionRequest
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry, entry_to_dict


def _run(i: int, size: int) -> list[Any]:
    return [
        InputEntry(role="user", content=f"question {i}"),
        ToolCallEntry(call_id=f"call_{i}", name="search", arguments=json.dumps({"q": i})),
        ToolResultEntry(call_id=f"call_{i}", output=(f"[{i}] " + "lorem ipsum " * size)[: size * 10]),
        AssistantTextEntry(content=f"answer {i}"),
    ]


def _view(result: Any) -> list[str]:
    return [json.dumps(entry_to_dict(e), sort_keys=True) for e in result.entries]


@pytest.mark.parametrize("window", [None, 3_000])
async def test_a_shared_policy_equals_a_fresh_one_run_after_run(window):
    shared = Compaction(context_window=window)
    rebuilds: list[int] = []
    rebuild = shared._rebuild

    def counting(cache: Any, entries: Any) -> None:
        rebuilds.append(len(entries))
        rebuild(cache, entries)

    shared._rebuild = counting  # type: ignore[method-assign]
    history: list[Any] = []
    carried: dict[str, Any] = {}
    decided = False
    for i in range(12):
        own = _run(i, 40 + 13 * i)
        system = InputEntry(role="system", content="You search.")  # rebuilt by every run
        entries = [system, *history, *own]
        mine_scratch, fresh_scratch = dict(carried), dict(carried)
        mine = await shared.compact(CompactionRequest(entries=entries, scratch=mine_scratch))
        fresh = await Compaction(context_window=window).compact(
            CompactionRequest(entries=entries, scratch=fresh_scratch)
        )
        assert _view(mine) == _view(fresh), f"run {i}"
        assert (mine.tokens_before, mine.tokens_after, mine.compacted) == (
            fresh.tokens_before,
            fresh.tokens_after,
            fresh.compacted,
        )
        assert mine_scratch == fresh_scratch
        decided = decided or bool(mine_scratch.get("cleared") or mine_scratch.get("offloaded"))
        history += own
        carried = mine_scratch  # what the run carries into its segment's meta
    assert decided == (window is not None), "the small window must make decisions that runs carry"
    assert len(rebuilds) <= 2, f"later runs must start from the earlier run's bookkeeping: {rebuilds}"
