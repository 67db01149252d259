"""Agent + Runner + real provider adapters against the fake vendor servers on loopback."""

from __future__ import annotations

import json

import pytest

from lovia import Agent, Runner, tool
from lovia.events import OutputDiscarded
from lovia.reliability import RetryPolicy

from .servers import (
    FakeServer,
    Reply,
    anthropic_stream,
    anthropic_text_stream,
    anthropic_tool_stream,
    openai_text_stream,
    openai_tool_stream,
    split_every,
)

FAST_RETRY = RetryPolicy(backoff_base=0.001, backoff_max=0.001)


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def openai_agent(server: FakeServer, monkeypatch: pytest.MonkeyPatch, **kwargs) -> Agent:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    kwargs.setdefault("tools", [weather])
    return Agent(name="e2e", instructions="be brief", model="openai:local-model", retry=FAST_RETRY, **kwargs)


def anthropic_agent(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> Agent:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-e2e")
    return Agent(name="e2e", instructions="be brief", model="anthropic:claude-e2e", tools=[weather], retry=FAST_RETRY)


def tool_messages(request) -> list[dict]:
    return [m for m in request.json["messages"] if m["role"] == "tool"]


async def test_openai_tool_round_trip(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.enqueue(
        Reply.sse(openai_tool_stream([("call_w1", "weather", json.dumps({"city": "Paris"}))])),
        Reply.sse(openai_text_stream("It is sunny in Paris.")),
    )
    result = await Runner.run(openai_agent(server, monkeypatch), "weather in Paris?")
    assert result.output == "It is sunny in Paris."
    first, second = server.posts()
    schemas = {t["function"]["name"]: t["function"] for t in first.json["tools"]}
    assert schemas["weather"]["parameters"]["properties"]["city"]["type"] == "string"
    assert schemas["weather"]["description"] == "Current weather for a city."
    assert first.json["messages"][0] == {"role": "system", "content": "be brief"}
    call = second.json["messages"][-2]
    assert call["role"] == "assistant" and call["tool_calls"][0]["id"] == "call_w1"
    assert tool_messages(second) == [{"role": "tool", "tool_call_id": "call_w1", "content": "sunny in Paris"}]
    assert result.usage.input_tokens == 30 and result.usage.output_tokens == 13


async def test_anthropic_tool_round_trip(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.enqueue(
        Reply.sse(
            anthropic_stream(anthropic_tool_stream([("toolu_9", "weather", '{"city": "Oslo"}')], text="Checking."))
        ),
        Reply.sse(anthropic_stream(anthropic_text_stream("Sunny in Oslo."))),
    )
    result = await Runner.run(anthropic_agent(server, monkeypatch), "weather in Oslo?")
    assert result.output == "Sunny in Oslo."
    first, second = server.posts()
    assert first.headers["x-api-key"] == "ak-e2e"
    assert first.json["system"] == [{"type": "text", "text": "be brief"}]
    schemas = {t["name"]: t for t in first.json["tools"]}
    assert "city" in schemas["weather"]["input_schema"]["properties"]
    assistant, results = second.json["messages"][-2:]
    assert assistant["content"][-1] == {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "weather",
        "input": {"city": "Oslo"},
    }
    assert results == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "sunny in Oslo"}],
    }


