"""Shared builders for the context tests: transcripts and a tiny recording provider."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from lovia.context import CompactionRequest
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    TextDelta,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)

SYSTEM = InputEntry(role="system", content="You are a careful research agent.")

GOOD_SUMMARY = "\n".join(
    f"## {h}\n- {h.lower()} bullet"
    for h in ("Intent", "Current state", "Key facts", "Artifacts", "Constraints", "Next steps")
)


def tool_turn(i: int, size: int, *, is_error: bool = False) -> list[TranscriptEntry]:
    """One assistant turn: a call and its result of ``size`` characters (distinct per ``i``)."""
    body = (f"[{i}] " + "lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    return [
        ToolCallEntry(call_id=f"call_{i}", name="search", arguments=json.dumps({"q": f"query {i}"})),
        ToolResultEntry(call_id=f"call_{i}", output=body, is_error=is_error),
    ]


def text_turn(i: int, size: int) -> list[TranscriptEntry]:
    """A user question and a long assistant answer (no tools)."""
    return [
        InputEntry(role="user", content=f"question {i}"),
        AssistantTextEntry(content=(f"answer {i}: " + "words " * size)[:size]),
    ]


def as_json(entries: Sequence[TranscriptEntry]) -> list[str]:
    """Byte-level projection of a view: one canonical JSON string per entry."""
    return [json.dumps(entry_to_dict(e), sort_keys=True) for e in entries]


def request(entries: list[TranscriptEntry], scratch: dict[str, Any], **kw: Any) -> CompactionRequest:
    """A request with the given transcript and carried state."""
    kw.setdefault("provider", None)
    kw.setdefault("model", None)
    return CompactionRequest(entries=entries, scratch=scratch, **kw)


class RecordingProvider:
    """A provider that streams canned texts (one per call) and records what it was sent."""

    name = "recording"
    model = "test-model"
    supports_json_schema = False

    def __init__(self, replies: Sequence[str] | None = None, *, default: str = GOOD_SUMMARY) -> None:
        self.replies = list(replies or [])
        self.default = default
        self.calls: list[dict[str, Any]] = []

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Any = None,
        response_format: Any = None,
        settings: Any = None,
    ) -> AsyncIterator[Any]:
        self.calls.append({"entries": list(entries), "tools": tools, "settings": settings})
        text = self.replies.pop(0) if self.replies else self.default
        for start in range(0, len(text), 40):
            yield TextDelta(text[start : start + 40])


class WindowProvider(RecordingProvider):
    """A provider that states its context window."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window

    def context_window(self) -> int:
        return self.window
