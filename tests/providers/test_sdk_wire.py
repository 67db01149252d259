"""Every request shape the four adapters send, validated against the vendors' own SDK types.

One transcript per shape (plain text, parallel tool calls with results, images and files, tool
results with images, replayed reasoning, structured output, sampling settings, prompt caching);
each adapter renders it with ``build_payload`` and the body must parse as the vendor SDK's request
type with unknown keys forbidden. The provider-specific tests check the values; this file checks
that no field we send is one the vendor does not have.
"""

from __future__ import annotations

import json

import pytest

from lovia.messages import FilePart, ImagePart, TextPart
from lovia.providers import (
    AnthropicProvider,
    GeminiProvider,
    ModelSettings,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
)
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
)

from .conftest import ToolDef, track
from .sdk_wire import check_anthropic_request, check_chat_request, check_gemini_request, check_responses_request
from .servers import Reply

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PDF = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
URL = "http://127.0.0.1:9/v1"

SYSTEM = InputEntry(role="system", content="be brief")
SHAPES: dict[str, list] = {
    "text": [SYSTEM, InputEntry(role="user", content="hi")],
    "parallel_calls": [
        SYSTEM,
        InputEntry(role="user", content="weather?"),
        AssistantTextEntry(content="Checking both."),
        ToolCallEntry(call_id="call_1", name="weather", arguments='{"city": "Paris"}'),
        ToolCallEntry(call_id="call_2", name="weather", arguments='{"city": "Oslo"}'),
        ToolResultEntry(call_id="call_2", output="rain"),
        ToolResultEntry(call_id="call_1", output="failed", is_error=True),
        InputEntry(role="user", content="and tomorrow?"),
    ],
    "images_and_files": [
        InputEntry(
            role="user",
            content=[
                TextPart("compare"),
                ImagePart(data=PNG, mime_type="image/png", detail="high"),
                ImagePart(url="https://example.test/cat.jpg"),
                FilePart(data=PDF, mime_type="application/pdf", filename="a.pdf"),
            ],
        )
    ],
    "tool_result_images": [
        InputEntry(role="user", content="screenshot please"),
        ToolCallEntry(call_id="call_s", name="shot", arguments="{}"),
        ToolResultEntry(call_id="call_s", output="here", parts=[ImagePart(data=PNG, mime_type="image/png")]),
    ],
    "reasoning_replay": [
        SYSTEM,
        InputEntry(role="user", content="think"),
        ReasoningEntry(content="thinking", provider="anthropic", metadata={"signature": "sig"}),
        ReasoningEntry(content="", provider="anthropic", metadata={"redacted_data": "xyz"}),
        ReasoningEntry(
            content="summary",
            id="rs_1",
            provider="openai-responses",
            metadata={"item_id": "rs_1", "summary": ["summary"], "encrypted_content": "E"},
        ),
        ReasoningEntry(
            content="plan", provider="gemini", metadata={"signatures": [{"call_id": "call_r", "signature": "c2ln"}]}
        ),
        ReasoningEntry(content="free text reasoning", provider="openai-chat"),
        ToolCallEntry(call_id="call_r", name="weather", arguments='{"city": "Rome"}'),
        ToolResultEntry(call_id="call_r", output="sun"),
    ],
}
SCHEMA = {
    "name": "Answer",
    "schema": {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    },
    "strict": True,
}
SETTINGS = {
    "plain": ModelSettings(),
    "sampling": ModelSettings(temperature=0.2, top_p=0.9, max_tokens=100, stop=["END"], parallel_tool_calls=False),
    "anthropic_cache": ModelSettings(provider_options={"anthropic": {"cache_ttl": "1h"}}),
    "anthropic_thinking": ModelSettings(
        max_tokens=16_000, provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 8_000}}}
    ),
    "responses_reasoning": ModelSettings(
        provider_options={"openai-responses": {"reasoning": {"effort": "low", "summary": "auto"}}}
    ),
    "gemini_thinking": ModelSettings(
        provider_options={"gemini": {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}}
    ),
}
TOOLS = [ToolDef("weather"), ToolDef("shot", parameters={"type": "object", "properties": {}}, strict=True)]


def adapters() -> dict[str, tuple]:
    return {
        "chat": (track(OpenAIChatProvider("m", base_url=URL, supports_json_schema=True)), check_chat_request),
        "chat_official": (track(OpenAIChatProvider("gpt-4.1", api_key="k")), check_chat_request),
        "responses": (track(OpenAIResponsesProvider("m", base_url=URL)), check_responses_request),
        "anthropic": (
            track(AnthropicProvider("claude-x", base_url=URL, official_dialect=True)),
            check_anthropic_request,
        ),
        "anthropic_compatible": (track(AnthropicProvider("claude-x", base_url=URL)), check_anthropic_request),
        "gemini": (track(GeminiProvider("gemini-x", base_url="http://127.0.0.1:9")), check_gemini_request),
    }


