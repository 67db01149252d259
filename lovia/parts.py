"""Typed content parts: what a user message (or a tool result) may carry besides plain text.

A message's ``content`` is either a string or a list of parts. Text parts are sent as text, image
and file parts either by URL (handed to the provider as a reference, never downloaded here) or as
base64 ``data`` with its ``mime_type``. The helpers below turn loose input into that shape and back
into plain text for places that only understand text (logs, token estimates, text-only models).
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Union

__all__ = [
    "IMAGE_MIME_BY_SUFFIX",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "TextPart",
    "coerce_parts",
    "image_mime",
    "normalize_content",
    "project_parts",
    "text_of",
]

IMAGE_MIME_BY_SUFFIX: dict[str, str] = {
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
}
"""The image types vision models accept, by lower-case file suffix (no dot)."""

ImageDetail = Literal["auto", "low", "high"]


def _exactly_one_source(kind: str, url: str | None, data: str | None, mime_type: str | None) -> None:
    if (url is None) == (data is None):
        raise ValueError(f"{kind} needs exactly one of url= or data=")
    if data is not None and not mime_type:
        raise ValueError(f"{kind} with base64 data= needs mime_type= as well")


@dataclass(frozen=True, slots=True)
class TextPart:
    """A piece of plain text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, by ``url`` or by base64 ``data`` plus ``mime_type``.

    ``detail`` is the optional resolution hint some vendors take (``"low"``, ``"high"``, ``"auto"``).
    """

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    detail: ImageDetail | None = None
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        _exactly_one_source("ImagePart", self.url, self.data, self.mime_type)

    @classmethod
    def from_path(
        cls, path: str | Path, *, mime_type: str | None = None, detail: ImageDetail | None = None
    ) -> ImagePart:
        """Read an image file and embed it; the mime type comes from the suffix unless given.

        Raises:
            ValueError: The suffix is not a known image type and no ``mime_type`` was given.
        """
        p = Path(path)
        mime = mime_type or image_mime(p)
        if mime is None:
            known = ", ".join(sorted(IMAGE_MIME_BY_SUFFIX))
            raise ValueError(f"cannot tell the image type of {p.name!r}: pass mime_type= (known suffixes: {known})")
        return cls(data=base64.b64encode(p.read_bytes()).decode("ascii"), mime_type=mime, detail=detail)

    def data_url(self) -> str:
        """The image as a URL: its own, or a ``data:`` URL built from the embedded bytes."""
        if self.url is not None:
            return self.url
        return f"data:{self.mime_type};base64,{self.data}"


@dataclass(frozen=True, slots=True)
class FilePart:
    """A document (PDF, text, ...), by ``url`` or by base64 ``data`` plus ``mime_type``."""

    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    filename: str | None = None
    type: Literal["file"] = "file"

    def __post_init__(self) -> None:
        _exactly_one_source("FilePart", self.url, self.data, self.mime_type)

    @classmethod
    def from_path(cls, path: str | Path, *, mime_type: str | None = None, filename: str | None = None) -> FilePart:
        """Read a file and embed it; the mime type is guessed from the name unless given."""
        p = Path(path)
        mime = mime_type or mimetypes.guess_type(p.name)[0] or "application/octet-stream"
        return cls.from_bytes(p.read_bytes(), mime_type=mime, filename=filename or p.name)

    @classmethod
    def from_bytes(cls, data: bytes, *, mime_type: str, filename: str | None = None) -> FilePart:
        """Embed raw bytes."""
        return cls(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type, filename=filename)

    @classmethod
    def from_base64(cls, data: str, *, mime_type: str, filename: str | None = None) -> FilePart:
        """Wrap data that is already base64 text."""
        return cls(data=data, mime_type=mime_type, filename=filename)

    @classmethod
    def from_url(cls, url: str, *, mime_type: str | None = None, filename: str | None = None) -> FilePart:
        """Refer to a file by URL; the provider fetches it, lovia never does."""
        return cls(url=url, mime_type=mime_type, filename=filename)


ContentPart = Union[TextPart, ImagePart, FilePart]
"""Any one content part."""

_PART_TYPES = (TextPart, ImagePart, FilePart)


def image_mime(path: str | Path) -> str | None:
    """The image mime type for a file name's suffix, or ``None`` when it is not a known image type."""
    return IMAGE_MIME_BY_SUFFIX.get(Path(path).suffix.lower().lstrip("."))


def normalize_content(content: str | ContentPart | list[ContentPart] | None) -> str | list[ContentPart] | None:
    """The canonical form of message content: a string, a list of parts, or ``None``.

    A single part becomes a one-item list. Items of a list must be parts (a bare string inside a
    list is refused, so a typo cannot silently change what the model sees).

    Raises:
        TypeError: Something other than a string, a part, a list of parts or ``None``.
    """
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, _PART_TYPES):
        return [content]
    if isinstance(content, list):
        for item in content:
            if not isinstance(item, _PART_TYPES):
                raise TypeError(f"content lists hold TextPart/ImagePart/FilePart items, got {type(item).__name__}")
        return list(content)
    raise TypeError(f"message content must be str, a part or a list of parts, got {type(content).__name__}")


def text_of(content: str | list[ContentPart] | None) -> str:
    """Only the text: the string itself, or the text parts joined (images and files are skipped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


def coerce_parts(value: object) -> list[ContentPart] | None:
    """Parts from a tool's return value, or ``None`` when the value is not made of parts.

    Accepts one part, or a non-empty list/tuple made only of parts. Anything else (plain data,
    mixed lists) is left to the ordinary text rendering.
    """
    if isinstance(value, _PART_TYPES):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _PART_TYPES) for v in value):
        return list(value)
    return None


def project_parts(parts: Sequence[ContentPart]) -> str:
    """A text stand-in for parts, for text-only consumers: text as is, placeholders for the rest."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ImagePart):
            out.append(f"[image: {part.mime_type or part.url or 'image'}]")
        else:
            out.append(f"[file: {part.filename or part.mime_type or part.url or 'file'}]")
    return "\n".join(out)
