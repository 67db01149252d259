"""Anthropic Messages API (``POST /messages``, streaming).

One wire API per file: transcript entries → ``system`` + alternating ``messages``, settings →
request fields, the typed SSE events (``message_start``, ``content_block_*``, ``message_delta``,
``message_stop``, ``ping``, ``error``) → :data:`~lovia.transcript.ModelDelta` values, error bodies →
:class:`~lovia.exceptions.ProviderError` / :class:`~lovia.exceptions.ContextOverflowError`.

Thinking blocks round-trip: each finished block is emitted as an
:class:`~lovia.transcript.EntryCompletedDelta` whose :class:`~lovia.transcript.ReasoningEntry`
carries ``metadata={"signature": ...}`` (or ``{"redacted_data": ...}`` for redacted thinking), and
only such signed entries are replayed. Structured output uses the loop's prompt contract
(``supports_json_schema`` is False).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlparse

import httpx

from .._entry_memo import PrefixMemo
from .._text import loads
from ..exceptions import ContextOverflowError, ProviderError
from ..messages import ContentPart, FilePart, ImagePart, TextPart, Usage
from ..transcript import (
    AssistantTextEntry,
    EntryCompletedDelta,
    FinishDelta,
    InputEntry,
    ModelDelta,
    ReasoningDelta,
    ReasoningEntry,
    TextDelta,
    ToolCallDelta,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    UsageDelta,
    leading_system_count,
)
from ._http import RETRYABLE_STATUS, HTTPProviderBase, WindowCache, apply_options, error_body_text, stream_headers
from ._windows import known_window
from ._wire import IMAGE_OMITTED, arguments_object, positive_field
from .base import ModelSettings, ToolDefinition, request_extras

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
OFFICIAL_HOST = "api.anthropic.com"
PROVIDER_TAG = "anthropic"
_VENDOR_KEYS = ("anthropic", "claude")
_WINDOW_CACHE: WindowCache = {}
_TOO_LONG = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)", re.I)
# "input length and `max_tokens` exceed context limit: 195000 + 16384 > 200000, decrease ..."
_OVER_LIMIT = re.compile(r"exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)", re.I)
_RETRYABLE_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


class AnthropicProvider(HTTPProviderBase):
    """Streaming client for the Anthropic Messages API (and servers that speak it).

    Args:
        model: The model id, e.g. ``"claude-sonnet-4-5"``.
        api_key: Sent as ``x-api-key``; defaults to ``ANTHROPIC_API_KEY``.
        base_url: API root; defaults to ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com/v1``.
        client: An ``httpx.AsyncClient`` to use (then the caller closes it, not :meth:`aclose`).
        timeout: Seconds (or an ``httpx.Timeout``); defaults to ``LOVIA_PROVIDER_TIMEOUT`` (300).
        anthropic_version: The ``anthropic-version`` header.
        default_max_tokens: ``max_tokens`` when the settings leave it unset (the API requires it).
        default_headers: Extra headers sent with every request (e.g. ``anthropic-beta``).
        trust_env: Honour proxy env variables; defaults to ``LOVIA_PROVIDER_TRUST_ENV`` (off).
        official_dialect: Force official-host behaviour (stale thinking stripped when thinking is
            off); default: decided by the host name.
        supports_vision: Whether the model accepts images; default: True on the official host
            (``api.anthropic.com``), False on compatible gateways, whose models often do not.
        extra_body: Raw request fields sent with every call (after the typed settings, before
            ``provider_options``).
        proxy: An explicit proxy URL for this provider's client.
        verify: TLS verification for this provider's client (context, CA bundle path or flag).
    """

    vendor = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        anthropic_version: str = "2023-06-01",
        default_max_tokens: int = 16_384,
        default_headers: Mapping[str, str] | None = None,
        trust_env: bool | None = None,
        official_dialect: bool | None = None,
        supports_vision: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        proxy: str | None = None,
        verify: Any = None,
    ) -> None:
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        super().__init__(
            model=model,
            base_url=url,
            client=client,
            timeout=timeout,
            trust_env=trust_env,
            extra_body=extra_body,
            proxy=proxy,
            verify=verify,
        )
        self._host = urlparse(url).hostname
        self._official = urlparse(url).hostname == OFFICIAL_HOST if official_dialect is None else official_dialect
        self._api_key = (api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")) or None
        self._version = anthropic_version
        self._default_max_tokens = default_max_tokens
        self._headers = dict(default_headers or {})
        self._vision = self._host == OFFICIAL_HOST if supports_vision is None else supports_vision

    @property
    def name(self) -> str:
        """Provider name used in events and errors."""
        return "anthropic"

    @property
    def supports_json_schema(self) -> bool:
        """Always False: structured output goes through the loop's prompt contract."""
        return False

    def _request_headers(self) -> dict[str, str]:
        return stream_headers(self._headers, "x-api-key", self._api_key, {"anthropic-version": self._version})

    def build_payload(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The JSON body :meth:`stream` would POST (``response_format`` is not sent natively)."""
        settings = settings or ModelSettings()
        options = request_extras(self._extra_body, settings, *_VENDOR_KEYS)
        cache_ttl = options.pop("cache_ttl", None)
        cache_system = bool(options.pop("cache_system", False)) or cache_ttl is not None
        thinking = options.get("thinking")
        keep_thinking = not self._official or (
            isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")
        )
        system, messages = entries_to_anthropic(entries, keep_thinking=keep_thinking, include_images=self._vision)
        payload: dict[str, Any] = {
            "model": self._model,
            "max_tokens": settings.max_tokens if settings.max_tokens is not None else self._default_max_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            payload["system"] = system
        if tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
            if settings.parallel_tool_calls is False:
                payload["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if settings.temperature is not None:
            payload["temperature"] = settings.temperature
        if settings.top_p is not None:
            payload["top_p"] = settings.top_p
        if settings.stop:
            payload["stop_sequences"] = list(settings.stop)
        if cache_system:
            _add_cache_breakpoints(payload, ttl=str(cache_ttl) if cache_ttl else None)
        apply_options(payload, options)
        return payload

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one message as deltas.

        Raises:
            ProviderError: Non-2xx status, an ``error`` event, transport failure, or a stream cut
                before ``message_stop``.
            ContextOverflowError: The prompt was too long for the model.
        """
        payload = self.build_payload(entries, tools=tools, response_format=response_format, settings=settings)
        parser = _EventParser(self)
        async with self._sse_request(
            f"{self._base_url}/messages", payload, self._request_headers(), self._map_error
        ) as events:
            async for event in events:
                for delta in parser.feed(event.event, event.data):
                    yield delta
                if parser.done:
                    break
        if not parser.done:
            raise self._error("stream ended before message_stop (connection cut mid-response)", retryable=True)

    def _overflow(self, kind: str | None, text: str, status: int | None) -> ContextOverflowError | None:
        match = _TOO_LONG.search(text)
        limit = _OVER_LIMIT.search(text)
        if not (match or limit or kind == "request_too_large" or status == 413 or "prompt is too long" in text.lower()):
            return None
        return self._overflow_error(text, int(match.group(2)) if match else int(limit.group(3)) if limit else None)

    def _map_error(self, status: int, body: Any, raw: str) -> ProviderError | ContextOverflowError:
        kind, message = _error_fields(body)
        text = message or error_body_text(raw) or f"HTTP {status}"
        overflow = self._overflow(kind, text, status)
        if overflow is not None:
            return overflow
        hint = "check ANTHROPIC_API_KEY / api_key=" if status == 401 else None
        if status == 404:
            hint = (
                f"check the model name and base_url ({self._base_url}); lovia posts to {{base_url}}/messages "
                "(a bare host gets /v1 added; any other path is used as given)"
            )
        retryable = status in RETRYABLE_STATUS or status >= 500 or kind in _RETRYABLE_TYPES
        label = f"HTTP {status}" + (f" {kind}" if kind else "")
        return self._error(f"{label}: {text}", status=status, retryable=retryable, hint=hint)

    def _stream_error(self, body: Any) -> ProviderError | ContextOverflowError:
        """An ``error`` event inside a 200 stream (e.g. ``overloaded_error`` mid-response)."""
        kind, message = _error_fields(body)
        text = message or error_body_text(json.dumps(body))
        overflow = self._overflow(kind, text, None)
        if overflow is not None:
            return overflow
        return self._error(f"stream error {kind or 'unknown'}: {text}", retryable=kind in _RETRYABLE_TYPES)

    def context_window(self) -> int | None:
        """What ``/models/{id}`` already reported for this endpoint (no I/O).

        The bundled table is consulted by :meth:`discover_context_window` only after the endpoint
        could not answer: the Models API states the window as served to your organisation.
        """
        return _WINDOW_CACHE.get((self._base_url, self._model))

    async def discover_context_window(self) -> int | None:
        """Ask ``/models/{id}`` for ``max_input_tokens`` (memoized per base URL and model)."""
        info = f"{self._base_url}/models/{quote(self._model, safe='')}"
        read = functools.partial(positive_field, "max_input_tokens")
        found = await self._remembered_window(_WINDOW_CACHE, info, self._request_headers(), read)
        return found or known_window(self._host, self._model)


# --------------------------------------------------------------------------- request mapping


def _source_block(kind: str, part: ImagePart | FilePart) -> dict[str, Any]:
    if part.url is not None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    mime = part.mime_type or ("image/png" if kind == "image" else "application/pdf")
    if kind == "document" and mime.startswith("text/"):
        text = base64.b64decode(part.data or "").decode("utf-8", errors="replace")
        return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": part.data}}


def _parts_to_blocks(content: str | Sequence[ContentPart], include_images: bool = True) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            image = _source_block("image", part) if include_images else {"type": "text", "text": IMAGE_OMITTED}
            blocks.append(image)
        else:
            block = _source_block("document", part)
            if part.filename:
                block["title"] = part.filename
            blocks.append(block)
    return blocks


def _reasoning_block(entry: ReasoningEntry) -> dict[str, Any] | None:
    meta = entry.metadata or {}
    if entry.provider not in (None, PROVIDER_TAG):
        return None
    if meta.get("redacted_data"):
        return {"type": "redacted_thinking", "data": meta["redacted_data"]}
    if meta.get("signature"):
        return {"type": "thinking", "thinking": entry.content, "signature": meta["signature"]}
    return None  # unsigned thinking (another vendor, or a hand-made entry) cannot be replayed


def _entry_blocks(
    entry: TranscriptEntry, keep_thinking: bool, include_images: bool = True
) -> tuple[str, list[dict[str, Any]]]:
    """(role, blocks) for one non-system entry."""
    if isinstance(entry, InputEntry):
        return "user", _parts_to_blocks(entry.content, include_images)
    if isinstance(entry, ToolResultEntry):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": entry.call_id}
        if include_images and entry.parts and any(isinstance(p, ImagePart) for p in entry.parts):
            block["content"] = _parts_to_blocks(entry.parts) or [{"type": "text", "text": entry.output}]
        else:
            block["content"] = entry.output
        if entry.is_error:
            block["is_error"] = True
        return "user", [block]
    if isinstance(entry, ReasoningEntry):
        thinking = _reasoning_block(entry) if keep_thinking else None
        return "assistant", [thinking] if thinking else []
    if isinstance(entry, AssistantTextEntry):
        return "assistant", [{"type": "text", "text": entry.content}] if entry.content else []
    if isinstance(entry, ToolCallEntry):
        block = {
            "type": "tool_use",
            "id": entry.call_id,
            "name": entry.name,
            "input": arguments_object(entry.arguments),
        }
        return "assistant", [block]
    raise TypeError(f"not a transcript entry: {type(entry).__name__}")


def entries_to_anthropic(
    entries: Sequence[TranscriptEntry], *, keep_thinking: bool = True, include_images: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Map entries to (``system`` blocks, ``messages``); the messages are memoized by transcript
    prefix (a turn converts only its new entries; the dicts are shared, treat them as read-only)."""
    n = leading_system_count(entries)
    system = [block for e in entries[:n] for block in _parts_to_blocks(e.text)]  # type: ignore[union-attr]
    return system, _ANTHROPIC_MEMOS[keep_thinking, include_images](list(entries[n:]))


def _anthropic_cut(previous: TranscriptEntry, entry: TranscriptEntry) -> bool:
    # A role change between two entries that always emit blocks: nothing merges across it.
    if isinstance(previous, ToolResultEntry):
        return isinstance(entry, ToolCallEntry) or (isinstance(entry, AssistantTextEntry) and bool(entry.content))
    return (
        isinstance(previous, AssistantTextEntry)
        and bool(previous.content)
        and isinstance(entry, InputEntry)
        and entry.role == "user"
        and isinstance(entry.content, str)
        and bool(entry.content)
    )


def _anthropic_messages(
    body: Sequence[TranscriptEntry], keep_thinking: bool, include_images: bool
) -> list[dict[str, Any]]:
    # ``body`` never starts with a system entry (entries_to_anthropic strips the leading ones).
    return _entries_to_anthropic(body, keep_thinking=keep_thinking, include_images=include_images)[1]


_ANTHROPIC_MEMOS = {
    (thinking, images): PrefixMemo(
        functools.partial(_anthropic_messages, keep_thinking=thinking, include_images=images), _anthropic_cut
    )
    for thinking in (False, True)
    for images in (False, True)
}


def _entries_to_anthropic(
    entries: Sequence[TranscriptEntry], *, keep_thinking: bool = True, include_images: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Map entries to (``system`` blocks, ``messages``).

    Leading system entries become the ``system`` field; a system entry later in the transcript is
    sent as user text. Consecutive same-role entries merge into one message, so tool results and
    a following user input share one user turn (results first, as the API requires).
    """
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    head = True
    for entry in entries:
        if head and isinstance(entry, InputEntry) and entry.role == "system":
            system.extend(_parts_to_blocks(entry.text))
            continue
        head = False
        role, blocks = _entry_blocks(entry, keep_thinking, include_images)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    return system, messages


def _add_cache_breakpoints(payload: dict[str, Any], *, ttl: str | None = None) -> None:
    """Mark the last tool, the last system block and the conversation's last stable block.

    The history breakpoint goes on the last tool result or assistant block, never on trailing
    user text: what follows it (a new question, per-call reminders) changes from call to call,
    while everything up to it is byte-identical in the next request.
    """
    marker: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    system = payload.get("system")
    if isinstance(system, list) and system:
        system[-1]["cache_control"] = dict(marker)
    tools = payload.get("tools")
    if isinstance(tools, list) and tools:
        tools[-1] = {**tools[-1], "cache_control": dict(marker)}
    for message in reversed(payload.get("messages") or []):
        blocks = message.get("content")
        if not isinstance(blocks, list):
            continue
        stable = [
            b
            for b in blocks
            if message["role"] == "assistant"
            and b.get("type") in ("text", "tool_use")
            or b.get("type") == "tool_result"
        ]
        if stable:
            stable[-1]["cache_control"] = dict(marker)
            return


# --------------------------------------------------------------------------- response parsing


class _Block:
    __slots__ = ("kind", "tool_index", "text", "signature", "data", "got_arguments")

    def __init__(self, kind: str, tool_index: int = -1) -> None:
        self.kind = kind
        self.tool_index = tool_index
        self.text: list[str] = []
        self.signature = ""
        self.data = ""
        self.got_arguments = False


class _EventParser:
    """Turns Messages API stream events into deltas."""

    def __init__(self, provider: AnthropicProvider) -> None:
        self._provider = provider
        self.done = False
        self._blocks: dict[int, _Block] = {}
        self._tools = 0
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None

    def feed(self, event: str, data: str) -> list[ModelDelta]:
        try:
            body = loads(data)  # the text policy (lovia._text)
        except ValueError:
            raise self._provider._error(f"unreadable stream event: {error_body_text(data)}", retryable=True) from None
        if not isinstance(body, dict):
            return []
        kind = body.get("type") or event
        if kind == "error":
            raise self._provider._stream_error(body)
        if kind == "message_start":
            self._merge_usage((body.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            return self._block_start(body)
        elif kind == "content_block_delta":
            return self._block_delta(body)
        elif kind == "content_block_stop":
            return self._block_stop(body)
        elif kind == "message_delta":
            self._stop_reason = (body.get("delta") or {}).get("stop_reason") or self._stop_reason
            self._merge_usage(body.get("usage"))
        elif kind == "message_stop":
            return self._finish()
        elif kind == "message":
            return self._whole_message(body)
        return []  # ping and unknown events

    def _finish(self) -> list[ModelDelta]:
        self.done = True
        return [UsageDelta(self._usage_value()), FinishDelta(self._stop_reason)]

    def _whole_message(self, body: dict[str, Any]) -> list[ModelDelta]:
        """A complete Messages response (from a proxy that ignored ``stream: true``), block by block."""
        self._merge_usage(body.get("usage"))
        out: list[ModelDelta] = []
        for index, block in enumerate(body.get("content") or []):
            if isinstance(block, dict):
                out += self._block_start({"index": index, "content_block": block})
                out += self._block_stop({"index": index})
        self._stop_reason = body.get("stop_reason") or self._stop_reason
        return out + self._finish()

    def _merge_usage(self, raw: Any) -> None:
        if isinstance(raw, dict):
            for key, value in raw.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self._usage[key] = value

    def _usage_value(self) -> Usage:
        read = self._usage.get("cache_read_input_tokens", 0)
        write = self._usage.get("cache_creation_input_tokens", 0)
        return Usage(
            input_tokens=self._usage.get("input_tokens", 0) + read + write,
            output_tokens=self._usage.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )

    def _block_start(self, body: dict[str, Any]) -> list[ModelDelta]:
        index = body.get("index", len(self._blocks))
        block = body.get("content_block") or {}
        kind = str(block.get("type", ""))
        if kind in ("tool_use", "server_tool_use"):
            state = _Block(kind, self._tools)
            self._tools += 1
            self._blocks[index] = state
            out: list[ModelDelta] = [
                ToolCallDelta(index=state.tool_index, call_id=block.get("id"), name=block.get("name"))
            ]
            if block.get("input"):
                state.got_arguments = True
                out.append(ToolCallDelta(index=state.tool_index, arguments=json.dumps(block["input"])))
            return out
        state = _Block(kind)
        self._blocks[index] = state
        if kind == "redacted_thinking":
            state.data = str(block.get("data", ""))
        elif kind == "thinking":
            state.signature = str(block.get("signature") or "")
            return self._thinking_text(state, block.get("thinking"))
        elif kind == "text" and block.get("text"):
            return [TextDelta(str(block["text"]))]
        return []

    @staticmethod
    def _thinking_text(state: _Block, text: Any) -> list[ModelDelta]:
        if isinstance(text, str) and text:
            state.text.append(text)
            return [ReasoningDelta(text)]
        return []

    def _block_delta(self, body: dict[str, Any]) -> list[ModelDelta]:
        state = self._blocks.get(body.get("index", -1))
        delta = body.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [TextDelta(str(delta["text"]))]
        if state is None:
            return []
        if kind == "input_json_delta" and state.tool_index >= 0:
            fragment = str(delta.get("partial_json") or "")
            if not fragment:
                return []
            state.got_arguments = True
            return [ToolCallDelta(index=state.tool_index, arguments=fragment)]
        if kind == "thinking_delta":
            return self._thinking_text(state, delta.get("thinking"))
        if kind == "signature_delta":
            state.signature += str(delta.get("signature") or "")
        return []

    def _block_stop(self, body: dict[str, Any]) -> list[ModelDelta]:
        state = self._blocks.get(body.get("index", -1))
        if state is None:
            return []
        if state.tool_index >= 0 and not state.got_arguments:
            return [ToolCallDelta(index=state.tool_index, arguments="{}")]
        if state.kind == "thinking":
            meta = {"signature": state.signature} if state.signature else {}
            entry = ReasoningEntry(content="".join(state.text), provider=PROVIDER_TAG, metadata=meta)
            return [EntryCompletedDelta(entry)]
        if state.kind == "redacted_thinking":
            entry = ReasoningEntry(content="", provider=PROVIDER_TAG, metadata={"redacted_data": state.data})
            return [EntryCompletedDelta(entry)]
        return []


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """(error type, message) from ``{"type": "error", "error": {"type", "message"}}``."""
    if not isinstance(body, dict):
        return None, None
    error = body.get("error")
    if isinstance(error, dict):
        kind = error.get("type")
        message = error.get("message")
        return (str(kind) if kind else None), (str(message) if message else None)
    if isinstance(error, str):
        return None, error
    message = body.get("message")
    return None, (str(message) if message else None)
