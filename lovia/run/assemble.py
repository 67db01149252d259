"""Internal: assemble one assistant turn from provider deltas."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..messages import Usage
from ..transcript import (
    AssistantTextEntry,
    EntryCompletedDelta,
    ReasoningEntry,
    ToolCallDelta,
    ToolCallEntry,
    TranscriptEntry,
)

__all__ = ["TurnAssembler", "normalize_arguments"]


def normalize_arguments(text: str) -> str:
    """A JSON object passes through; anything else (invalid JSON, or valid JSON that is not an
    object) is kept as ``{"_raw": text}``.

    The call entry is persisted before it runs and replayed to the provider on later turns, so
    it must hold a JSON object (vendors reject anything else); the original text stays available
    for the error the model sees.
    """
    if not text.strip():
        return "{}"
    try:
        value = json.loads(text)
    except ValueError:
        return json.dumps({"_raw": text}, ensure_ascii=False)
    return text if isinstance(value, dict) else json.dumps({"_raw": text}, ensure_ascii=False)


@dataclass(slots=True)
class _CallParts:
    call_id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TurnAssembler:
    """Accumulates deltas; ``entries()`` gives reasoning, text, then tool calls."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _CallParts] = field(default_factory=dict)
    completed: list[TranscriptEntry] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def add_call(self, delta: ToolCallDelta) -> None:
        """Merge a tool-call fragment."""
        parts = self.calls.setdefault(delta.index, _CallParts())
        if delta.call_id:
            parts.call_id = delta.call_id
        if delta.name:
            parts.name = delta.name
        if delta.arguments:
            parts.arguments.append(delta.arguments)

    def add_completed(self, delta: EntryCompletedDelta) -> None:
        """Remember an authoritative entry (it replaces the rebuilt one of its kind)."""
        self.completed.append(delta.entry)

    def entries(self, *, turn: int) -> list[TranscriptEntry]:
        """The finished entries, in transcript order."""
        reasoning: list[TranscriptEntry] = [e for e in self.completed if isinstance(e, ReasoningEntry)]
        if not reasoning and self.reasoning:
            reasoning = [ReasoningEntry(content="".join(self.reasoning))]
        texts: list[TranscriptEntry] = [e for e in self.completed if isinstance(e, AssistantTextEntry)]
        if not texts and self.text:
            texts = [AssistantTextEntry(content="".join(self.text))]
        calls: list[TranscriptEntry] = [e for e in self.completed if isinstance(e, ToolCallEntry)]
        if not calls:
            for index in sorted(self.calls):
                parts = self.calls[index]
                calls.append(
                    ToolCallEntry(
                        call_id=parts.call_id or f"call_t{turn}_{index}",
                        name=parts.name or "",
                        arguments="".join(parts.arguments),
                    )
                )
        calls = [
            ToolCallEntry(call_id=c.call_id, name=c.name, arguments=normalize_arguments(c.arguments))
            for c in calls
            if isinstance(c, ToolCallEntry)
        ]
        return [*reasoning, *texts, *calls]
