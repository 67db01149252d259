from __future__ import annotations

import json

import pytest

from lovia.exceptions import ContextOverflowError, ProviderError
from lovia.messages import FilePart, ImagePart, TextPart, Usage
from lovia.providers import AnthropicProvider, ModelSettings
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
)

from .conftest import ToolDef, assemble, collect, track
from .servers import (
    FakeServer,
    Reply,
    anthropic_stream,
    anthropic_text_stream,
    anthropic_tool_stream,
    split_at,
    split_every,
)

HELLO = [InputEntry(role="user", content="hi")]


def make(server: FakeServer, **kwargs) -> AnthropicProvider:
    kwargs.setdefault("api_key", "ak-test")
    kwargs.setdefault("supports_vision", True)  # a local stand-in for a vision model
    return track(AnthropicProvider("claude-test", base_url=server.base_url, **kwargs))


# --------------------------------------------------------------------------- streaming


async def test_text_usage_and_cache_fields_split_mid_utf8(server: FakeServer) -> None:
    usage = {"input_tokens": 10, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 50, "output_tokens": 1}
    text = "naïve ☃ 日本"
    body = anthropic_stream(anthropic_text_stream(text, usage=usage), crlf=True)
    cuts = [i for i in range(len(body)) if body[i] >= 0x80 or body[i] == 0x0A]  # mid-character and mid-CRLF
    server.enqueue(Reply.sse(body, pieces=split_at(body, cuts)))
    out = assemble(await collect(make(server).stream(HELLO)))
    assert out.text == text
    assert out.usage == Usage(input_tokens=360, output_tokens=7, cache_read_tokens=300, cache_write_tokens=50)
    assert out.finish == ["end_turn"]
    sent = server.posts()[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "ak-test" and sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json["max_tokens"] == 16_384 and sent.json["stream"] is True
    assert sent.json["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


async def test_two_tool_calls_and_empty_input(server: FakeServer) -> None:
    args = json.dumps({"city": "Zürich"})
    events = anthropic_tool_stream([("toolu_1", "weather", args), ("toolu_2", "now", "")], text="Let me check.")
    body = anthropic_stream(events)
    server.enqueue(Reply.sse(body, pieces=split_every(body, 13)))
    out = assemble(await collect(make(server).stream(HELLO, tools=[ToolDef("weather"), ToolDef("now")])))
    assert out.text == "Let me check."
    assert out.calls == {
        0: {"id": "toolu_1", "name": "weather", "arguments": args},
        1: {"id": "toolu_2", "name": "now", "arguments": "{}"},
    }
    assert out.finish == ["tool_use"]
    tools = server.posts()[0].json["tools"]
    assert tools[0] == {"name": "weather", "description": "a tool", "input_schema": ToolDef("x").parameters}


async def test_proxy_ignoring_stream_flag_sends_one_whole_message(server: FakeServer) -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "check the weather", "signature": "sig-1"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Zürich"}},
            {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 12, "cache_read_input_tokens": 100, "output_tokens": 9},
    }
    server.enqueue(Reply.json(200, message))
    out = assemble(await collect(make(server).stream(HELLO, tools=[ToolDef("weather"), ToolDef("now")])))
    assert out.text == "Let me check." and out.finish == ["tool_use"]
    assert out.calls == {
        0: {"id": "toolu_1", "name": "weather", "arguments": json.dumps({"city": "Zürich"})},
        1: {"id": "toolu_2", "name": "now", "arguments": "{}"},
    }
    assert out.usage == Usage(input_tokens=112, output_tokens=9, cache_read_tokens=100)
    assert out.reasoning == "check the weather"
    assert out.completed == [
        ReasoningEntry(content="check the weather", provider="anthropic", metadata={"signature": "sig-1"})
    ]


async def test_malformed_tool_json_passes_through(server: FakeServer) -> None:
    server.enqueue(Reply.sse(anthropic_stream(anthropic_tool_stream([("t1", "weather", '{"city": ')]))))
    out = assemble(await collect(make(server).stream(HELLO)))
    assert out.calls[0]["arguments"] == '{"city": '


async def test_thinking_and_signature_round_trip(server: FakeServer) -> None:
    events = [
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5, "output_tokens": 0}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-abc"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "opaque"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "42"}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}},
        {"type": "message_stop"},
    ]
    server.enqueue(Reply.sse(anthropic_stream(events)))
    out = assemble(await collect(make(server).stream(HELLO)))
    assert out.reasoning == "Let me think." and out.text == "42"
    thinking, redacted = out.completed
    assert thinking == ReasoningEntry(content="Let me think.", provider="anthropic", metadata={"signature": "sig-abc"})
    assert redacted.metadata == {"redacted_data": "opaque"}

    # Replaying them: signed blocks go back verbatim, unsigned foreign reasoning is dropped.
    server.enqueue(Reply.sse(anthropic_stream(anthropic_text_stream("ok"))))
    history = [
        *HELLO,
        ReasoningEntry(content="foreign"),
        thinking,
        redacted,
        AssistantTextEntry("42"),
        InputEntry("user", "more"),
    ]
    await collect(make(server).stream(history))
    assistant = server.posts()[1].json["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "42"},
    ]


