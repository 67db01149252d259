"""Retry-After from a real HTTP endpoint reaches the retry policy.

ModelRetrying reaches the stream and the SSE frames.
"""

from __future__ import annotations

import email.utils
import time

import pytest

from lovia import Agent, ProviderError, RetryPolicy, Runner, events
from lovia.providers._http import parse_retry_after
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.testing import ScriptedProvider, fail, text
from lovia.web.sse import event_to_sse, frame_data
from tests.providers.servers import FakeServer, Reply, openai_text_stream


def test_parse_retry_after_seconds_dates_and_garbage() -> None:
    now = 1_000_000.0
    assert parse_retry_after("3", now=now) == 3.0
    assert parse_retry_after(" 1.5 ", now=now) == 1.5
    assert parse_retry_after("-4", now=now) == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 12, usegmt=True), now=now) == pytest.approx(12, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0  # already passed
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after("", now=now) is None
    assert parse_retry_after(None, now=now) is None


def test_delay_after_honours_retry_after_capped_by_the_policy() -> None:
    policy = RetryPolicy(backoff_base=0.01, backoff_max=5.0)
    assert policy.delay_after(1, ProviderError("x", retry_after=2.0)) == 2.0
    assert policy.delay_after(1, ProviderError("x", retry_after=60.0)) == 5.0
    assert policy.delay_after(1, ProviderError("x")) <= 0.015  # no header: the policy's own backoff
    assert policy.delay_after(1, ValueError("x")) <= 0.015


def rate_limited(header: str) -> Reply:
    reply = Reply.json(429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
    reply.headers["Retry-After"] = header
    return reply


@pytest.mark.parametrize("header", ["4", "date"])
async def test_a_429_with_retry_after_sets_the_wait_and_emits_model_retrying(header: str) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    value = email.utils.formatdate(time.time() + 4, usegmt=True) if header == "date" else header
    with FakeServer() as fake:
        fake.enqueue(rate_limited(value), Reply.sse(openai_text_stream("ok then")))
        provider = OpenAIChatProvider("m", api_key="k", base_url=fake.base_url)
        agent = Agent(name="a", model=provider, retry=RetryPolicy(max_attempts=3, backoff_base=0.01, sleep=record))
        handle = Runner.stream(agent, "hi")
        seen = [e async for e in handle]
        await provider.aclose()
    retrying = [e for e in seen if isinstance(e, events.ModelRetrying)]
    assert len(retrying) == 1
    r = retrying[0]
    assert (r.attempt, r.max_attempts) == (1, 3)
    assert isinstance(r.error, ProviderError) and r.error.status_code == 429
    assert 2.5 <= r.delay <= 4.0 and waits == [r.delay]
    assert isinstance(seen[-1], events.RunCompleted) and seen[-1].result.output == "ok then"
    frame = event_to_sse(r)
    assert frame is not None and frame["event"] == "retrying"
    data = frame_data(frame)
    assert data["reason"] == "429" and data["attempt"] == 1 and data["max_attempts"] == 3


async def test_no_retry_no_event() -> None:
    agent = Agent(name="a", model=ScriptedProvider([text("fine")]))
    seen = [e async for e in Runner.stream(agent, "hi")]
    assert not [e for e in seen if isinstance(e, events.ModelRetrying)]


async def test_a_connection_error_frame_says_so() -> None:
    async def instant(_s: float) -> None:
        return None

    boom = ProviderError("connection failed", retryable=True)
    agent = Agent(
        name="a", model=ScriptedProvider([fail(boom), text("back")]), retry=RetryPolicy(max_attempts=2, sleep=instant)
    )
    seen = [e async for e in Runner.stream(agent, "hi")]
    frame = event_to_sse(next(e for e in seen if isinstance(e, events.ModelRetrying)))
    assert frame is not None and frame_data(frame)["reason"] == "connection failed"
