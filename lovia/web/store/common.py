"""Pure helpers both chat index backends use: search patterns, UI data refs and payloads, stored contexts."""

from __future__ import annotations

import contextlib
import json
import uuid
import zlib
from typing import Any

from .records import ChatMeta

__all__ = ["client_context", "like_pattern", "meta_or_none", "new_ui_data_ref", "ui_payload"]


def new_ui_data_ref() -> str:
    """A fresh ref for a stored UI value (unguessable, URL-safe)."""
    return f"ud_{uuid.uuid4().hex}"


def like_pattern(query: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching ``query`` anywhere, lower-cased, its ``%`` and ``_`` literal."""
    escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def ui_payload(stored: bytes) -> bytes:
    """A UI data payload's JSON bytes: lovia 0.9.119 stored them zlib-compressed, we store them plain.

    JSON text never starts with ``x`` (0x78), the first byte of a zlib stream, so the two cannot be mixed up.
    """
    if stored[:1] == b"x":
        with contextlib.suppress(zlib.error):
            return zlib.decompress(stored)
    return stored


def meta_or_none(row: Any) -> ChatMeta | None:
    """The chat of an index row, or ``None`` for no row."""
    return None if row is None else ChatMeta.from_row(row)


def client_context(text: Any) -> dict[str, Any] | None:
    """A stored client context (JSON text), or ``None`` when absent or unreadable."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
