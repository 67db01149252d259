"""FailoverProvider over real local vendor servers, in process and across a SIGKILL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lovia import Agent, Runner
from lovia.events import ProviderFailedOver
from lovia.exceptions import ContextOverflowError, ProviderError, UserError
from lovia.providers import FailoverProvider, OpenAIChatProvider, OpenAIResponsesProvider
from lovia.reliability import RetryPolicy
from lovia.transcript import InputEntry

from .conftest import assemble, collect, track
from .sdk_wire import ResponsesStream, check_gemini_request, check_responses_request, gemini_chunk, gemini_sse
from .servers import FakeServer, Reply, openai_text_stream

CHILD = Path(__file__).with_name("_crash_child.py")
UNAVAILABLE = {"error": {"message": "overloaded, try later", "type": "server_error", "code": None}}


def chat(server: FakeServer) -> OpenAIChatProvider:
    return track(OpenAIChatProvider("primary-model", base_url=server.base_url))


def responses(server: FakeServer) -> OpenAIResponsesProvider:
    return track(OpenAIResponsesProvider("secondary-model", base_url=server.base_url, api_key="k"))


def failover(*members, **kwargs) -> FailoverProvider:
    kwargs.setdefault("backoff", 0.0)
    return track(FailoverProvider(list(members), **kwargs))


HI = [InputEntry(role="user", content="hi")]


@pytest.fixture
def second():
    with FakeServer() as srv:
        yield srv


# ------------------------------------------------------------------ unhappy paths first


def test_needs_members_and_attempts() -> None:
    with pytest.raises(UserError):
        FailoverProvider([])
    with pytest.raises(UserError):
        FailoverProvider(["openai:m"], attempts=0)


async def test_a_non_retryable_error_does_not_fail_over(server: FakeServer, second: FakeServer) -> None:
    server.enqueue(Reply.json(401, {"error": {"message": "bad key"}}))
    with pytest.raises(ProviderError, match="bad key"):
        await collect(failover(chat(server), responses(second)).stream(HI))
    assert len(server.posts()) == 1 and second.posts() == []


async def test_context_overflow_goes_to_the_context_policy(server: FakeServer, second: FakeServer) -> None:
    server.enqueue(
        Reply.json(
            400, {"error": {"message": "maximum context length is 4096 tokens", "code": "context_length_exceeded"}}
        )
    )
    with pytest.raises(ContextOverflowError):
        await collect(failover(chat(server), responses(second)).stream(HI))
    assert second.posts() == []


async def test_a_failure_after_output_is_not_hidden(server: FakeServer, second: FakeServer) -> None:
    body = openai_text_stream("partial answer that dies")
    pieces = [e + b"\n\n" for e in body.split(b"\n\n")[:-1]]
    server.enqueue(Reply.sse(body, pieces=pieces, die_after=3))
    with pytest.raises(ProviderError):
        await collect(failover(chat(server), responses(second)).stream(HI))
    assert second.posts() == [], "a turn is never stitched together from two vendors"


async def test_when_every_member_fails_the_last_error_is_raised(server: FakeServer, second: FakeServer) -> None:
    server.enqueue(*[Reply.json(503, UNAVAILABLE) for _ in range(2)])
    second.enqueue(*[Reply.json(500, UNAVAILABLE) for _ in range(2)])
    p = failover(chat(server), responses(second), attempts=2)
    with pytest.raises(ProviderError) as info:
        await collect(p.stream(HI))
    assert info.value.retryable is True and info.value.status_code == 500
    assert len(server.posts()) == 2 and len(second.posts()) == 2


# ------------------------------------------------------------------ failing over


async def test_three_503s_then_the_secondary_answers(server: FakeServer, second: FakeServer) -> None:
    server.enqueue(*[Reply.json(503, UNAVAILABLE) for _ in range(3)])
    second.enqueue(
        Reply.sse(ResponsesStream().created().message("from the secondary").completed().body()),
        Reply.sse(ResponsesStream().created().message("still secondary").completed().body()),
    )
    primary, secondary = chat(server), responses(second)
    p = failover(primary, secondary)
    agent = Agent(name="fo", instructions="be brief", model=p, retry=RetryPolicy(max_attempts=1))
    handle = Runner.stream(agent, "hi")
    events = [event async for event in handle]
    result = await handle.result()
    assert result.output == "from the secondary"
    [switch] = [e for e in events if isinstance(e, ProviderFailedOver)]
    assert switch.from_provider == "openai-chat:primary-model"
    assert switch.to_provider == "openai-responses:secondary-model"
    assert switch.attempts == 3 and isinstance(switch.error, ProviderError) and switch.error.status_code == 503
    assert events.index(switch) < [type(e).__name__ for e in events].index("MessageCompleted")
    assert len(server.posts()) == 3
    check_responses_request(second.posts()[0].json)
    assert p.active is secondary and p.name == "openai-responses" and p.model == "secondary-model"
    # The member that answers stays active: the next call does not knock on the primary again.
    result = await Runner.run(agent, "again")
    assert result.output == "still secondary" and len(server.posts()) == 3
    assert result.usage.input_tokens == 30


async def test_a_member_recovering_within_its_attempts_keeps_the_run(server: FakeServer, second: FakeServer) -> None:
    server.enqueue(Reply.json(503, UNAVAILABLE), Reply.json(429, UNAVAILABLE), Reply.sse(openai_text_stream("ok")))
    out = assemble(await collect(failover(chat(server), responses(second)).stream(HI)))
    assert out.text == "ok" and second.posts() == []


def test_capabilities_are_the_weakest_members(server: FakeServer, second: FakeServer) -> None:
    a = track(OpenAIChatProvider("gpt-4o", base_url="https://api.openai.com/v1", api_key="k"))
    b = track(
        OpenAIResponsesProvider("gpt-4.1", base_url="https://api.openai.com/v1", api_key="k", supports_vision=False)
    )
    p = failover(a, b)
    assert p.supports_vision is False and p.context_window() == 128_000
    assert p.supports_json_schema is True
    assert failover(a, chat(server)).supports_json_schema is False


async def test_string_members_are_built_and_closed(monkeypatch: pytest.MonkeyPatch, second: FakeServer) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", second.base_url)
    p = FailoverProvider(["openai:one", "openai-responses:two"])
    assert [m.name for m in p.members] == ["openai-chat", "openai-responses"]
    await p.aclose()
    assert all(m._client.is_closed for m in p.members)


def test_restoring_state_that_no_longer_matches_is_ignored(server: FakeServer, second: FakeServer) -> None:
    p = failover(chat(server), responses(second))
    p.restore_failover_state({"active": 1, "label": "openai-responses:secondary-model"})
    assert p.active.model == "secondary-model"
    fresh = failover(chat(server), responses(second))
    fresh.restore_failover_state({"active": 1, "label": "something-else:model"})
    fresh.restore_failover_state({"active": 7})
    assert fresh.active.model == "primary-model"


# ------------------------------------------------------------------ crashes (real processes, SIGKILL)


def run_child(cfg: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), json.dumps(cfg)], capture_output=True, text=True, timeout=60)


async def test_reasoning_survives_a_crash_and_resume(server: FakeServer, tmp_path: Path) -> None:
    """A Responses reasoning item reaches the checkpoint and is sent back by the resumed run."""
    turn = ResponsesStream().created().reasoning("rs_crash", ["Check the weather."], encrypted="SEALED-1")
    server.enqueue(
        Reply.sse(turn.calls([("call_rome", "lookup", '{"city": "Rome"}')]).completed(reasoning=17).body()),
        Reply.sse(ResponsesStream().created().message("Sunny in Rome.").completed().body()),
    )
    cfg = {
        "work": str(tmp_path),
        "db": str(tmp_path / "runs.db"),
        "run_id": "crash-reasoning",
        "members": [{"kind": "responses", "base_url": server.base_url}],
    }
    first = run_child(cfg)
    assert first.returncode == -9, first.stderr
    second = run_child(cfg)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["output"] == "Sunny in Rome."
    resumed = server.posts()[1].json
    check_responses_request(resumed)
    kinds = [item.get("type", "message") for item in resumed["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
    assert resumed["input"][1]["encrypted_content"] == "SEALED-1" and resumed["input"][1]["id"] == "rs_crash"
    assert resumed["input"][3] == {"type": "function_call_output", "call_id": "call_rome", "output": "sunny in Rome"}


async def test_a_crash_during_failover_resumes_on_the_answering_member(server: FakeServer, tmp_path: Path) -> None:
    """Primary (chat) 503 x3, secondary (Gemini) answers with a call; the tool kills the process.

    The resumed process must go straight to Gemini, and Gemini's thought signature must come back.
    """
    with FakeServer(prefix="/v1beta") as gemini:
        server.enqueue(*[Reply.json(503, UNAVAILABLE) for _ in range(3)])
        call = {"function_call": {"name": "lookup", "args": {"city": "Rome"}}, "thought_signature": b"sig-rome"}
        gemini.enqueue(
            Reply.sse(gemini_sse([gemini_chunk([call], finish="STOP")])),
            Reply.sse(gemini_sse([gemini_chunk([{"text": "Sunny in Rome."}], finish="STOP")])),
        )
        cfg = {
            "work": str(tmp_path),
            "db": str(tmp_path / "runs.db"),
            "run_id": "crash-failover",
            "members": [{"kind": "chat", "base_url": server.base_url}, {"kind": "gemini", "base_url": gemini.base_url}],
        }
        first = run_child(cfg)
        assert first.returncode == -9, first.stderr
        second = run_child(cfg)
        assert second.returncode == 0, second.stderr
        out = json.loads(second.stdout)
        assert out["output"] == "Sunny in Rome." and "ProviderFailedOver" not in out["events"]
        assert len(server.posts()) == 3, "the resumed run did not go back to the failing primary"
        resumed = gemini.posts()[1].json
        check_gemini_request(resumed)
        model_turn = resumed["contents"][1]
        assert model_turn["role"] == "model"
        assert model_turn["parts"][0]["functionCall"] == {"name": "lookup", "args": {"city": "Rome"}}
        assert model_turn["parts"][0]["thoughtSignature"]
        assert resumed["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": "sunny in Rome"}


async def test_a_long_retry_after_fails_over_at_once() -> None:
    """A member asking for a pause longer than backoff_max is not waited for."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    from lovia.testing import ScriptedProvider, text

    secondary = ScriptedProvider(lambda entries, tools: text("fine"))
    error = ProviderError("rate limited", status_code=429, retryable=True)
    error.retry_after = 120.0  # what a Retry-After: 120 header gives

    def long_pause(entries, tools):
        raise error

    p = FailoverProvider([ScriptedProvider(long_pause), secondary], backoff=0.01, backoff_max=5.0, sleep=sleep)
    out = assemble(await collect(p.stream(HI)))
    assert out.text == "fine" and slept == [], "no waiting for a member that asked for two minutes"
    short = ProviderError("rate limited", status_code=429, retryable=True)
    short.retry_after = 2.0

    def short_pause(entries, tools):
        raise short

    q = FailoverProvider(
        [ScriptedProvider(short_pause), ScriptedProvider(lambda e, t: text("ok"))], backoff=0.01, sleep=sleep
    )
    await collect(q.stream(HI))
    assert slept == [2.0, 2.0], "a short Retry-After is honoured between attempts"


def test_the_run_head_carries_provider_state() -> None:
    from lovia.checkpointer import RunHead, RunSnapshot

    head = RunHead(agent_name="a", provider_state={"active": 1, "label": "gemini:g"})
    assert RunHead.from_dict(head.to_dict()).provider_state == {"active": 1, "label": "gemini:g"}
    assert RunHead.from_dict({"agent_name": "a"}).provider_state == {}, "heads written before it load"
    snap = RunSnapshot.from_parts("r", [], head)
    assert RunSnapshot.from_json(snap.to_json()).provider_state == {"active": 1, "label": "gemini:g"}
