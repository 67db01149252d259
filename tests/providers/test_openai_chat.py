from __future__ import annotations

import json

import httpx
import pytest

from lovia.exceptions import ContextOverflowError, ProviderError, UserError
from lovia.messages import FilePart, ImagePart, TextPart, Usage
from lovia.providers import ModelSettings, OpenAIChatProvider
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
    openai_chunk,
    openai_stream,
    openai_text_stream,
    openai_tool_stream,
    split_at,
    split_every,
)

HELLO = [InputEntry(role="user", content="hi")]


def compat(server: FakeServer, **kwargs) -> OpenAIChatProvider:
    return track(OpenAIChatProvider("local-model", base_url=server.base_url, **kwargs))


def official(server: FakeServer, **kwargs) -> OpenAIChatProvider:
    return track(
        OpenAIChatProvider("gpt-test", base_url=server.base_url, api_key="sk-test", official_dialect=True, **kwargs)
    )


# --------------------------------------------------------------------------- streaming


async def test_text_reasoning_usage_split_at_awkward_bytes(server: FakeServer) -> None:
    text = "Grüße, 世界! ☃ done"
    usage = {"prompt_tokens": 100, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 64}}
    body = openai_text_stream(text, usage=usage, reasoning="think…")
    # Cut inside every multi-byte character, inside "data:" and inside the JSON.
    multibyte = [i for i in range(len(body)) if body[i] >= 0x80]
    cuts = [*multibyte, body.index(b"data:") + 3, body.index(b'"content"') + 4]
    server.enqueue(Reply.sse(body, pieces=split_at(body, cuts), delay=0.001))
    provider = compat(server)
    out = assemble(await collect(provider.stream(HELLO)))
    await provider.aclose()
    assert out.text == text
    assert out.reasoning == "think…"
    assert out.usage == Usage(input_tokens=100, output_tokens=9, cache_read_tokens=64)
    assert out.finish == ["stop"]
    sent = server.posts()[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json["stream"] is True and sent.json["stream_options"] == {"include_usage": True}
    assert sent.json["messages"] == [{"role": "user", "content": "hi"}]
    assert "authorization" not in sent.headers  # keyless compatible server


async def test_crlf_stream_split_every_few_bytes(server: FakeServer) -> None:
    chunks = [openai_chunk({"content": "a\nb"}), openai_chunk({}, finish_reason="length")]
    body = openai_stream(chunks, crlf=True)
    server.enqueue(Reply.sse(body, pieces=split_every(body, 5)))
    out = assemble(await collect(compat(server).stream(HELLO)))
    assert out.text == "a\nb" and out.finish == ["length"] and out.usage is None


async def test_two_interleaved_tool_calls_are_assembled_by_index(server: FakeServer) -> None:
    args_a, args_b = json.dumps({"city": "Paris"}), json.dumps({"city": "Zürich", "days": 3})
    body = openai_tool_stream([("call_a", "weather", args_a), ("call_b", "forecast", args_b)])
    server.enqueue(Reply.sse(body, pieces=split_every(body, 11)))
    tools = [ToolDef("weather", strict=True), ToolDef("forecast")]
    out = assemble(
        await collect(compat(server).stream(HELLO, tools=tools, settings=ModelSettings(parallel_tool_calls=False)))
    )
    assert out.calls == {
        0: {"id": "call_a", "name": "weather", "arguments": args_a},
        1: {"id": "call_b", "name": "forecast", "arguments": args_b},
    }
    assert out.finish == ["tool_calls"]
    sent = server.posts()[0].json
    assert [t["function"]["name"] for t in sent["tools"]] == ["weather", "forecast"]
    assert sent["tools"][0] == {
        "type": "function",
        "function": {"name": "weather", "description": "a tool", "parameters": ToolDef("x").parameters, "strict": True},
    }
    assert "strict" not in sent["tools"][1]["function"]
    assert sent["parallel_tool_calls"] is False


async def test_malformed_tool_arguments_pass_through_unchanged(server: FakeServer) -> None:
    broken = '{"city": "Par'
    server.enqueue(Reply.sse(openai_tool_stream([("c1", "weather", broken)])))
    out = assemble(await collect(compat(server).stream(HELLO)))
    assert out.calls[0]["arguments"] == broken


async def test_calls_without_index_and_repeated_ids_are_normalised(server: FakeServer) -> None:
    chunks = [
        openai_chunk({"tool_calls": [{"id": "x1", "function": {"name": "a", "arguments": "{}"}}]}),
        openai_chunk({"tool_calls": [{"id": "x2", "function": {"name": "b", "arguments": '{"k":'}}]}),
        openai_chunk({"tool_calls": [{"id": "x2", "function": {"name": "b", "arguments": "1}"}}]}),
        openai_chunk({}, finish_reason="tool_calls"),
    ]
    server.enqueue(Reply.sse(openai_stream(chunks)))
    out = assemble(await collect(compat(server).stream(HELLO)))
    assert out.calls == {
        0: {"id": "x1", "name": "a", "arguments": "{}"},
        1: {"id": "x2", "name": "b", "arguments": '{"k":1}'},
    }


# --------------------------------------------------------------------------- request mapping


TRANSCRIPT = [
    InputEntry(role="system", content="be brief"),
    InputEntry(
        role="user",
        content=[
            TextPart("look"),
            ImagePart(data="aW1n", mime_type="image/png", detail="low"),
            FilePart(data="cGRm", mime_type="application/pdf", filename="a.pdf"),
        ],
    ),
    ReasoningEntry(content="hmm"),
    AssistantTextEntry(content="checking"),
    ToolCallEntry(call_id="c1", name="weather", arguments='{"city":"Paris"}'),
    ToolCallEntry(call_id="c2", name="weather", arguments='{"city":"Rome"}'),
    ToolResultEntry(call_id="c2", output="sunny"),
    ToolResultEntry(call_id="c1", output="rain", parts=[TextPart("rain"), ImagePart(url="https://x/y.png")]),
    InputEntry(role="user", content="thanks"),
]


async def test_transcript_mapping(server: FakeServer) -> None:
    server.enqueue(Reply.sse(openai_text_stream("ok")))
    await collect(compat(server).stream(TRANSCRIPT))
    messages = server.posts()[0].json["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n", "detail": "low"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,cGRm", "filename": "a.pdf"}},
    ]
    assistant = messages[2]
    assert assistant["role"] == "assistant" and assistant["content"] == "checking"
    assert assistant["reasoning_content"] == "hmm"  # replayed by default on compatible hosts
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert assistant["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city":"Paris"}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "c2", "content": "sunny"}
    assert messages[4] == {"role": "tool", "tool_call_id": "c1", "content": "rain"}
    assert messages[5]["role"] == "user"
    assert messages[5]["content"][1] == {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "auto"}}
    assert messages[6] == {"role": "user", "content": "thanks"}
    assert len(messages) == 7


