"""Transcript entries, JSON form, chat projection and structure helpers."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from lovia import FilePart, ImagePart, Message, TextPart, Usage, assistant, system, user
from lovia.messages import ToolCall
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    drop_dangling_tool_calls,
    entries_from_json,
    entries_to_json,
    entries_to_messages,
    entry_from_dict,
    entry_to_dict,
    input_to_entries,
    leading_system_count,
    messages_to_entries,
    safe_window,
    split_system,
    to_json_safe,
)

EVERY_KIND = [
    InputEntry(role="system", content="sys"),
    InputEntry(
        role="user",
        content=[
            TextPart("look"),
            ImagePart(url="https://x/y.png", detail="low"),
            FilePart(data="aGk=", mime_type="text/plain", filename="a.txt"),
        ],
    ),
    ReasoningEntry(content="hmm", id="r1", provider="anthropic", metadata={"signature": "sig"}),
    AssistantTextEntry(content="calling", id="m1"),
    ToolCallEntry(call_id="c1", name="f", arguments='{"x": 1}'),
    ToolResultEntry(
        call_id="c1",
        output="done",
        raw={"x": [1, 2]},
        is_error=False,
        parts=[ImagePart(data="AAAA", mime_type="image/png")],
    ),
]


def test_every_kind_round_trips_through_json():
    text = entries_to_json(EVERY_KIND)
    assert [d["type"] for d in json.loads(text)] == [
        "input",
        "input",
        "reasoning",
        "assistant_text",
        "tool_call",
        "tool_result",
    ]
    assert entries_from_json(text) == EVERY_KIND
    for entry in EVERY_KIND:
        assert entry_from_dict(entry_to_dict(entry)) == entry


def test_unknown_type_and_fields():
    with pytest.raises(ValueError, match="hologram"):
        entry_from_dict({"type": "hologram"})
    with pytest.raises(ValueError, match="hologram"):
        entry_from_dict({"type": "hologram", "content": "x"}, strict=False)
    with pytest.raises(ValueError, match="unknown field"):
        entry_from_dict({"type": "input", "role": "user", "content": "x", "lang": "en"}, strict=True)
    # By default (0.9.119's stability promise) unknown fields are ignored on every entry type.
    for entry in EVERY_KIND:
        assert entry_from_dict({**entry_to_dict(entry), "lang": "en", "future": {"x": [1]}}) == entry
    with pytest.raises(ValueError, match="missing field 'name'"):
        entry_from_dict({"type": "tool_call", "call_id": "c", "arguments": "{}"})


def test_raw_values_are_made_json_safe():
    class M(BaseModel):
        a: int

    @dataclass
    class D:
        b: float

    raw = {"m": M(a=1), "d": D(b=math.inf), "t": (1, 2), "o": object(), "n": math.nan}
    assert to_json_safe(raw) == {"m": {"a": 1}, "d": {"b": None}, "t": [1, 2], "o": None, "n": None}
    d = entry_to_dict(ToolResultEntry(call_id="c", output="x", raw=raw))
    assert json.loads(json.dumps(d))["raw"]["m"] == {"a": 1}
    assert "parts" not in d


def test_chat_projection_merges_assistant_parts():
    messages = entries_to_messages(EVERY_KIND)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
    merged = messages[2]
    assert merged.reasoning == "hmm" and merged.text == "calling"
    assert merged.tool_calls == [ToolCall(id="c1", name="f", arguments='{"x": 1}')]
    assert messages[3].tool_call_id == "c1" and messages[3].text == "done"
    back = messages_to_entries(messages)
    assert [e.type for e in back] == ["input", "input", "reasoning", "assistant_text", "tool_call", "tool_result"]


def test_builders_and_input_normalisation():
    assert system("s") == Message(role="system", content="s")
    assert assistant("a").text == "a"
    assert user([TextPart("a"), TextPart("b")]).text == "ab"
    assert user(ImagePart(url="u")).content == [ImagePart(url="u")]
    with pytest.raises(TypeError):
        user(["not a part"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        ImagePart()
    assert input_to_entries("hi") == [InputEntry("user", "hi")]
    assert input_to_entries([system("s"), user("u")]) == [InputEntry("system", "s"), InputEntry("user", "u")]


def test_file_and_image_parts_from_paths(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    part = FilePart.from_path(p)
    assert part.filename == "notes.txt" and part.mime_type == "text/plain" and part.data == "aGVsbG8="
    img = tmp_path / "dot.png"
    img.write_bytes(b"\x89PNG")
    assert ImagePart.from_path(img).data_url().startswith("data:image/png;base64,")


def test_usage_arithmetic():
    u = Usage(10, 5, cache_read_tokens=4)
    assert u.total_tokens == 15
    total = u + Usage(1, 1)
    assert total == Usage(11, 6, 4, 0) and u == Usage(10, 5, 4, 0)
    assert Usage.from_dict(total.to_dict()) == total


def test_drop_dangling_tool_calls():
    entries = [
        InputEntry("user", "go"),
        ToolCallEntry("a", "f", "{}"),
        ToolCallEntry("b", "f", "{}"),
        ToolResultEntry("a", "ok"),
        ToolResultEntry("zombie", "no call"),
    ]
    assert drop_dangling_tool_calls(entries) == [entries[0], entries[1], entries[3]]


def test_system_helpers():
    entries = [InputEntry("system", "a"), InputEntry("system", "b"), InputEntry("user", "c")]
    assert leading_system_count(entries) == 2
    assert split_system(entries) == (entries[:2], entries[2:])


def _pairs_ok(window):
    calls = {e.call_id for e in window if isinstance(e, ToolCallEntry)}
    results = {e.call_id for e in window if isinstance(e, ToolResultEntry)}
    return calls == results


@st.composite
def transcripts(draw):
    out = []
    for turn in range(draw(st.integers(1, 8))):
        out.append(InputEntry("user", f"q{turn}"))
        n = draw(st.integers(0, 3))
        ids = [f"t{turn}c{i}" for i in range(n)]
        out.extend(ToolCallEntry(i, "f", "{}") for i in ids)
        out.extend(ToolResultEntry(i, "r") for i in draw(st.permutations(ids)))
        out.append(AssistantTextEntry(f"a{turn}"))
    return out


@given(transcripts(), st.integers(0, 6), st.integers(0, 12))
def test_safe_window_never_splits_a_pair(entries, head, tail):
    window = safe_window(entries, head=head, tail=tail)
    assert _pairs_ok(window)
    assert window[: min(head, len(window))] == entries[: min(head, len(window))] or head >= len(entries)
    if head + tail >= len(entries):
        assert window == entries


def test_pairing_follows_order_when_call_ids_are_reused():
    from lovia.transcript import unanswered_tool_calls

    entries = [
        ToolCallEntry("call_f", "f", "{}"),
        ToolResultEntry("call_f", "first"),
        AssistantTextEntry("again"),
        ToolCallEntry("call_f", "f", '{"n": 2}'),
    ]
    assert unanswered_tool_calls(entries) == [entries[3]]
    assert drop_dangling_tool_calls(entries) == entries[:3]