async def test_stale_thinking_stripped_on_official_host_when_thinking_off(server: FakeServer) -> None:
    signed = ReasoningEntry(content="t", provider="anthropic", metadata={"signature": "s"})
    history = [*HELLO, signed, AssistantTextEntry("a"), InputEntry("user", "b")]
    server.enqueue(*(Reply.sse(anthropic_stream(anthropic_text_stream("ok"))) for _ in range(2)))
    await collect(make(server, official_dialect=True).stream(history))
    thinking_on = ModelSettings(
        provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
    )
    await collect(make(server, official_dialect=True).stream(history, settings=thinking_on))
    off, on = (r.json for r in server.posts())
    assert [b["type"] for b in off["messages"][1]["content"]] == ["text"]
    assert [b["type"] for b in on["messages"][1]["content"]] == ["thinking", "text"]
    assert on["thinking"] == {"type": "enabled", "budget_tokens": 1024}


# --------------------------------------------------------------------------- request mapping


async def test_transcript_mapping_merges_roles_and_carries_call_ids(server: FakeServer) -> None:
    entries = [
        InputEntry(role="system", content="rule one"),
        InputEntry(role="system", content="rule two"),
        InputEntry(
            role="user",
            content=[
                TextPart("see"),
                ImagePart(data="aW1n", mime_type="image/jpeg"),
                FilePart(data="aGVsbG8=", mime_type="text/plain", filename="n.txt"),
                FilePart(url="https://x/doc.pdf"),
            ],
        ),
        AssistantTextEntry(content="calling"),
        ToolCallEntry(call_id="tu_1", name="weather", arguments='{"city":"Oslo"}'),
        ToolCallEntry(call_id="tu_2", name="weather", arguments="not json"),
        ToolResultEntry(call_id="tu_2", output="bad args", is_error=True),
        ToolResultEntry(call_id="tu_1", output="snow"),
        InputEntry(role="user", content="and tomorrow?"),
    ]
    server.enqueue(Reply.sse(anthropic_stream(anthropic_text_stream("ok"))))
    await collect(make(server).stream(entries))
    sent = server.posts()[0].json
    assert sent["system"] == [{"type": "text", "text": "rule one"}, {"type": "text", "text": "rule two"}]
    user, assistant, results = sent["messages"]
    assert user["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "aW1n"},
    }
    assert user["content"][2]["source"] == {"type": "text", "media_type": "text/plain", "data": "hello"}
    assert user["content"][3]["source"] == {"type": "url", "url": "https://x/doc.pdf"}
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "tu_2", "name": "weather", "input": {"_raw": "not json"}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu_2", "content": "bad args", "is_error": True},
            {"type": "tool_result", "tool_use_id": "tu_1", "content": "snow"},
            {"type": "text", "text": "and tomorrow?"},
        ],
    }


