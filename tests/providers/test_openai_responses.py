"""OpenAIResponsesProvider against a local server speaking the Responses SSE wire format.

Every stream is built from ``openai.types.responses`` models and every request we send is
validated against ``ResponseCreateParamsStreaming`` (see ``sdk_wire``).
"""

from __future__ import annotations

import json

import pydantic
import pytest

from lovia.exceptions import ContextOverflowError, ProviderError, UserError
from lovia.messages import ImagePart, TextPart
from lovia.providers import ModelSettings, OpenAIResponsesProvider, provider_from_string
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
)

from .conftest import ToolDef, assemble, collect, track
from .sdk_wire import ResponsesStream, check_responses_request
from .servers import FakeServer, Reply, split_every

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def provider(server: FakeServer, **kwargs) -> OpenAIResponsesProvider:
    return track(OpenAIResponsesProvider("gpt-test", base_url=server.base_url, api_key="sk-test", **kwargs))


def user(text: str) -> list:
    return [InputEntry(role="system", content="be brief"), InputEntry(role="user", content=text)]


def last_request(server: FakeServer) -> dict:
    body = server.posts()[-1].json
    check_responses_request(body)
    return body


# ------------------------------------------------------------------ unhappy paths first


@pytest.mark.parametrize(
    ("status", "retryable", "hint"),
    [(401, False, "OPENAI_API_KEY"), (404, False, "/responses"), (429, True, None), (500, True, None)],
)
async def test_http_errors_are_classified(server: FakeServer, status: int, retryable: bool, hint: str | None) -> None:
    headers = {"Retry-After": "7"} if status == 429 else {}
    server.enqueue(
        Reply.json(status, {"error": {"message": f"boom {status}", "type": "x", "code": None}}, headers=headers)
    )
    with pytest.raises(ProviderError) as info:
        await collect(provider(server).stream(user("hi")))
    err = info.value
    assert err.status_code == status and err.retryable is retryable and f"boom {status}" in str(err)
    assert err.vendor == "openai" and err.model == "gpt-test"
    if hint:
        assert hint in (err.hint or "")


async def test_context_overflow_names_the_window(server: FakeServer) -> None:
    server.enqueue(
        Reply.json(
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model. maximum context length is "
                    "128000 tokens",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
        )
    )
    with pytest.raises(ContextOverflowError) as info:
        await collect(provider(server).stream(user("hi")))
    assert info.value.reported_window == 128000


async def test_a_cut_stream_is_a_retryable_error(server: FakeServer) -> None:
    body = ResponsesStream().created().message("Hello there, friend").completed().body()
    server.enqueue(Reply.sse(body, pieces=split_every(body, 200), die_after=3))
    with pytest.raises(ProviderError) as info:
        await collect(provider(server).stream(user("hi")))
    assert info.value.retryable is True


async def test_a_clean_close_before_completed_is_a_retryable_error(server: FakeServer) -> None:
    body = ResponsesStream().created().message("Hello").body()  # no response.completed
    server.enqueue(Reply.sse(body, mode="close"))
    with pytest.raises(ProviderError, match="before response.completed") as info:
        await collect(provider(server).stream(user("hi")))
    assert info.value.retryable is True


async def test_a_malformed_event_is_a_clear_retryable_error(server: FakeServer) -> None:
    good = ResponsesStream().created().body()
    server.enqueue(Reply.sse(good + b'data: {"type": "response.output_text.delta", "delta": \n\n'))
    with pytest.raises(ProviderError, match="unreadable stream event") as info:
        await collect(provider(server).stream(user("hi")))
    assert info.value.retryable is True


async def test_response_failed_and_error_events(server: FakeServer) -> None:
    server.enqueue(
        Reply.sse(ResponsesStream().created().failed("server_error", "the model crashed").body()),
        Reply.sse(ResponsesStream().created().error("invalid_prompt", "prompt flagged").body()),
    )
    with pytest.raises(ProviderError, match="the model crashed") as first:
        await collect(provider(server).stream(user("hi")))
    assert first.value.retryable is True
    with pytest.raises(ProviderError, match="prompt flagged") as second:
        await collect(provider(server).stream(user("hi")))
    assert second.value.retryable is False


async def test_the_official_host_needs_a_key_when_a_request_is_made() -> None:
    provider = OpenAIResponsesProvider("gpt-5", base_url="https://api.openai.com/v1")  # no key yet
    with pytest.raises(UserError) as info:
        await collect(provider.stream(user("hi")))
    assert "OPENAI_API_KEY" in (info.value.hint or "")
    await provider.aclose()


async def test_previous_response_id_needs_store() -> None:
    with pytest.raises(UserError, match="store=True"):
        OpenAIResponsesProvider("m", base_url="http://127.0.0.1:1/v1", previous_response_id=True)