async def test_reasoning_not_replayed_on_official_unless_asked(server: FakeServer) -> None:
    server.enqueue(Reply.sse(openai_text_stream("ok")), Reply.sse(openai_text_stream("ok")))
    await collect(official(server).stream(TRANSCRIPT))
    await collect(official(server, replay_reasoning=True).stream(TRANSCRIPT))
    first, second = (r.json["messages"][2] for r in server.posts())
    assert "reasoning_content" not in first
    assert second["reasoning_content"] == "hmm"


async def test_settings_mapping_compatible_and_official(server: FakeServer) -> None:
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_tokens=50,
        stop=["END"],
        provider_options={"openai": {"seed": 7, "stream_options": None}, "openai-chat": {"seed": 8}},
    )
    server.enqueue(Reply.sse(openai_text_stream("ok")), Reply.sse(openai_text_stream("ok")))
    await collect(compat(server).stream(HELLO, settings=settings))
    await collect(official(server).stream(HELLO, settings=settings))
    c, o = (r.json for r in server.posts())
    assert (c["temperature"], c["top_p"], c["stop"], c["max_tokens"]) == (0.2, 0.9, ["END"], 50)
    assert "max_completion_tokens" not in c
    assert o["max_completion_tokens"] == 50 and "max_tokens" not in o
    assert c["seed"] == 8  # later vendor key wins
    assert "stream_options" not in c  # None deletes a field the adapter sends
    assert "parallel_tool_calls" not in c  # not sent without tools
    assert server.posts()[1].headers["authorization"] == "Bearer sk-test"


