"""What the two OpenAI wire APIs share: error bodies, overflow detection, ``/models`` windows.

Internal; used by :mod:`~lovia.providers.openai_chat` and :mod:`~lovia.providers.openai_responses`
(and by OpenAI-compatible servers that speak either). Pure functions over parsed JSON; no I/O.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["as_int", "error_fields", "overflow_from", "window_from_models"]

_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d[\d,]*)", re.I),
    re.compile(r"context (?:length|window|size) (?:of|is) (\d[\d,]*)", re.I),
    re.compile(r"n_ctx[\"']?\s*[:=]\s*(\d+)", re.I),
)
_OVERFLOW_NEEDLES = (
    "context_length_exceeded",
    "maximum context length",
    "exceed_context_size",
    "exceeds the available context size",
    "context window",
    "prompt is too long",
    "too many tokens",
)


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def error_fields(body: Any) -> tuple[str | None, str | None]:
    """(message, code) from ``{"error": {"message", "code"|"type"}}`` or ``{"error": "text"}``."""
    if not isinstance(body, dict):
        return None, None
    error = body.get("error", body)
    if isinstance(error, str):
        return error, None
    if not isinstance(error, dict):
        return None, None
    message = error.get("message") or body.get("message") or body.get("detail")
    code = error.get("code") or error.get("type")
    return (str(message) if message else None), (str(code) if code is not None else None)


def overflow_from(text: str, code: str | None, body: Any, status: int) -> tuple[bool, int | None]:
    """(is this a context overflow, the window the server named if any)."""
    haystack = f"{code or ''} {text}".lower()
    if status not in (400, 413, 422, 500) or not any(needle in haystack for needle in _OVERFLOW_NEEDLES):
        return False, None
    for pattern in _WINDOW_PATTERNS:
        match = pattern.search(text)
        if match:
            return True, int(match.group(1).replace(",", ""))
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("n_ctx"), int):
        return True, int(error["n_ctx"])
    return True, None


def window_from_models(data: Any, model: str) -> int | None:
    items = data.get("data") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return None
    for item in items:
        if isinstance(item, dict) and item.get("id") == model:
            for key in ("max_model_len", "context_length", "context_window", "max_context_length"):
                if isinstance(item.get(key), int) and item[key] > 0:
                    return int(item[key])
            meta = item.get("meta")
            if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
                return int(meta["n_ctx_train"])
    return None