async def test_incomplete_response_reports_length(server: FakeServer) -> None:
    server.enqueue(Reply.sse(ResponsesStream().created().message("partial ans").incomplete().body()))
    out = assemble(await collect(provider(server).stream(user("hi"))))
    assert out.text == "partial ans" and out.finish == ["length"]


# ------------------------------------------------------------------ happy paths


async def test_text_stream_usage_and_request_shape(server: FakeServer) -> None:
    server.enqueue(
        Reply.sse(ResponsesStream().created().message("Hello, world!").completed(cached=8, cache_write=3).body())
    )
    out = assemble(
        await collect(provider(server).stream(user("hi"), settings=ModelSettings(max_tokens=50, temperature=0.3)))
    )
    assert out.text == "Hello, world!" and out.finish == ["stop"]
    usage = out.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        30,
        12,
        8,
        3,
    )
    request = server.posts()[-1]
    assert request.path == "/v1/responses" and request.headers["authorization"] == "Bearer sk-test"
    body = last_request(server)
    assert body["instructions"] == "be brief"
    assert body["input"] == [{"role": "user", "content": "hi"}]
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 50 and body["temperature"] == 0.3
    assert "previous_response_id" not in body


async def test_parallel_function_calls_keep_their_ids(server: FakeServer) -> None:
    calls = [("call_a", "weather", '{"city": "Paris"}'), ("call_b", "weather", '{"city": "Oslo"}')]
    body = ResponsesStream().created().calls(calls).completed().body()
    server.enqueue(Reply.sse(body, pieces=split_every(body, 97)))
    out = assemble(
        await collect(
            provider(server).stream(
                user("weather?"),
                tools=[ToolDef("weather", strict=True)],
                settings=ModelSettings(parallel_tool_calls=True),
            )
        )
    )
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in out.calls.values()] == [
        ("call_a", "weather", {"city": "Paris"}),
        ("call_b", "weather", {"city": "Oslo"}),
    ]
    assert out.finish == ["tool_calls"]
    sent = last_request(server)
    assert sent["tools"][0] == {
        "type": "function",
        "name": "weather",
        "description": "a tool",
        "parameters": ToolDef("weather").parameters,
        "strict": True,
    }
    assert sent["parallel_tool_calls"] is True


async def test_reasoning_items_are_kept_and_sent_back(server: FakeServer) -> None:
    stream = ResponsesStream().created().reasoning("rs_1", ["Think about", "the weather."], encrypted="ENC==")
    stream.calls([("call_w", "weather", '{"city": "Rome"}')]).completed(reasoning=42)
    server.enqueue(
        Reply.sse(stream.body()), Reply.sse(ResponsesStream().created().message("Sunny.").completed().body())
    )
    p = provider(server)
    first = assemble(await collect(p.stream(user("weather in Rome?"), tools=[ToolDef("weather")])))
    assert first.reasoning == "Think about\n\nthe weather." == first.completed[0].content
    [entry] = first.completed
    assert isinstance(entry, ReasoningEntry) and entry.provider == "openai-responses" and entry.id == "rs_1"
    assert entry.metadata["encrypted_content"] == "ENC==" and entry.metadata["reasoning_tokens"] == 42
    transcript = [
        *user("weather in Rome?"),
        entry,
        ToolCallEntry(call_id="call_w", name="weather", arguments='{"city": "Rome"}'),
        ToolResultEntry(call_id="call_w", output="sunny"),
        ReasoningEntry(content="foreign thinking", provider="anthropic", metadata={"signature": "s"}),
    ]
    await collect(p.stream(transcript, tools=[ToolDef("weather")]))
    sent = last_request(server)["input"]
    assert sent == [
        {"role": "user", "content": "weather in Rome?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "Think about"},
                {"type": "summary_text", "text": "the weather."},
            ],
            "encrypted_content": "ENC==",
        },
        {"type": "function_call", "call_id": "call_w", "name": "weather", "arguments": '{"city": "Rome"}'},
        {"type": "function_call_output", "call_id": "call_w", "output": "sunny"},
    ]


async def test_structured_output_uses_text_format(server: FakeServer) -> None:
    server.enqueue(Reply.sse(ResponsesStream().created().message('{"answer": 4}').completed().body()))
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    out = assemble(
        await collect(
            provider(server).stream(user("2+2"), response_format={"name": "Sum", "schema": schema, "strict": True})
        )
    )
    assert json.loads(out.text) == {"answer": 4}
    body = last_request(server)
    assert body["text"] == {"format": {"type": "json_schema", "name": "Sum", "schema": schema, "strict": True}}