async def test_response_format_only_where_supported(server: FakeServer) -> None:
    fmt = {"name": "Answer", "schema": {"type": "object"}, "strict": True}
    for _ in range(3):
        server.enqueue(Reply.sse(openai_text_stream("{}")))
    await collect(official(server).stream(HELLO, response_format=fmt))
    await collect(compat(server).stream(HELLO, response_format=fmt))
    await collect(compat(server, supports_json_schema=True).stream(HELLO, response_format=fmt))
    a, b, c = (r.json for r in server.posts())
    expected = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": {"type": "object"}, "strict": True}}
    assert a["response_format"] == expected and c["response_format"] == expected
    assert "response_format" not in b
    assert official(server).supports_json_schema and not compat(server).supports_json_schema


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (408, True), (429, True), (500, True), (503, True)]
)
async def test_json_error_bodies(server: FakeServer, status: int, retryable: bool) -> None:
    server.enqueue(Reply.json(status, {"error": {"message": f"vendor says {status}", "type": "x", "code": None}}))
    with pytest.raises(ProviderError) as info:
        await collect(compat(server).stream(HELLO))
    err = info.value
    assert (err.status_code, err.retryable, err.vendor, err.model) == (status, retryable, "openai", "local-model")
    assert f"vendor says {status}" in str(err)


async def test_html_error_body_is_readable(server: FakeServer) -> None:
    html = "<html><body><h1>502 Bad Gateway</h1>" + "x" * 2000 + "</body></html>"
    server.enqueue(Reply.text(502, html))
    with pytest.raises(ProviderError) as info:
        await collect(compat(server).stream(HELLO))
    assert info.value.retryable and info.value.status_code == 502
    assert "502 Bad Gateway" in info.value.message and len(info.value.message) < 700


@pytest.mark.parametrize(
    ("payload", "window"),
    [
        (
            {
                "error": {
                    "message": "This model's maximum context length is 8,192 tokens. However you requested 9000",
                    "code": "context_length_exceeded",
                }
            },
            8192,
        ),
        ({"error": {"message": "too big", "code": "context_length_exceeded"}}, None),
        (
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size",
                    "type": "exceed_context_size_error",
                    "n_ctx": 4096,
                }
            },
            4096,
        ),
    ],
)
async def test_context_overflow(server: FakeServer, payload: dict, window: int | None) -> None:
    server.enqueue(Reply.json(400, payload))
    with pytest.raises(ContextOverflowError) as info:
        await collect(compat(server).stream(HELLO))
    assert info.value.reported_window == window
    assert info.value.vendor == "openai"


async def test_stream_dying_mid_chunked_body_is_retryable(server: FakeServer) -> None:
    body = openai_text_stream("a long answer that never finishes")
    events = [e + b"\n\n" for e in body.split(b"\n\n")[:-1]]
    server.enqueue(Reply.sse(body, pieces=events, die_after=4))
    got = []
    with pytest.raises(ProviderError) as info:
        async for delta in compat(server).stream(HELLO):
            got.append(delta)
    assert info.value.retryable
    assert [d.text for d in got] == ["a l", "ong", " an"]  # text before the cut, then the error


