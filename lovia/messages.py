"""Chat messages, content parts and token usage.

``Message`` is the lossy chat projection of the transcript (see :mod:`lovia.transcript`, which is
the source of truth). Parts describe multimodal user content; URLs are passed through, never fetched.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

__all__ = [
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
    "user",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text content."""

    text: str
    type: Literal["text"] = "text"


def _guess_mime(name: str, default: str) -> str:
    return mimetypes.guess_type(name)[0] or default


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image given by URL or by base64 ``data`` plus ``mime_type``."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    detail: Literal["low", "high", "auto"] = "auto"
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        if (self.url is None) == (self.data is None):
            raise ValueError("ImagePart needs exactly one of url= or data=")

    @classmethod
    def from_path(cls, path: str | Path, *, detail: Literal["low", "high", "auto"] = "auto") -> ImagePart:
        """Read an image file and embed it as base64."""
        p = Path(path)
        return cls(
            data=base64.b64encode(p.read_bytes()).decode("ascii"),
            mime_type=_guess_mime(p.name, "image/png"),
            detail=detail,
        )

    def data_url(self) -> str:
        """The image as a URL (its own, or a ``data:`` URL)."""
        if self.url is not None:
            return self.url
        return f"data:{self.mime_type or 'image/png'};base64,{self.data}"


@dataclass(frozen=True, slots=True)
class FilePart:
    """A document (PDF, text...) given by URL or base64 ``data``."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    filename: str | None = None
    type: Literal["file"] = "file"

    def __post_init__(self) -> None:
        if (self.url is None) == (self.data is None):
            raise ValueError("FilePart needs exactly one of url= or data=")

    @classmethod
    def from_path(cls, path: str | Path) -> FilePart:
        """Read a file and embed it as base64."""
        p = Path(path)
        return cls.from_bytes(
            p.read_bytes(), mime_type=_guess_mime(p.name, "application/octet-stream"), filename=p.name
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, mime_type: str, filename: str | None = None) -> FilePart:
        """Embed raw bytes."""
        return cls(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type, filename=filename)

    @classmethod
    def from_base64(cls, data: str, *, mime_type: str, filename: str | None = None) -> FilePart:
        """Wrap data that is already base64-encoded."""
        return cls(data=data, mime_type=mime_type, filename=filename)

    @classmethod
    def from_url(cls, url: str, *, mime_type: str | None = None, filename: str | None = None) -> FilePart:
        """Reference a file by URL (passed through to the provider, never fetched)."""
        return cls(url=url, mime_type=mime_type, filename=filename)


ContentPart = Union[TextPart, ImagePart, FilePart]


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
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


def system(text: str) -> Message:
    """A system message."""
    return Message(role="system", content=text)


def user(content: str | ContentPart | list[ContentPart]) -> Message:
    """A user message from text, one part, or a list of typed parts."""
    if isinstance(content, (TextPart, ImagePart, FilePart)):
        return Message(role="user", content=[content])
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, (TextPart, ImagePart, FilePart)):
                raise TypeError(f"user() list items must be TextPart/ImagePart/FilePart, got {type(part).__name__}")
        return Message(role="user", content=list(content))
    return Message(role="user", content=content)


def assistant(text: str) -> Message:
    """An assistant message."""
    return Message(role="assistant", content=text)