async def test_settings_mapping_cache_and_option_deletion(server: FakeServer) -> None:
    settings = ModelSettings(
        temperature=0.5,
        top_p=0.8,
        max_tokens=123,
        stop=["STOP"],
        parallel_tool_calls=False,
        provider_options={"anthropic": {"cache_system": True, "metadata": {"user_id": "u"}}, "claude": {"top_p": None}},
    )
    server.enqueue(Reply.sse(anthropic_stream(anthropic_text_stream("ok"))))
    entries = [InputEntry("system", "sys"), *HELLO]
    await collect(make(server).stream(entries, tools=[ToolDef("a"), ToolDef("b")], settings=settings))
    sent = server.posts()[0].json
    assert (sent["temperature"], sent["max_tokens"], sent["stop_sequences"]) == (0.5, 123, ["STOP"])
    assert "top_p" not in sent and "stop" not in sent and "cache_system" not in sent
    assert sent["metadata"] == {"user_id": "u"}
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in sent["tools"][0]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (429, "rate_limit_error", True),
        (529, "overloaded_error", True),
        (500, "api_error", True),
    ],
)
async def test_error_bodies(server: FakeServer, status: int, kind: str, retryable: bool) -> None:
    server.enqueue(Reply.json(status, {"type": "error", "error": {"type": kind, "message": f"{kind} happened"}}))
    with pytest.raises(ProviderError) as info:
        await collect(make(server).stream(HELLO))
    assert (info.value.status_code, info.value.retryable, info.value.vendor) == (status, retryable, "anthropic")
    assert f"{kind} happened" in str(info.value)


async def test_html_error_body(server: FakeServer) -> None:
    server.enqueue(Reply.text(503, "<html><title>Service Unavailable</title>" + "y" * 3000))
    with pytest.raises(ProviderError) as info:
        await collect(make(server).stream(HELLO))
    assert info.value.retryable and "Service Unavailable" in info.value.message and len(info.value.message) < 700


@pytest.mark.parametrize(
    ("status", "error", "window"),
    [
        (
            400,
            {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
            200000,
        ),
        (413, {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."}, None),
    ],
)
async def test_overflow(server: FakeServer, status: int, error: dict, window: int | None) -> None:
    server.enqueue(Reply.json(status, {"type": "error", "error": error}))
    with pytest.raises(ContextOverflowError) as info:
        await collect(make(server).stream(HELLO))
    assert info.value.reported_window == window and info.value.vendor == "anthropic"


async def test_error_event_mid_stream_is_retryable_when_overloaded(server: FakeServer) -> None:
    events = anthropic_text_stream("partial", stop=False)[:4]
    events.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    server.enqueue(Reply.sse(anthropic_stream(events)))
    with pytest.raises(ProviderError, match="Overloaded") as info:
        await collect(make(server).stream(HELLO))
    assert info.value.retryable


@pytest.mark.parametrize("mode", ["chunked", "close"])
async def test_stream_cut_before_message_stop_is_retryable(server: FakeServer, mode: str) -> None:
    body = anthropic_stream(anthropic_text_stream("a long answer", stop=False))
    server.enqueue(Reply.sse(body, mode=mode))
    with pytest.raises(ProviderError) as info:
        await collect(make(server).stream(HELLO))
    assert info.value.retryable


async def test_socket_dies_half_way(server: FakeServer) -> None:
    body = anthropic_stream(anthropic_text_stream("a long answer"))
    server.enqueue(Reply.sse(body, pieces=split_every(body, 64), die_after=6))
    with pytest.raises(ProviderError) as info:
        await collect(make(server).stream(HELLO))
    assert info.value.retryable


# --------------------------------------------------------------------------- configuration


async def test_env_configuration_and_keyless(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    server.enqueue(Reply.sse(anthropic_stream(anthropic_text_stream("ok"))))
    provider = track(
        AnthropicProvider(
            "m", default_max_tokens=99, anthropic_version="2099-01-01", default_headers={"anthropic-beta": "b1"}
        )
    )
    assert provider.name == "anthropic" and not provider.supports_json_schema
    await collect(provider.stream(HELLO))
    sent = server.posts()[0]
    assert "x-api-key" not in sent.headers
    assert sent.headers["anthropic-version"] == "2099-01-01" and sent.headers["anthropic-beta"] == "b1"
    assert sent.json["max_tokens"] == 99


async def test_discover_context_window(server: FakeServer) -> None:
    server.routes["/v1/models/claude-win"] = Reply.json(
        200, {"id": "claude-win", "type": "model", "max_input_tokens": 200000}
    )
    provider = track(AnthropicProvider("claude-win", base_url=server.base_url))
    assert await provider.discover_context_window() == 200000
    assert await provider.discover_context_window() == 200000
    assert [r.path for r in server.requests] == ["/v1/models/claude-win"]
