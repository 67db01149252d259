"""The ``code`` of a chat stream's ``error`` frame, over real failures: an endpoint that refuses
the key, rate limits, is overloaded, is down, or fails otherwise, plus the run-level limits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, RetryPolicy, tool
from lovia.exceptions import (
    BudgetExceeded,
    ContextOverflowError,
    GuardrailTripped,
    MaxTurnsExceeded,
    OutputValidationError,
    ProviderError,
    RunCancelled,
    ToolError,
)
from lovia.providers import OpenAIChatProvider
from lovia.testing import ScriptedProvider, call
from lovia.web import create_app
from lovia.web.errors import run_error_code

from ..providers.servers import FakeServer, Reply
from .helpers import ThreadServer, free_port, sse


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ToolError("no"), "tool_error"),
        (ProviderError("x", status_code=401), "provider_auth"),
        (ProviderError("x", status_code=403), "provider_auth"),
        (ProviderError("x", status_code=429), "rate_limited"),
        (ProviderError("x", status_code=503), "overloaded"),
        (ProviderError("x", status_code=529), "overloaded"),
        (ProviderError("x", status_code=500), "provider_error"),
        (ContextOverflowError("big"), "context_overflow"),
        (BudgetExceeded("spent"), "budget_exceeded"),
        (MaxTurnsExceeded("long"), "max_turns"),
        (RunCancelled("stop"), "cancelled"),
        (GuardrailTripped("bad"), "guardrail"),
        (OutputValidationError("shape"), "output_invalid"),
        (RuntimeError("surprise"), "internal"),
    ],
)
def test_each_failure_has_its_code(error: BaseException, code: str) -> None:
    assert run_error_code(error) == code


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def _failed_frame(tmp_path: Path, base_url: str) -> dict[str, Any]:
    provider = OpenAIChatProvider("fake-model", api_key="sk-test", base_url=base_url, timeout=2.0)
    agent = Agent(name="a", model=provider, retry=RetryPolicy(max_attempts=1))
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "e.db"))) as srv:
        stream = sse(srv.url, "/api/chat/stream", {"message": "hi"}, timeout=30)
    errors = stream.of("error")
    assert errors and "done" not in stream.names()
    return errors[-1]


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (401, "provider_auth", False),
        (429, "rate_limited", True),
        (503, "overloaded", True),
        (400, "provider_error", False),
    ],
)
def test_a_refusing_endpoint_gives_the_matching_code(
    tmp_path: Path, fake: FakeServer, status: int, code: str, retryable: bool
) -> None:
    fake.enqueue(Reply.json(status, {"error": {"message": "refused", "type": "x"}}))
    frame = _failed_frame(tmp_path, fake.base_url)
    assert frame["code"] == code and frame["status_code"] == status and frame["type"] == "ProviderError"
    assert frame["retryable"] is retryable


def test_an_endpoint_that_is_down_is_a_network_error(tmp_path: Path) -> None:
    frame = _failed_frame(tmp_path, f"http://127.0.0.1:{free_port()}/v1")
    assert frame["code"] == "network" and frame["retryable"] is True and "status_code" not in frame


@tool
def broken() -> str:
    """Always fails."""
    raise ToolError("the disk is full", hint="free some space")


def test_tool_errors_and_run_limits_carry_their_codes(tmp_path: Path) -> None:
    looping = ScriptedProvider(lambda entries, _tools: call("broken", {}, call_id=f"c{len(entries)}"))
    agent = Agent(name="loop", model=looping, tools=[broken])
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "l.db"), max_turns=2)) as srv:
        stream = sse(srv.url, "/api/chat/stream", {"message": "go"}, timeout=30)
    tool_frames = [f for f in stream.of("error") if f.get("scope") == "tool"]
    assert tool_frames and all(f["code"] == "tool_error" for f in tool_frames)
    assert stream.of("error")[-1]["code"] == "max_turns"
