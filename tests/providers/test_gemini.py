"""GeminiProvider against a local server speaking ``streamGenerateContent?alt=sse``.

Chunks are ``google.genai.types.GenerateContentResponse`` models serialised to the API's camelCase
JSON; every request body is parsed field by field with the SDK's types (unknown keys forbidden).
"""

from __future__ import annotations

import json

import pydantic
import pytest

from lovia.exceptions import ContextOverflowError, ProviderError, UserError
from lovia.messages import ImagePart, TextPart
from lovia.providers import GeminiProvider, ModelSettings, provider_from_string
from lovia.transcript import InputEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry

from .conftest import ToolDef, assemble, collect, track
from .sdk_wire import check_gemini_request, gemini_chunk, gemini_sse, gemini_text_stream
from .servers import FakeServer, Reply, split_every

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.fixture
def gserver():
    with FakeServer(prefix="/v1beta") as srv:
        yield srv


def provider(server: FakeServer, **kwargs) -> GeminiProvider:
    return track(GeminiProvider("gemini-test", base_url=server.base_url, api_key="g-key", **kwargs))


def user(text: str) -> list:
    return [InputEntry(role="system", content="be brief"), InputEntry(role="user", content=text)]


def last_body(server: FakeServer) -> dict:
    body = server.posts()[-1].json
    check_gemini_request(body)
    return body


# ------------------------------------------------------------------ unhappy paths first


@pytest.mark.parametrize(
    ("status", "code", "retryable", "hint"),
    [
        (400, "INVALID_ARGUMENT", False, None),
        (401, "UNAUTHENTICATED", False, "GEMINI_API_KEY"),
        (403, "PERMISSION_DENIED", False, "GEMINI_API_KEY"),
        (404, "NOT_FOUND", False, "model name"),
        (429, "RESOURCE_EXHAUSTED", True, None),
        (500, "INTERNAL", True, None),
        (503, "UNAVAILABLE", True, None),
    ],
)
async def test_http_errors_are_classified(gserver, status: int, code: str, retryable: bool, hint: str | None) -> None:
    gserver.enqueue(Reply.json(status, {"error": {"code": status, "message": f"nope {status}", "status": code}}))
    with pytest.raises(ProviderError) as info:
        await collect(provider(gserver).stream(user("hi")))
    err = info.value
    assert err.status_code == status and err.retryable is retryable and code in str(err) and err.vendor == "gemini"
    if hint:
        assert hint in (err.hint or "")


async def test_token_limit_is_a_context_overflow(gserver) -> None:
    message = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    gserver.enqueue(Reply.json(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}))
    with pytest.raises(ContextOverflowError) as info:
        await collect(provider(gserver).stream(user("hi")))
    assert info.value.reported_window == 1048576


async def test_a_blocked_prompt_is_a_clear_error(gserver) -> None:
    gserver.enqueue(Reply.sse(gemini_sse([gemini_chunk(block_reason="SAFETY")])))
    with pytest.raises(ProviderError, match=r"prompt was blocked \(SAFETY\)") as info:
        await collect(provider(gserver).stream(user("something bad")))
    assert info.value.retryable is False and "safety_settings" in (info.value.hint or "")


async def test_a_safety_stop_mid_answer_is_a_clear_error(gserver) -> None:
    chunks = [gemini_chunk([{"text": "Well, "}]), gemini_chunk([], finish="SAFETY", finish_message="unsafe content")]
    gserver.enqueue(Reply.sse(gemini_sse(chunks)))
    with pytest.raises(ProviderError, match=r"safety system \(SAFETY\): unsafe content") as info:
        await collect(provider(gserver).stream(user("hi")))
    assert info.value.retryable is False


async def test_a_cut_stream_is_retryable(gserver) -> None:
    body = gemini_text_stream("A long enough answer to cut in pieces.")
    gserver.enqueue(Reply.sse(body, pieces=split_every(body, 60), die_after=2))
    with pytest.raises(ProviderError) as info:
        await collect(provider(gserver).stream(user("hi")))
    assert info.value.retryable is True


async def test_a_stream_without_finish_reason_is_retryable(gserver) -> None:
    gserver.enqueue(Reply.sse(gemini_sse([gemini_chunk([{"text": "half"}])]), mode="close"))
    with pytest.raises(ProviderError, match="without a finish reason") as info:
        await collect(provider(gserver).stream(user("hi")))
    assert info.value.retryable is True


async def test_a_malformed_function_call_is_retryable(gserver) -> None:
    gserver.enqueue(Reply.sse(gemini_sse([gemini_chunk([], finish="MALFORMED_FUNCTION_CALL")])))
    with pytest.raises(ProviderError, match="MALFORMED_FUNCTION_CALL") as info:
        await collect(provider(gserver).stream(user("hi")))
    assert info.value.retryable is True


async def test_a_malformed_chunk_is_a_clear_error(gserver) -> None:
    gserver.enqueue(Reply.sse(b'data: {"candidates": [\r\n\r\n'))
    with pytest.raises(ProviderError, match="unreadable stream chunk"):
        await collect(provider(gserver).stream(user("hi")))


