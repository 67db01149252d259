"""``lovia.web.sse``: frames as ``{event, data}`` dicts, their bytes, and whole runs encoded with ``encode_stream``."""

from __future__ import annotations

import json

from lovia import Runner, events
from lovia.exceptions import MaxTurnsExceeded
from lovia.messages import ToolCall, Usage
from lovia.web.sse import (
    KEEPALIVE,
    KEEPALIVE_FRAME,
    LegTiming,
    UserTurnRefs,
    encode_frame,
    encode_stream,
    error_data,
    event_to_sse,
    frame,
    frame_data,
    usage_dict,
)

from .helpers import scripted_agent


def test_a_frame_is_one_json_line_and_encodes_as_event_and_data() -> None:
    made = frame("text_delta", {"delta": "é\nnext"})
    assert made == {"event": "text_delta", "data": '{"delta":"é\\nnext"}'}
    assert encode_frame(made) == 'event: text_delta\ndata: {"delta":"é\\nnext"}\n\n'.encode()
    assert frame_data(made) == {"delta": "é\nnext"}
    assert encode_frame(KEEPALIVE_FRAME) == KEEPALIVE


def test_frame_default_converts_what_json_cannot() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert frame_data(frame("x", {"v": Odd()})) == {"v": "odd"}
    assert frame_data(frame("x", {"v": Odd()}, default=lambda _o: ["custom"])) == {"v": ["custom"]}


def test_usage_dict_adds_the_total_and_the_last_prompt_size_when_known() -> None:
    usage = Usage(input_tokens=10, output_tokens=3, cache_read_tokens=4)
    assert usage_dict(usage) == {
        "input_tokens": 10,
        "output_tokens": 3,
        "cache_read_tokens": 4,
        "cache_write_tokens": 0,
        "total_tokens": 13,
    }
    assert usage_dict(usage, last_input_tokens=7) == {**usage_dict(usage), "last_input_tokens": 7}


def test_error_data_of_a_tool_failure_and_of_a_run_failure() -> None:
    call = ToolCall(id="call_1", name="lookup", arguments="{}")
    tool = error_data(events.ToolCallFailed(error=ValueError("bad input"), call=call))
    assert tool == {"type": "ValueError", "message": "bad input", "code": "tool_error", "scope": "tool", "id": "call_1"}
    run = error_data(events.RunFailed(error=MaxTurnsExceeded("too many turns")))
    assert run["code"] == "max_turns" and run["type"] == "MaxTurnsExceeded" and "scope" not in run


def test_the_closing_facts_of_a_stored_run_become_refs_and_timing() -> None:
    refs = event_to_sse(UserTurnRefs(["run_1:0", "run_1:1"]))
    timing = event_to_sse(LegTiming(finished_at=1700000000.5, duration=2.25))
    assert refs == frame("refs", {"refs": ["run_1:0", "run_1:1"]})
    assert timing == frame("timing", {"finished_at": 1700000000.5, "duration": 2.25})


async def test_encode_stream_turns_a_whole_run_into_frames_ending_with_done() -> None:
    handle = Runner.stream(scripted_agent(name="bot"), "tool lookup please")
    frames = [item async for item in encode_stream(handle)]
    names = [f["event"] for f in frames]
    assert names[0] == "turn_started" and names[-1] == "done"
    assert names.index("tool_call") < names.index("tool_result") < names.index("done")
    call = frame_data(frames[names.index("tool_call")])
    assert call["name"] == "lookup" and json.loads(call["arguments"]) == {"q": "tool lookup please"}
    result = frame_data(frames[names.index("tool_result")])
    assert result["result"] == {"q": "tool lookup please", "answer": 42} and result["is_error"] is False
    done = frame_data(frames[-1])
    assert done["output"].startswith("Done:") and set(done["usage"]) >= {"input_tokens", "output_tokens"}


async def test_encode_stream_ends_a_failed_run_with_a_terminal_error() -> None:
    handle = Runner.stream(scripted_agent(name="bot"), "tool lookup please", max_turns=1)
    frames = [item async for item in encode_stream(handle)]
    assert frames[-1]["event"] == "error"
    last = frame_data(frames[-1])
    assert last["code"] == "max_turns" and last.get("scope") != "tool"
    assert "done" not in [f["event"] for f in frames]