async def test_images_in_input_and_tool_results(server: FakeServer) -> None:
    server.enqueue(Reply.sse(ResponsesStream().created().message("a dot").completed().body()))
    entries = [
        InputEntry(
            role="user", content=[TextPart("what is this?"), ImagePart(data=PNG, mime_type="image/png", detail="low")]
        ),
        ToolCallEntry(call_id="c1", name="shot", arguments="{}"),
        ToolResultEntry(call_id="c1", output="screenshot", parts=[ImagePart(url="https://example.test/a.png")]),
    ]
    await collect(provider(server).stream(entries))
    items = last_request(server)["input"]
    assert items[0]["content"] == [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "low"},
    ]
    assert items[2]["output"] == [
        {"type": "input_text", "text": "screenshot"},
        {"type": "input_image", "image_url": "https://example.test/a.png", "detail": "auto"},
    ]


async def test_without_vision_images_become_a_note(server: FakeServer) -> None:
    server.enqueue(Reply.sse(ResponsesStream().created().message("ok").completed().body()))
    entries = [InputEntry(role="user", content=[TextPart("look"), ImagePart(data=PNG, mime_type="image/png")])]
    p = provider(server, supports_vision=False)
    assert p.supports_vision is False
    await collect(p.stream(entries))
    content = last_request(server)["input"][0]["content"]
    assert [part["type"] for part in content] == ["input_text", "input_text"]


async def test_extra_body_then_provider_options_and_none_deletes(server: FakeServer) -> None:
    server.enqueue(Reply.sse(ResponsesStream().created().message("ok").completed().body()))
    p = provider(server, extra_body={"reasoning": {"effort": "low"}, "service_tier": "flex"})
    settings = ModelSettings(
        max_tokens=10, provider_options={"openai-responses": {"reasoning": {"effort": "high"}, "include": None}}
    )
    await collect(p.stream(user("hi"), settings=settings))
    body = last_request(server)
    assert body["reasoning"] == {"effort": "high"} and body["service_tier"] == "flex" and "include" not in body


async def test_previous_response_id_sends_only_new_items(server: FakeServer) -> None:
    server.enqueue(
        Reply.sse(ResponsesStream(response_id="resp_1").created().message("Hi!").completed().body()),
        Reply.sse(ResponsesStream(response_id="resp_2").created().message("Fine.").completed().body()),
    )
    p = provider(server, store=True, previous_response_id=True)
    await collect(p.stream(user("hello")))
    transcript = [*user("hello"), AssistantTextEntry(content="Hi!"), InputEntry(role="user", content="how are you?")]
    await collect(p.stream(transcript))
    body = last_request(server)
    assert body["previous_response_id"] == "resp_1" and body["store"] is True
    assert body["input"] == [{"role": "user", "content": "how are you?"}] and "include" not in body


def test_the_validator_catches_a_misnamed_field() -> None:
    """The SDK check is real: a field the API does not have fails it."""
    good = {
        "model": "m",
        "stream": True,
        "input": [{"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}],
    }
    check_responses_request(good)
    for bad in (
        {**good, "max_tokens": 5},
        {**good, "input": [{"type": "function_call", "call_id": "c", "name": "n", "args": "{}"}]},
        {**good, "input": [{"type": "function_call_output", "call_id": "c", "outputs": "x"}]},
    ):
        with pytest.raises(pydantic.ValidationError):
            check_responses_request(bad)


def test_model_string_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    p = track(provider_from_string("openai-responses:gpt-5-mini", extra_body={"store": False}))
    assert isinstance(p, OpenAIResponsesProvider) and p.model == "gpt-5-mini" and p.extra_body == {"store": False}
    assert p.base_url == "http://127.0.0.1:9/v1" and p.name == "openai-responses"


def test_context_window_comes_from_the_official_table() -> None:
    p = track(OpenAIResponsesProvider("gpt-4.1-mini-2025-04-14", api_key="k"))
    assert p.context_window() == 1_047_576


async def test_429_carries_retry_after(server: FakeServer) -> None:
    server.enqueue(
        Reply.json(429, {"error": {"message": "slow down", "type": "rate_limit"}}, headers={"Retry-After": "7"})
    )
    with pytest.raises(ProviderError) as info:
        await collect(provider(server).stream(user("hi")))
    assert info.value.retryable is True and info.value.retry_after == 7.0


async def test_a_whole_json_response_is_accepted(server: FakeServer) -> None:
    """A server that ignores ``stream: true`` and answers with one Response document."""
    stream = ResponsesStream().created().reasoning("rs_j", ["plan"], encrypted="E").message("Done.")
    stream.calls([("call_j", "weather", '{"city": "Bern"}')]).completed(reasoning=3)
    whole = stream.events[-1].response.model_dump(mode="json", exclude_unset=True)
    server.enqueue(Reply.json(200, whole))
    out = assemble(await collect(provider(server).stream(user("hi"), tools=[ToolDef("weather")])))
    assert (
        out.text == "Done."
        and out.calls[0]["id"] == "call_j"
        and json.loads(out.calls[0]["arguments"]) == {"city": "Bern"}
    )
    assert out.completed[0].metadata["encrypted_content"] == "E" and out.finish == ["tool_calls"]
