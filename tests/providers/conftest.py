"""Fixtures for provider tests: a fresh fake vendor server and a clean provider environment."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from lovia.transcript import ModelDelta

from .servers import FakeServer

_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_BASE_URL",
    "LOVIA_MODEL",
    "LOVIA_PROVIDER_TIMEOUT",
    "LOVIA_PROVIDER_TRUST_ENV",
    "LOVIA_HTTP_CA_BUNDLE",
    "LOVIA_HTTP_INSECURE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


_OPEN: list[Any] = []


def track(provider: Any) -> Any:
    """Remember a provider so the autouse fixture closes it after the test."""
    _OPEN.append(provider)
    return provider


@pytest.fixture(autouse=True)
async def close_providers() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str = "a tool"
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    strict: bool = False


async def collect(stream: AsyncIterator[ModelDelta]) -> list[ModelDelta]:
    return [d async for d in stream]


@dataclass
class Assembled:
    text: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Any = None
    finish: list[str | None] = field(default_factory=list)
    completed: list[Any] = field(default_factory=list)


def assemble(deltas: list[ModelDelta]) -> Assembled:
    """Fold deltas the way a loop would (ids and names must arrive once per call)."""
    from lovia.transcript import (
        EntryCompletedDelta,
        FinishDelta,
        ReasoningDelta,
        TextDelta,
        ToolCallDelta,
        UsageDelta,
    )

    out = Assembled()
    for d in deltas:
        if isinstance(d, TextDelta):
            out.text += d.text
        elif isinstance(d, ReasoningDelta):
            out.reasoning += d.text
        elif isinstance(d, ToolCallDelta):
            call = out.calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
            if d.call_id is not None:
                assert call["id"] is None, "call id announced twice"
                call["id"] = d.call_id
            if d.name is not None:
                assert call["name"] is None, "call name announced twice"
                call["name"] = d.name
            call["arguments"] += d.arguments
        elif isinstance(d, UsageDelta):
            out.usage = d.usage
        elif isinstance(d, FinishDelta):
            out.finish.append(d.reason)
        elif isinstance(d, EntryCompletedDelta):
            out.completed.append(d.entry)
    assert len(out.finish) == 1 and isinstance(deltas[-1], FinishDelta), "exactly one FinishDelta, last"
    return out