@pytest.mark.parametrize("settings_name", sorted(SETTINGS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("with_tools", [False, True])
def test_every_request_shape_matches_the_vendor_sdk(shape: str, settings_name: str, with_tools: bool) -> None:
    settings = SETTINGS[settings_name]
    for name, (provider, check) in adapters().items():
        body = provider.build_payload(SHAPES[shape], tools=TOOLS if with_tools else None, settings=settings)
        try:
            check(body)
        except Exception as exc:  # name the adapter in the failure
            raise AssertionError(f"{name} / {shape} / {settings_name}: {exc}") from exc


@pytest.mark.parametrize("name", ["chat", "chat_official", "responses", "gemini"])
def test_structured_output_requests_match_the_vendor_sdk(name: str) -> None:
    provider, check = adapters()[name]
    check(provider.build_payload(SHAPES["text"], response_format=SCHEMA))


def test_extra_body_is_layered_between_settings_and_provider_options() -> None:
    chat = track(
        OpenAIChatProvider("m", base_url=URL, extra_body={"max_tokens": 7, "seed": 1, "chat_template_kwargs": {"a": 1}})
    )
    settings = ModelSettings(max_tokens=100, provider_options={"openai": {"seed": 2, "stream_options": None}})
    body = chat.build_payload(SHAPES["text"], settings=settings)
    assert body["max_tokens"] == 7, "a raw field beats the typed one"
    assert body["seed"] == 2, "provider_options beat extra_body"
    assert body["chat_template_kwargs"] == {"a": 1} and "stream_options" not in body
    anthropic = track(AnthropicProvider("c", base_url=URL, extra_body={"metadata": {"user_id": "u1"}}))
    assert anthropic.build_payload(SHAPES["text"])["metadata"] == {"user_id": "u1"}
    check_anthropic_request(anthropic.build_payload(SHAPES["text"]))


def test_anthropic_cache_breakpoints_cover_tools_system_and_history() -> None:
    provider = track(AnthropicProvider("c", base_url=URL))
    settings = ModelSettings(provider_options={"anthropic": {"cache_system": True}})
    body = provider.build_payload(SHAPES["parallel_calls"], tools=TOOLS, settings=settings)
    check_anthropic_request(body)
    marked = [
        (m["role"], b["type"])
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and "cache_control" in b
    ]
    assert marked == [("user", "tool_result")], "history breakpoint on the last tool result, not on the new question"
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in body["tools"][0]
    ttl = provider.build_payload(SHAPES["text"], settings=SETTINGS["anthropic_cache"])
    assert ttl["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"} and "cache_ttl" not in ttl


@pytest.mark.parametrize(
    ("provider", "window"),
    [
        (lambda: OpenAIChatProvider("gpt-4o-mini", api_key="k"), 128_000),
        (lambda: OpenAIChatProvider("deepseek-chat", base_url="https://api.deepseek.com/v1"), 128_000),
        (lambda: OpenAIChatProvider("gpt-4o-mini", base_url=URL), None),
        (lambda: OpenAIResponsesProvider("o4-mini", api_key="k"), 200_000),
    ],
)
def test_bundled_windows_are_keyed_by_host(provider, window) -> None:
    assert track(provider()).context_window() == window


async def test_anthropic_and_gemini_ask_the_endpoint_before_the_table(server) -> None:
    server.routes["/v1/models/claude-sonnet-4-5"] = Reply.json(
        200, {"id": "claude-sonnet-4-5", "max_input_tokens": 1_000_000}
    )
    p = track(AnthropicProvider("claude-sonnet-4-5", base_url=server.base_url))
    assert p.context_window() is None
    assert await p.discover_context_window() == 1_000_000 and p.context_window() == 1_000_000
    official = track(AnthropicProvider("claude-opus-4-1", base_url="https://api.anthropic.com/v1", api_key="k"))
    assert official.context_window() is None, "the official window comes from the Models API first"


def test_chat_replays_only_its_own_reasoning() -> None:
    provider = track(OpenAIChatProvider("m", base_url=URL, replay_reasoning=True))
    body = provider.build_payload(SHAPES["reasoning_replay"])
    [assistant] = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistant["reasoning_content"] == "free text reasoning"


def test_the_hand_written_chat_and_anthropic_streams_are_sdk_shaped() -> None:
    """The builders in ``servers`` emit only fields the vendors' SDK event types declare."""
    from .sdk_wire import check_anthropic_event, check_chat_chunk
    from .servers import anthropic_text_stream, anthropic_tool_stream, openai_chunk

    chunks = [
        openai_chunk({"role": "assistant", "content": "hi"}),
        openai_chunk(
            {"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}]}
        ),
        openai_chunk({}, finish_reason="stop"),
        openai_chunk(
            usage={
                "prompt_tokens": 1,
                "completion_tokens": 2,
                "total_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 1},
            }
        ),
    ]
    for chunk in chunks:
        check_chat_chunk(chunk)
    for event in [*anthropic_text_stream("hello"), *anthropic_tool_stream([("t1", "f", '{"a": 1}')], text="x")]:
        check_anthropic_event(event)
    with pytest.raises(AssertionError, match="finish_reasn"):
        check_chat_chunk({**chunks[2], "choices": [{"index": 0, "delta": {}, "finish_reasn": "stop"}]})


@pytest.mark.parametrize("name", ["chat", "responses", "anthropic", "gemini"])
def test_without_vision_no_image_reaches_the_wire(name: str) -> None:
    """``supports_vision=False`` replaces images by a note on every adapter (and stays SDK-valid)."""
    makers = {
        "chat": (lambda: OpenAIChatProvider("m", base_url=URL, supports_vision=False), check_chat_request),
        "responses": (
            lambda: OpenAIResponsesProvider("m", base_url=URL, supports_vision=False),
            check_responses_request,
        ),
        "anthropic": (lambda: AnthropicProvider("m", base_url=URL, supports_vision=False), check_anthropic_request),
        "gemini": (
            lambda: GeminiProvider("m", base_url="http://127.0.0.1:9", supports_vision=False),
            check_gemini_request,
        ),
    }
    make, check = makers[name]
    provider = track(make())
    assert provider.supports_vision is False
    for shape in ("images_and_files", "tool_result_images"):
        body = provider.build_payload(SHAPES[shape])
        check(body)
        wire = json.dumps(body)
        assert PNG not in wire and "cat.jpg" not in wire, f"{name}/{shape} still sends an image"
