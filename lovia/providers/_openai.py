"""What the two OpenAI wire APIs share: the endpoint and key, request headers, error bodies and
the errors they become, overflow detection, ``/models`` windows.

Internal; used by :mod:`~lovia.providers.openai_chat` and :mod:`~lovia.providers.openai_responses`
(and by OpenAI-compatible servers that speak either). Pure functions over settings, the
environment and parsed JSON; no network I/O.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlparse

from ..exceptions import ContextOverflowError, ProviderError, UserError
from ._http import RETRYABLE_STATUS, HTTPProviderBase, error_body_text
from ._wire import as_int

__all__ = [
    "DEFAULT_BASE_URL",
    "OFFICIAL_HOST",
    "as_int",
    "error_fields",
    "http_error",
    "openai_endpoint",
    "openai_request_headers",
    "overflow_from",
    "window_from_models",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
OFFICIAL_HOST = "api.openai.com"

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


def openai_endpoint(
    base_url: str | None, api_key: str | None, official_dialect: bool | None
) -> tuple[str, bool, str | None]:
    """(API URL, whether the official dialect is spoken, key) from the arguments, else the environment.

    The URL is ``base_url``, else ``OPENAI_BASE_URL``, else the official API; the dialect follows
    the host unless forced; the key is ``api_key``, else ``OPENAI_API_KEY`` (an empty one is none).
    """
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    official = urlparse(url).hostname == OFFICIAL_HOST if official_dialect is None else official_dialect
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    return url, official, key or None


def openai_request_headers(
    extra: dict[str, str], api_key: str | None, host: str | None, *, elsewhere: str
) -> dict[str, str]:
    """Headers for one request to an OpenAI API. The key is required here, when a request is made,
    not at construction, and only by the official host (``elsewhere`` names the alternative in the hint)."""
    headers = {"Accept": "text/event-stream", **extra}
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if key:
        headers.setdefault("Authorization", f"Bearer {key}")
    elif host == OFFICIAL_HOST and not any(h.lower() == "authorization" for h in headers):
        raise UserError(
            "the official OpenAI API needs an API key",
            hint=f"set OPENAI_API_KEY or pass api_key=; for {elsewhere} set OPENAI_BASE_URL",
        )
    return headers


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


def http_error(
    provider: HTTPProviderBase, status: int, body: Any, raw: str, *, not_found: str
) -> ProviderError | ContextOverflowError:
    """The error for a non-2xx answer of an OpenAI API (``not_found`` is the hint for a 404)."""
    message, code = error_fields(body)
    text = message or error_body_text(raw) or f"HTTP {status}"
    is_overflow, window = overflow_from(text, code, body, status)
    if is_overflow:
        return provider._overflow_error(text, window)
    hint = None
    if status == 401:
        hint = "check OPENAI_API_KEY / api_key="
    elif status == 404:
        hint = not_found
    retryable = status in RETRYABLE_STATUS or status >= 500
    return provider._error(f"HTTP {status}: {text}", status=status, retryable=retryable, hint=hint)


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