def test_the_official_host_needs_a_key() -> None:
    with pytest.raises(UserError) as info:
        GeminiProvider("gemini-2.5-flash")
    assert "GEMINI_API_KEY" in (info.value.hint or "")


# ------------------------------------------------------------------ happy paths


async def test_text_usage_and_request_shape(gserver) -> None:
    usage = {
        "prompt_token_count": 40,
        "candidates_token_count": 9,
        "cached_content_token_count": 32,
        "thoughts_token_count": 5,
    }
    gserver.enqueue(Reply.sse(gemini_text_stream("Hello from Gemini!", usage=usage)))
    settings = ModelSettings(temperature=0.1, top_p=0.9, max_tokens=64, stop=["END"])
    out = assemble(await collect(provider(gserver).stream(user("hi"), settings=settings)))
    assert out.text == "Hello from Gemini!" and out.finish == ["stop"]
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.cache_read_tokens) == (40, 14, 32)
    request = gserver.posts()[-1]
    assert request.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == "g-key"
    body = last_body(gserver)
    assert body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["generationConfig"] == {
        "temperature": 0.1,
        "topP": 0.9,
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
    }


async def test_parallel_calls_get_stable_ids_and_pair_with_results(gserver) -> None:
    calls = [
        {"function_call": {"name": "weather", "args": {"city": "Paris"}}, "thought_signature": b"sig-1"},
        {"function_call": {"name": "weather", "args": {"city": "Oslo"}}},
    ]
    body = gemini_sse([gemini_chunk(calls), gemini_chunk([], finish="STOP")])
    gserver.enqueue(Reply.sse(body), Reply.sse(body))
    p = provider(gserver)
    first = assemble(await collect(p.stream(user("weather?"), tools=[ToolDef("weather")])))
    again = assemble(await collect(p.stream(user("weather?"), tools=[ToolDef("weather")])))
    ids = [c["id"] for c in first.calls.values()]
    assert ids == [c["id"] for c in again.calls.values()], "a repeated request assigns the same ids"
    assert len(set(ids)) == 2 and all(i.startswith("gcall_") for i in ids)
    assert [json.loads(c["arguments"]) for c in first.calls.values()] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert first.finish == ["tool_calls"]
    [reasoning] = first.completed
    assert reasoning.provider == "gemini" and reasoning.metadata["signatures"][0]["call_id"] == ids[0]
    sent_tools = last_body(gserver)["tools"]
    assert sent_tools == [
        {
            "functionDeclarations": [
                {"name": "weather", "description": "a tool", "parametersJsonSchema": ToolDef("weather").parameters}
            ]
        }
    ]
    # The next request carries both calls in one model turn (with the signature back) and both
    # results in one user turn, named after their calls.
    gserver.enqueue(Reply.sse(gemini_text_stream("Sunny in both.")))
    transcript = [
        *user("weather?"),
        reasoning,
        ToolCallEntry(call_id=ids[0], name="weather", arguments='{"city": "Paris"}'),
        ToolCallEntry(call_id=ids[1], name="weather", arguments='{"city": "Oslo"}'),
        ToolResultEntry(call_id=ids[1], output="rain"),
        ToolResultEntry(call_id=ids[0], output="sun", is_error=False),
    ]
    await collect(p.stream(transcript, tools=[ToolDef("weather")]))
    contents = last_body(gserver)["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "weather", "args": {"city": "Paris"}},
                "thoughtSignature": reasoning.metadata["signatures"][0]["signature"],
            },
            {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}},
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "weather", "response": {"output": "rain"}}},
            {"functionResponse": {"name": "weather", "response": {"output": "sun"}}},
        ],
    }


async def test_ids_from_the_api_are_kept_and_sent_back(gserver) -> None:
    chunk = gemini_chunk(
        [{"function_call": {"id": "fc-77", "name": "weather", "args": {"city": "Rome"}}}], finish="STOP"
    )
    gserver.enqueue(Reply.sse(gemini_sse([chunk])), Reply.sse(gemini_text_stream("ok")))
    p = provider(gserver)
    out = assemble(await collect(p.stream(user("weather?"), tools=[ToolDef("weather")])))
    assert out.calls[0]["id"] == "fc-77"
    transcript = [
        *user("weather?"),
        ToolCallEntry(call_id="fc-77", name="weather", arguments='{"city": "Rome"}'),
        ToolResultEntry(call_id="fc-77", output="boom", is_error=True),
    ]
    await collect(p.stream(transcript))
    contents = last_body(gserver)["contents"]
    assert contents[1]["parts"][0]["functionCall"]["id"] == "fc-77"
    assert contents[2]["parts"][0]["functionResponse"] == {
        "id": "fc-77",
        "name": "weather",
        "response": {"error": "boom"},
    }


