"""Testing a connection for real, and turning one into a provider.

:func:`validate_connection` sends one ``GET <root>/models`` to the endpoint with the key the
connection carries: it tells whether the endpoint is reachable, whether the key is accepted,
whether the model is listed, and (when the endpoint says so) the model's context window. No
completion is requested, so a test costs no tokens.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import httpx

from ...providers._openai import window_from_models
from ...providers._windows import known_window
from ...providers.anthropic import AnthropicProvider
from ...providers.base import Provider
from ...providers.openai_chat import OpenAIChatProvider
from .schema import ANTHROPIC_FLAVOR, OPENAI_FLAVOR, Connection

__all__ = ["ValidationOutcome", "build_provider", "known_context_window", "unlisted_model_note", "validate_connection"]


class ValidationOutcome(enum.Enum):
    """The verdict of a connection test."""

    OK = "ok"
    AUTH_FAILED = "auth_failed"
    UNREACHABLE = "unreachable"
    UNVERIFIABLE = "unverifiable"


def _model_ids(data: Any) -> list[str] | None:
    items = data.get("data", data.get("models")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        return None
    ids: list[str] = []
    for item in items:
        ident = item.get("id") or item.get("name") if isinstance(item, dict) else None
        if isinstance(ident, str):
            ids.append(ident.removeprefix("models/"))
    return ids


def validate_connection(
    conn: Connection, *, timeout: float = 10.0, transport: httpx.BaseTransport | None = None
) -> tuple[ValidationOutcome, str]:
    """Ask the endpoint for its model list; fill ``conn.available_models`` and, when reported,
    ``conn.context_window`` (with ``window_from_endpoint``).

    Returns:
        ``(outcome, detail)``: ``OK`` (reachable, key accepted), ``AUTH_FAILED`` (401/403),
        ``UNREACHABLE`` (no connection, timeout, a server error) or ``UNVERIFIABLE`` (answered,
        but with no usable model list: the model may still work).
    """
    gaps = conn.missing()
    if gaps:
        return ValidationOutcome.UNVERIFIABLE, f"missing: {', '.join(gaps)}"
    flavor = conn.flavor or OPENAI_FLAVOR
    url = f"{conn.root}/models"
    try:
        with httpx.Client(timeout=timeout, transport=transport, trust_env=False) as client:
            response = client.get(url, headers=flavor.auth_headers(conn.api_key))
    except httpx.TimeoutException:
        return ValidationOutcome.UNREACHABLE, f"no answer from {url} within {timeout:g} s"
    except httpx.HTTPError as exc:
        return ValidationOutcome.UNREACHABLE, f"cannot connect to {url}: {exc or type(exc).__name__}"
    if response.status_code in (401, 403):
        return ValidationOutcome.AUTH_FAILED, f"{url} refused the API key (HTTP {response.status_code})"
    if response.status_code >= 500:
        return ValidationOutcome.UNREACHABLE, f"{url} answered HTTP {response.status_code}"
    if response.status_code != 200:
        return ValidationOutcome.UNVERIFIABLE, f"{url} answered HTTP {response.status_code}; no model list to check"
    try:
        data = response.json()
    except ValueError:
        return ValidationOutcome.UNVERIFIABLE, f"{url} did not answer with JSON; no model list to check"
    ids = _model_ids(data)
    if ids is None:
        return ValidationOutcome.UNVERIFIABLE, f"{url} answered without a model list"
    conn.available_models = ids
    model = conn.model_id or ""
    window = window_from_models(data, model)
    if window is not None:
        conn.context_window, conn.window_from_endpoint = window, True
    listed = "listed" if model in ids else "not listed"
    return ValidationOutcome.OK, f"reachable, key accepted, {len(ids)} model(s); {model!r} {listed}"


def unlisted_model_note(conn: Connection) -> str | None:
    """A note when the endpoint's list is known and lacks the model (it may still work)."""
    if conn.available_models is None or conn.model_id in conn.available_models:
        return None
    return f"{conn.model_id!r} is not in the endpoint's model list; it is used as entered"


def known_context_window(conn: Connection) -> int | None:
    """The window: the connection's own, else the bundled table for the vendor's host."""
    if conn.context_window is not None:
        return conn.context_window
    return known_window(urlparse(conn.root).hostname, conn.model_id or "") if conn.model_id else None


def build_provider(
    conn: Connection,
    *,
    timeout: float | None = None,
    trust_env: bool | None = None,
    extra_body: Mapping[str, Any] | None = None,
    supports_vision: bool | None = None,
) -> Provider | None:
    """The provider for ``conn`` (``None`` while :meth:`Connection.missing` reports gaps).

    A connection without a key sends none: the vendors' environment variables are never read
    here, so a key meant for one endpoint cannot leak to another.
    """
    if conn.missing() or conn.model_id is None:
        return None
    flavor = conn.flavor
    options: dict[str, Any] = {
        "api_key": conn.api_key or "",
        "base_url": conn.root,
        "timeout": timeout,
        "trust_env": trust_env,
        "extra_body": dict(extra_body or {}),
        "supports_vision": supports_vision,
    }
    if flavor is ANTHROPIC_FLAVOR:
        return AnthropicProvider(conn.model_id, **options)
    return OpenAIChatProvider(conn.model_id, **options)
