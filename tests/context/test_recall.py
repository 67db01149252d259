"""recall_tool_result: archived and cleared outputs come back; the tool never re-runs."""

from __future__ import annotations

from typing import Any

from lovia.context import Compaction, FileResultStore, InMemoryResultStore, content_key
from lovia.run_context import RunContext
from lovia.tools.recall import find_tool_result, make_recall_tool
from lovia.transcript import InputEntry, ToolResultEntry

from .helpers import SYSTEM, request, tool_turn


def ctx_with(entries) -> RunContext[Any]:
    return RunContext(context=None, agent=None, run_id="r1", entries=list(entries))  # type: ignore[arg-type]


async def test_lookup_order_store_then_call_id_then_digest():
    store = InMemoryResultStore()
    entries = [*tool_turn(0, 50), *tool_turn(1, 60)]
    await store.put("call_0", "from the store")
    assert await find_tool_result("call_0", entries, store) == "from the store"
    assert await find_tool_result("call_1", entries, store) == entries[3].output
    digest = content_key(entries[1].output)
    assert await find_tool_result(digest, entries, None) == entries[1].output
    assert await find_tool_result("nope", entries, store) is None
    assert await find_tool_result("../../etc/passwd", entries, FileResultStore("/tmp/none")) is None


async def test_the_tool_reports_not_found_politely():
    recall = make_recall_tool(InMemoryResultStore())
    assert recall.name == "recall_tool_result"
    assert list(recall.parameters["properties"]) == ["ref"]
    out = await recall.invoke({"ref": "missing"}, ctx_with([]))
    assert "No stored tool output" in out


async def test_offloaded_output_is_recalled_from_a_file_store_after_the_transcript_lost_it(tmp_path):
    policy = Compaction(context_window=20_000, reserve_output_tokens=2_000, store=FileResultStore(tmp_path))
    transcript = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(30):
        transcript.extend(tool_turn(i, 6_000))
    res = await policy.compact(request(transcript, {}, tools=policy.tools()))
    marker = res.entries[3]
    assert isinstance(marker, ToolResultEntry) and marker.call_id == "call_0"
    digest = content_key(transcript[3].output)
    assert f'recall_tool_result(ref="{digest}")' in marker.output
    assert marker.output.startswith(transcript[3].output[:400])
    # a fresh process: new store object on the same directory, transcript trimmed to nothing useful
    trimmed = [ToolResultEntry(call_id="call_0", output="[trimmed]")]
    recall = make_recall_tool(FileResultStore(tmp_path))
    assert await recall.invoke({"ref": digest}, ctx_with(trimmed)) == transcript[3].output


async def test_cleared_output_is_recalled_from_the_live_transcript_by_call_id():
    policy = Compaction(context_window=20_000, reserve_output_tokens=2_000)  # no store: clearing only
    transcript = [SYSTEM, InputEntry(role="user", content="go")]
    for i in range(30):
        transcript.extend(tool_turn(i, 3_000))
    res = await policy.compact(request(transcript, {}, tools=policy.tools()))
    assert 'recall_tool_result(ref="call_0")' in res.entries[3].output
    (recall,) = policy.tools()
    assert await recall.invoke({"ref": "call_0"}, ctx_with(transcript)) == transcript[3].output