async def test_malformed_tool_json_becomes_an_error_result_the_model_sees(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue(
        Reply.sse(openai_tool_stream([("call_bad", "weather", '{"city": "Par')])),
        Reply.sse(openai_text_stream("Sorry, retrying later.")),
    )
    result = await Runner.run(openai_agent(server, monkeypatch), "weather?")
    assert result.output == "Sorry, retrying later."
    (sent,) = tool_messages(server.posts()[1])
    assert sent["tool_call_id"] == "call_bad"
    assert "Invalid arguments" in sent["content"] and "weather" in sent["content"]
    # The replayed call carries valid JSON so the vendor accepts the transcript.
    replayed = server.posts()[1].json["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(replayed)


async def test_429_then_success(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.enqueue(
        Reply.json(429, {"error": {"message": "slow down", "type": "rate_limit"}}),
        Reply.sse(openai_text_stream("finally")),
    )
    result = await Runner.run(openai_agent(server, monkeypatch, tools=[]), "hi")
    assert result.output == "finally"
    assert len(server.posts()) == 2 and result.turns == 1


async def test_stream_dying_half_way_is_restarted(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    body = openai_text_stream("this answer is cut off and then retried")
    events = [e + b"\n\n" for e in body.split(b"\n\n")[:-1]]
    server.enqueue(
        Reply.sse(body, pieces=events, die_after=5),
        Reply.sse(body, pieces=split_every(body, 17)),
    )
    handle = Runner.stream(openai_agent(server, monkeypatch, tools=[]), "hi")
    seen = [type(event).__name__ async for event in handle]
    result = await handle.result()
    assert result.output == "this answer is cut off and then retried"
    assert seen.count(OutputDiscarded.__name__) == 1
    assert seen.index("OutputDiscarded") < seen.index("MessageCompleted")
    assert len(server.posts()) == 2


async def test_anthropic_overloaded_then_success(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.enqueue(
        Reply.json(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        Reply.sse(anthropic_stream(anthropic_text_stream("ok now"))),
    )
    result = await Runner.run(anthropic_agent(server, monkeypatch), "hi")
    assert result.output == "ok now" and len(server.posts()) == 2


# ------------------------------------------------------------------ Responses and Gemini through the runner


async def test_structured_output_through_responses_and_gemini(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Agent(output_type=...)`` goes out as each API's native JSON schema and comes back parsed."""
    from pydantic import BaseModel

    from .sdk_wire import ResponsesStream, check_gemini_request, check_responses_request, gemini_text_stream

    class Forecast(BaseModel):
        city: str
        celsius: int

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    server.enqueue(Reply.sse(ResponsesStream().created().message('{"city": "Oslo", "celsius": 4}').completed().body()))
    result = await Runner.run(
        Agent(name="r", model="openai-responses:m", output_type=Forecast, retry=FAST_RETRY), "oslo?"
    )
    assert result.output == Forecast(city="Oslo", celsius=4)
    body = server.posts()[-1].json
    check_responses_request(body)
    assert body["text"]["format"]["type"] == "json_schema" and "celsius" in json.dumps(body["text"]["format"]["schema"])
    with FakeServer(prefix="/v1beta") as gemini:
        monkeypatch.setenv("GEMINI_BASE_URL", f"http://127.0.0.1:{gemini.port}")
        gemini.enqueue(Reply.sse(gemini_text_stream('{"city": "Rome", "celsius": 21}')))
        result = await Runner.run(
            Agent(name="g", model="gemini:gemini-x", output_type=Forecast, retry=FAST_RETRY), "rome?"
        )
        assert result.output == Forecast(city="Rome", celsius=21)
        body = gemini.posts()[-1].json
        check_gemini_request(body)
        assert body["generationConfig"]["responseMimeType"] == "application/json"
        assert "celsius" in json.dumps(body["generationConfig"]["responseJsonSchema"])


async def test_gemini_parallel_tools_through_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two calls in one Gemini turn run, and their results go back in one user turn."""
    from .sdk_wire import check_gemini_request, gemini_chunk, gemini_sse, gemini_text_stream

    with FakeServer(prefix="/v1beta") as gemini:
        monkeypatch.setenv("GEMINI_BASE_URL", f"http://127.0.0.1:{gemini.port}")
        monkeypatch.setenv("GEMINI_API_KEY", "g")
        calls = [{"function_call": {"name": "weather", "args": {"city": c}}} for c in ("Paris", "Oslo")]
        gemini.enqueue(
            Reply.sse(gemini_sse([gemini_chunk(calls, finish="STOP")])),
            Reply.sse(gemini_text_stream("Paris sunny, Oslo sunny.")),
        )
        agent = Agent(name="g", instructions="be brief", model="gemini:gemini-x", tools=[weather], retry=FAST_RETRY)
        result = await Runner.run(agent, "weather in Paris and Oslo?")
        assert result.output == "Paris sunny, Oslo sunny."
        second = gemini.posts()[1].json
        check_gemini_request(second)
        responses = [p["functionResponse"] for p in second["contents"][2]["parts"]]
        assert sorted(r["response"]["output"] for r in responses) == ["sunny in Oslo", "sunny in Paris"]
        assert all(r["name"] == "weather" for r in responses)