async def test_thoughts_stream_as_reasoning(gserver) -> None:
    chunks = [
        gemini_chunk([{"text": "Let me think.", "thought": True}]),
        gemini_chunk([{"text": "42", "thought_signature": b"text-sig"}]),
        gemini_chunk(
            [], finish="STOP", usage={"prompt_token_count": 3, "candidates_token_count": 1, "thoughts_token_count": 20}
        ),
    ]
    gserver.enqueue(Reply.sse(gemini_sse(chunks)))
    out = assemble(await collect(provider(gserver).stream(user("answer?"))))
    assert out.reasoning == "Let me think." and out.text == "42"
    [entry] = out.completed
    assert isinstance(entry, ReasoningEntry) and entry.metadata["reasoning_tokens"] == 20
    assert out.usage.output_tokens == 21


async def test_structured_output_uses_response_json_schema(gserver) -> None:
    gserver.enqueue(Reply.sse(gemini_text_stream('{"answer": 4}')))
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    out = assemble(
        await collect(provider(gserver).stream(user("2+2"), response_format={"name": "Sum", "schema": schema}))
    )
    assert json.loads(out.text) == {"answer": 4}
    config = last_body(gserver)["generationConfig"]
    assert config == {"responseMimeType": "application/json", "responseJsonSchema": schema}


async def test_images_inline_and_by_uri(gserver) -> None:
    gserver.enqueue(Reply.sse(gemini_text_stream("a dot")))
    entries = [
        InputEntry(
            role="user",
            content=[
                TextPart("compare"),
                ImagePart(data=PNG, mime_type="image/png"),
                ImagePart(url="gs://bucket/cat.jpg", mime_type="image/jpeg"),
            ],
        )
    ]
    await collect(provider(gserver).stream(entries))
    parts = last_body(gserver)["contents"][0]["parts"]
    assert parts == [
        {"text": "compare"},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/cat.jpg"}},
    ]


async def test_extra_body_safety_settings_and_options(gserver) -> None:
    gserver.enqueue(Reply.sse(gemini_text_stream("ok")))
    p = provider(
        gserver,
        extra_body={"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
        safety_settings=[{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}],
    )
    settings = ModelSettings(provider_options={"gemini": {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}})
    await collect(p.stream(user("hi"), settings=settings))
    body = last_body(gserver)
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 0}}
    assert body["safetySettings"][0]["threshold"] == "BLOCK_ONLY_HIGH"
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


async def test_context_window_discovery(gserver) -> None:
    gserver.routes["/v1beta/models/gemini-window"] = Reply.json(
        200, {"name": "models/gemini-window", "inputTokenLimit": 32768}
    )
    p = track(GeminiProvider("models/gemini-window", base_url=gserver.base_url, api_key="k"))
    assert p.model == "gemini-window" and p.context_window() is None
    assert await p.discover_context_window() == 32768
    assert p.context_window() == 32768


def test_the_validator_catches_a_misnamed_field() -> None:
    good = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    check_gemini_request(good)
    for bad in (
        {**good, "generation_config": {}},
        {"contents": [{"role": "user", "parts": [{"txt": "hi"}]}]},
        {**good, "generationConfig": {"maxTokens": 5}},
        {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "%%%"}}]}]},
    ):
        with pytest.raises((pydantic.ValidationError, AssertionError)):
            check_gemini_request(bad)


def test_model_strings_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google")
    monkeypatch.setenv("GEMINI_BASE_URL", "http://127.0.0.1:9")
    p = track(provider_from_string("gemini:gemini-2.5-flash"))
    assert isinstance(p, GeminiProvider) and p.base_url == "http://127.0.0.1:9/v1beta" and p.model == "gemini-2.5-flash"
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    assert track(provider_from_string("google:gemini-2.5-pro"))._request_headers()["x-goog-api-key"] == "from-gemini"
    monkeypatch.setenv("GEMINI_BASE_URL", "http://127.0.0.1:9/custom/v1")
    assert track(provider_from_string("gemini:x")).base_url == "http://127.0.0.1:9/custom/v1"


async def test_assigned_ids_differ_when_only_the_history_differs(gserver) -> None:
    """Same call, same position, same request length, different history: different ids."""
    call = gemini_chunk([{"function_call": {"name": "weather", "args": {"city": "Paris"}}}], finish="STOP")
    gserver.enqueue(Reply.sse(gemini_sse([call])), Reply.sse(gemini_sse([call])))
    p = provider(gserver)
    a = assemble(await collect(p.stream(user("weather in Paris?"))))
    b = assemble(await collect(p.stream(user("and now Paris again?"))))
    assert a.calls[0]["id"] != b.calls[0]["id"]


async def test_429_carries_retry_after(gserver) -> None:
    body = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    gserver.enqueue(Reply.json(429, body, headers={"Retry-After": "3"}))
    with pytest.raises(ProviderError) as info:
        await collect(provider(gserver).stream(user("hi")))
    assert info.value.retryable is True and info.value.retry_after == 3.0


async def test_a_json_array_answer_is_accepted(gserver) -> None:
    """A proxy that dropped ``alt=sse`` gets the API's JSON array of chunks."""
    chunks = [gemini_chunk([{"text": "Hel"}]), gemini_chunk([{"text": "lo"}], finish="STOP")]
    payload = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in chunks]
    gserver.enqueue(Reply.json(200, payload))
    out = assemble(await collect(provider(gserver).stream(user("hi"))))
    assert out.text == "Hello" and out.finish == ["stop"]