async def test_clean_eof_before_done_is_retryable(server: FakeServer) -> None:
    body = openai_stream([openai_chunk({"content": "partial"})], done=False)
    server.enqueue(Reply.sse(body, mode="close"))
    with pytest.raises(ProviderError, match=r"\[DONE\]") as info:
        await collect(compat(server).stream(HELLO))
    assert info.value.retryable


async def test_error_object_inside_stream(server: FakeServer) -> None:
    body = openai_stream(
        [openai_chunk({"content": "x"}), {"error": {"message": "engine crashed", "type": "server_error"}}], done=False
    )
    server.enqueue(Reply.sse(body))
    with pytest.raises(ProviderError, match="engine crashed") as info:
        await collect(compat(server).stream(HELLO))
    assert info.value.retryable


async def test_connection_refused_is_retryable() -> None:
    with FakeServer() as dead:
        url = dead.base_url
    with pytest.raises(ProviderError) as info:
        await collect(track(OpenAIChatProvider("m", base_url=url)).stream(HELLO))
    assert info.value.retryable and info.value.status_code is None


async def test_timeout_is_retryable(server: FakeServer) -> None:
    body = openai_text_stream("slow")
    server.enqueue(Reply.sse(body, pieces=split_every(body, 30), delay=0.5))
    provider = track(OpenAIChatProvider("m", base_url=server.base_url, timeout=0.1))
    with pytest.raises(ProviderError, match="timed out") as info:
        await collect(provider.stream(HELLO))
    assert info.value.retryable
    await provider.aclose()


# --------------------------------------------------------------------------- configuration


async def test_a_missing_key_fails_only_when_a_request_goes_to_the_official_host(server: FakeServer) -> None:
    provider = track(OpenAIChatProvider("gpt-4.1-mini"))  # no key: building it is fine
    assert provider.is_official and provider.name == "openai-chat" and provider.supports_json_schema
    with pytest.raises(UserError) as info:
        await collect(provider.stream(HELLO))
    assert "OPENAI_API_KEY" in (info.value.hint or "")
    # The official dialect on another host is not the official API: no key is asked for.
    server.enqueue(Reply.sse(openai_text_stream("ok")))
    local = track(OpenAIChatProvider("gpt-4.1-mini", base_url=server.base_url, official_dialect=True))
    await collect(local.stream(HELLO))
    assert "authorization" not in server.posts()[0].headers


def test_provider_from_string_builds_an_official_provider_without_a_key() -> None:
    from lovia.providers import provider_from_string

    provider = track(provider_from_string("gpt-5"))
    assert isinstance(provider, OpenAIChatProvider) and provider.is_official and provider.name == "openai-chat"


async def test_env_base_url_and_key(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    server.enqueue(Reply.sse(openai_text_stream("ok")))
    provider = track(OpenAIChatProvider("m", default_headers={"X-Team": "lovia"}))
    assert not provider.is_official and provider.name == "openai-chat"
    await collect(provider.stream(HELLO))
    headers = server.posts()[0].headers
    assert headers["authorization"] == "Bearer env-key" and headers["x-team"] == "lovia"


async def test_client_ownership(server: FakeServer) -> None:
    own = compat(server)
    await own.aclose()
    assert own._client.is_closed
    async with httpx.AsyncClient() as client:
        shared = OpenAIChatProvider("m", base_url=server.base_url, client=client)
        await shared.aclose()
        assert not client.is_closed


async def test_discover_context_window_is_memoized(server: FakeServer) -> None:
    models = {
        "object": "list",
        "data": [{"id": "other", "max_model_len": 1}, {"id": "win-model", "max_model_len": 32768}],
    }
    server.routes["/v1/models"] = Reply.json(200, models)
    provider = track(OpenAIChatProvider("win-model", base_url=server.base_url))
    assert await provider.discover_context_window() == 32768
    assert await provider.discover_context_window() == 32768
    assert [r.path for r in server.requests] == ["/v1/models"]
    assert await official(server).discover_context_window() is None
    assert len(server.requests) == 1
