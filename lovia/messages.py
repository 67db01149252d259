"""Chat messages, content parts and token usage.

``Message`` is the lossy chat projection of the transcript (see :mod:`lovia.transcript`, which is
the source of truth). The content part types live in :mod:`lovia.parts` and are re-exported here.
``AssistantTurn`` is one complete model reply (text, tool calls, usage, finish reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .parts import ContentPart, FilePart, ImagePart, TextPart, normalize_content, text_of

__all__ = [
    "AssistantTurn",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "Message",
    "Role",
    "TextPart",
    "ToolCall",
    "Usage",
    "assistant",
    "system",
    "tool_message",
    "user",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model emitted it; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Usage:
    """Token counts. Cache fields are a breakdown *of* ``input_tokens``, not additional tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Fold ``other`` into this usage in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        out = Usage(self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens)
        out.add(other)
        return out

    def copy(self) -> Usage:
        """An independent copy."""
        return Usage(self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens)

    def clone(self) -> Usage:
        """An independent copy (same as :meth:`copy`)."""
        return self.copy()

    def to_dict(self) -> dict[str, int]:
        """JSON-safe form."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> Usage:
        """Inverse of :meth:`to_dict`; missing or unknown keys are tolerated."""
        if not data:
            return cls()

        def num(key: str) -> int:
            value = data.get(key, 0)
            return int(value) if isinstance(value, (int, float)) else 0

        return cls(num("input_tokens"), num("output_tokens"), num("cache_read_tokens"), num("cache_write_tokens"))


@dataclass(slots=True)
class Message:
    """One chat message (a lossy projection of transcript entries)."""

    role: Role
    content: str | list[ContentPart] | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message's text (text parts joined; empty when there is none)."""
        return text_of(self.content)


@dataclass(slots=True)
class AssistantTurn:
    """One complete model reply: its text, the tool calls it asked for, what it cost, why it stopped."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def to_message(self) -> Message:
        """The reply as an assistant :class:`Message`."""
        return Message(role="assistant", content=self.content, tool_calls=list(self.tool_calls))


def system(text: str) -> Message:
    """A system message."""
    return Message(role="system", content=text)


def user(content: str | ContentPart | list[ContentPart]) -> Message:
    """A user message from text, one part, or a list of typed parts.

    Raises:
        TypeError: A list item is not a part (strings inside a list are not coerced).
    """
    return Message(role="user", content=normalize_content(content))


def assistant(text: str) -> Message:
    """An assistant message."""
    return Message(role="assistant", content=text)


def tool_message(call_id: str, content: str) -> Message:
    """A tool-result message answering the call ``call_id``."""
    return Message(role="tool", content=content, tool_call_id=call_id)
