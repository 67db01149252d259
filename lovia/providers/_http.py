"""Shared HTTP plumbing for the vendor adapters: client setup, env knobs, error translation.

Internal. Owns the ``LOVIA_PROVIDER_TIMEOUT`` / ``LOVIA_PROVIDER_TRUST_ENV`` /
``LOVIA_HTTP_CA_BUNDLE`` / ``LOVIA_HTTP_INSECURE`` environment variables and the rule that no
``httpx`` exception leaves a provider raw: transport failures become
:class:`~lovia.exceptions.ProviderError`. Never imports the run loop.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import logging
import math
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from ..exceptions import ContextOverflowError, ProviderError, UserError
from ._sse import SSEEvent, iter_sse

__all__ = [
    "RETRYABLE_STATUS",
    "HTTPProviderBase",
    "WindowCache",
    "apply_options",
    "error_body_text",
    "parse_retry_after",
    "resolve_timeout",
    "resolve_trust_env",
    "resolve_verify",
    "stream_headers",
]

DEFAULT_TIMEOUT = 300.0
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_TRUTHY = {"1", "true", "yes", "on"}
_BODY_PREVIEW = 500
logger = logging.getLogger("lovia")

# Turns a non-2xx response (status, parsed JSON or None, raw text) into the error to raise.
ErrorMapper = Callable[[int, Any, str], "ProviderError | ContextOverflowError"]
# The cache of context windows an adapter learnt from its endpoints, keyed by (API root, model).
WindowCache = dict[tuple[str, str], "int | None"]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


def resolve_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """The request timeout: the argument, else ``LOVIA_PROVIDER_TIMEOUT``, else 300 s.

    A variable that is not a number, or not above zero, is ignored (with a warning): the default
    applies.
    """
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if timeout is None:
        timeout = _env_timeout()
    return httpx.Timeout(timeout, connect=min(timeout, 30.0))


def _env_timeout() -> float:
    raw = os.environ.get("LOVIA_PROVIDER_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        logger.warning("ignoring LOVIA_PROVIDER_TIMEOUT=%r (not a positive number); using %s s", raw, DEFAULT_TIMEOUT)
        return DEFAULT_TIMEOUT
    return value


def resolve_trust_env(trust_env: bool | None) -> bool:
    """Whether proxy variables are honoured: the argument, else ``LOVIA_PROVIDER_TRUST_ENV`` (off)."""
    return _env_flag("LOVIA_PROVIDER_TRUST_ENV") if trust_env is None else trust_env


def resolve_verify() -> ssl.SSLContext | bool:
    """TLS verification, in order: insecure flag, CA bundle, ``truststore``, ``certifi`` (httpx default)."""
    if _env_flag("LOVIA_HTTP_INSECURE"):
        return False
    bundle = os.environ.get("LOVIA_HTTP_CA_BUNDLE", "").strip()
    if bundle:
        if not os.path.exists(bundle):
            raise UserError(
                f"LOVIA_HTTP_CA_BUNDLE points at {bundle!r}, which does not exist", hint="fix the path or unset it"
            )
        return ssl.create_default_context(cafile=bundle)
    try:
        import truststore  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return True
    return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _verify_setting(verify: ssl.SSLContext | str | bool | None) -> ssl.SSLContext | bool:
    """An explicit ``verify=`` (a context, a CA bundle path or a flag), else :func:`resolve_verify`."""
    if verify is None:
        return resolve_verify()
    if isinstance(verify, str):
        if not os.path.exists(verify):
            raise UserError(f"verify={verify!r}: no such CA bundle", hint="pass the path of a PEM file, or True/False")
        return ssl.create_default_context(cafile=verify)
    return verify


def error_body_text(raw: str) -> str:
    """A readable preview of an error body (first 500 characters, whitespace collapsed)."""
    text = " ".join(raw.split())
    return text[:_BODY_PREVIEW] + ("..." if len(text) > _BODY_PREVIEW else "")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    ``None`` if the header is absent or unreadable.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def apply_options(payload: dict[str, Any], options: Mapping[str, Any]) -> None:
    """Merge ``provider_options`` verbatim; a ``None`` value deletes the field."""
    for key, value in options.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value


def api_root(base_url: str) -> str:
    """The API root for ``base_url``: no trailing slash, and ``/v1`` added to a bare host.

    Both vendors serve their API under ``/v1``. Tools disagree on whether a base URL includes it
    (the OpenAI SDK's ``OPENAI_BASE_URL`` does, the Anthropic SDK's ``ANTHROPIC_BASE_URL`` does
    not), so a URL with no path at all gets ``/v1``; any explicit path is kept as given.
    """
    url = base_url.strip().rstrip("/")
    if httpx.URL(url).path in ("", "/"):
        return f"{url}/v1"
    return url


class HTTPProviderBase:
    """One ``httpx.AsyncClient`` per provider instance, closed by :meth:`aclose` unless injected."""

    vendor: str = "http"
    _vision: bool = True

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        client: httpx.AsyncClient | None,
        timeout: float | httpx.Timeout | None,
        trust_env: bool | None,
        extra_body: Mapping[str, Any] | None = None,
        proxy: str | None = None,
        verify: ssl.SSLContext | str | bool | None = None,
        root: str | None = None,
    ) -> None:
        if not model or not model.strip():
            raise UserError("a model name is required", hint="pass the model id, e.g. 'gpt-4.1-mini'")
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise UserError("extra_body must be a dict of raw request fields", hint='e.g. extra_body={"seed": 7}')
        self._model = model
        self._base_url = root if root is not None else api_root(base_url)
        self._extra_body: dict[str, Any] = dict(extra_body or {})
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=resolve_timeout(timeout),
            trust_env=resolve_trust_env(trust_env),
            verify=_verify_setting(verify),
            proxy=proxy,
        )

    @property
    def model(self) -> str:
        """The model id sent to the endpoint."""
        return self._model

    @property
    def extra_body(self) -> dict[str, Any]:
        """Raw request fields sent with every call through this provider (a copy)."""
        return dict(self._extra_body)

    @property
    def base_url(self) -> str:
        """The API root (without a trailing slash)."""
        return self._base_url

    @property
    def supports_vision(self) -> bool:
        """Whether image parts are sent to the model."""
        return self._vision

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it (an injected client is left open)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> HTTPProviderBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _error(
        self, message: str, *, status: int | None = None, retryable: bool = False, hint: str | None = None
    ) -> ProviderError:
        return ProviderError(
            f"{self.vendor} ({self._model}): {message}",
            vendor=self.vendor,
            model=self._model,
            status_code=status,
            retryable=retryable,
            hint=hint,
        )

    def _overflow_error(self, text: str, window: int | None) -> ContextOverflowError:
        """The error for a prompt the endpoint found larger than the model's context window."""
        return ContextOverflowError(
            f"{self.vendor} ({self._model}): {text}",
            reported_window=window,
            vendor=self.vendor,
            model=self._model,
            hint="the context policy should compact the transcript; or pick a model with a larger window",
        )

    @contextmanager
    def _translate_transport_errors(self) -> Iterator[None]:
        """Turn ``httpx`` exceptions into :class:`ProviderError` (cancellation passes through)."""
        try:
            yield
        except httpx.TimeoutException as exc:
            raise self._error(
                f"request timed out ({type(exc).__name__})",
                retryable=True,
                hint="raise LOVIA_PROVIDER_TIMEOUT or pass timeout=",
            ) from exc
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
            raise self._error(f"bad request setup: {exc}", hint="check base_url") from exc
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise self._error(f"connection failed: {detail}", retryable=True) from exc
        except httpx.HTTPError as exc:
            raise self._error(f"HTTP error: {exc}") from exc

    @asynccontextmanager
    async def _sse_request(
        self, url: str, payload: dict[str, Any], headers: Mapping[str, str], map_error: ErrorMapper
    ) -> AsyncIterator[AsyncIterator[SSEEvent]]:
        """POST ``payload`` and yield the response's SSE events; non-2xx raises via ``map_error``."""
        with self._translate_transport_errors():
            async with self._client.stream("POST", url, json=payload, headers=dict(headers)) as response:
                if response.status_code >= 300:
                    raw = (await response.aread()).decode("utf-8", errors="replace")
                    error = map_error(response.status_code, _try_json(raw), raw)
                    if isinstance(error, ProviderError):
                        error.retry_after = parse_retry_after(response.headers.get("retry-after"))
                    raise error
                if response.headers.get("content-type", "").lower().startswith("application/json"):
                    # A server or proxy that ignored ``stream: true`` and sent one JSON document:
                    # hand it to the parser as a single event instead of "no events at all".
                    raw = (await response.aread()).decode("utf-8", errors="replace")
                    yield _single_event(SSEEvent(data=raw))
                    return
                yield iter_sse(response.aiter_bytes())

    async def _get_json(self, url: str, headers: Mapping[str, str]) -> Any:
        """GET a JSON document; ``None`` on any failure (used for best-effort discovery)."""
        try:
            with self._translate_transport_errors():
                response = await self._client.get(url, headers=dict(headers))
        except ProviderError:
            return None
        if response.status_code >= 300:
            return None
        return _try_json(response.text)

    async def _remembered_window(
        self, cache: WindowCache, url: str, headers: Mapping[str, str], read: Callable[[Any], int | None]
    ) -> int | None:
        """The window ``read`` finds in the JSON at ``url``, asked once per API root and model."""
        key = (self._base_url, self._model)
        if key not in cache:
            cache[key] = read(await self._get_json(url, headers))
        return cache[key]


def stream_headers(
    extra: Mapping[str, str], key_header: str, key: str | None, fixed: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Headers for a streaming request: ``fixed`` ones, then ``extra``, then the key unless ``extra`` set it."""
    headers = {"Accept": "text/event-stream", **(fixed or {}), **extra}
    if key:
        headers.setdefault(key_header, key)
    return headers


async def _single_event(event: SSEEvent) -> AsyncIterator[SSEEvent]:
    yield event


def _try_json(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return None
