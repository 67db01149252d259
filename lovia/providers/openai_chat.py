"""OpenAI chat completions (``POST /chat/completions``, streaming) for OpenAI and compatible servers.

One wire API per file: this module maps transcript entries to chat messages, settings to request
fields, the SSE chunk stream to :data:`~lovia.transcript.ModelDelta` values and error bodies to
:class:`~lovia.exceptions.ProviderError` / :class:`~lovia.exceptions.ContextOverflowError`.

Two dialects share it. The *official* one (host ``api.openai.com``, or ``official_dialect=True``)
requires a key, sends ``max_completion_tokens`` and uses native JSON-schema output. The
*compatible* one (vLLM, Ollama, llama.cpp, LM Studio, gateways...) may run keyless, sends
``max_tokens`` and leaves structured output to the loop's prompt contract unless
``supports_json_schema=True``.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import httpx

from .._entry_memo import PrefixMemo
from .._text import loads
from ..exceptions import ContextOverflowError, ProviderError
from ..messages import FilePart, ImagePart, Message, TextPart, Usage
from ..transcript import (
    AssistantTextEntry,
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
    messages_to_entries,
)
from ._http import HTTPProviderBase, WindowCache, apply_options, error_body_text
from ._openai import (
    error_fields,
    http_error,
    openai_endpoint,
    openai_request_headers,
    window_from_models,
)
from ._windows import known_window
from ._wire import IMAGE_OMITTED, as_int
from .base import ModelSettings, ToolDefinition, request_extras

__all__ = ["OpenAIChatProvider", "entries_to_openai_messages", "message_to_openai"]

logger = logging.getLogger("lovia")

PROVIDER_TAG = "openai-chat"
_VENDOR_KEYS = ("openai", "openai-chat")
_WINDOW_CACHE: WindowCache = {}


class OpenAIChatProvider(HTTPProviderBase):
    """Streaming chat-completions client for api.openai.com and OpenAI-compatible servers.

    Args:
        model: The model id, e.g. ``"gpt-4.1-mini"`` or ``"qwen2.5:7b"``.
        api_key: Bearer key; defaults to ``OPENAI_API_KEY``. Required on the official host.
        base_url: API root; defaults to ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
        client: An ``httpx.AsyncClient`` to use (then the caller closes it, not :meth:`aclose`).
        timeout: Seconds (or an ``httpx.Timeout``); defaults to ``LOVIA_PROVIDER_TIMEOUT`` (300).
        default_headers: Extra headers sent with every request.
        supports_json_schema: Native ``response_format`` JSON schema; default: official host only.
        trust_env: Honour proxy env variables; defaults to ``LOVIA_PROVIDER_TRUST_ENV`` (off).
        replay_reasoning: Send earlier reasoning back as ``reasoning_content``; default: off on
            the official host, on elsewhere (DeepSeek-style servers need it for tool turns).
        official_dialect: Force the official (True) or compatible (False) dialect; default:
            decided by the host name.
        supports_vision: Whether the model accepts images (default True).
        extra_body: Raw request fields sent with every call (after the typed settings, before
            ``provider_options``).
        proxy: An explicit proxy URL for this provider's client.
        verify: TLS verification for this provider's client (context, CA bundle path or flag);
            default: the shared resolution of :mod:`lovia.http_config`.
    """

    vendor = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        default_headers: Mapping[str, str] | None = None,
        supports_json_schema: bool | None = None,
        trust_env: bool | None = None,
        replay_reasoning: bool | None = None,
        official_dialect: bool | None = None,
        supports_vision: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        proxy: str | None = None,
        verify: Any = None,
    ) -> None:
        url, official, key = openai_endpoint(base_url, api_key, official_dialect)
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
        self._api_key = key
        self._official = official
        self._host = urlparse(url).hostname
        self._json_schema = official if supports_json_schema is None else supports_json_schema
        self._replay_reasoning = (not official) if replay_reasoning is None else replay_reasoning
        self._headers = dict(default_headers or {})
        self._vision = True if supports_vision is None else supports_vision

    @property
    def name(self) -> str:
        """Provider name used in events, usage keys and errors: ``"openai-chat"`` on every host."""
        return PROVIDER_TAG

    @property
    def supports_json_schema(self) -> bool:
        """Whether ``response_format`` is sent as a native JSON schema."""
        return self._json_schema

    @property
    def is_official(self) -> bool:
        """True when talking the official api.openai.com dialect."""
        return self._official

    def _request_headers(self) -> dict[str, str]:
        return openai_request_headers(
            self._headers, self._api_key, self._host, elsewhere="a local OpenAI-compatible server"
        )

    def build_payload(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The JSON body :meth:`stream` would POST (useful for debugging and tests)."""
        settings = settings or ModelSettings()
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": entries_to_chat(entries, replay_reasoning=self._replay_reasoning, include_images=self._vision),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            payload["tools"] = [_tool_to_wire(t) for t in tools]
            if settings.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = settings.parallel_tool_calls
        if response_format is not None and self._json_schema:
            schema = {"name": response_format.get("name") or "output", "schema": response_format.get("schema") or {}}
            schema["strict"] = bool(response_format.get("strict", True))
            payload["response_format"] = {"type": "json_schema", "json_schema": schema}
        if settings.temperature is not None:
            payload["temperature"] = settings.temperature
        if settings.top_p is not None:
            payload["top_p"] = settings.top_p
        if settings.max_tokens is not None:
            payload["max_completion_tokens" if self._official else "max_tokens"] = settings.max_tokens
        if settings.stop:
            payload["stop"] = list(settings.stop)
        extras = request_extras(self._extra_body, settings, *_VENDOR_KEYS)
        if extras:
            logger.debug("openai request extras: %s", ", ".join(sorted(extras)))
        apply_options(payload, extras)
        return payload

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one chat completion as deltas.

        Raises:
            ProviderError: Non-2xx status, transport failure, or a stream cut before ``[DONE]``.
            ContextOverflowError: The endpoint said the prompt exceeds the context window.
        """
        payload = self.build_payload(entries, tools=tools, response_format=response_format, settings=settings)
        url = f"{self._base_url}/chat/completions"
        parser = _ChunkParser(self)
        async with self._sse_request(url, payload, self._request_headers(), self._map_error) as events:
            async for event in events:
                if event.data.strip() == "[DONE]":
                    parser.done = True
                    break
                for delta in parser.feed(event.data):
                    yield delta
        if not parser.done and parser.finish_reason is None:
            raise self._error("stream ended before [DONE] (connection cut mid-response)", retryable=True)
        for delta in parser.finish():
            yield delta

    def _map_error(self, status: int, body: Any, raw: str) -> ProviderError | ContextOverflowError:
        return http_error(self, status, body, raw, not_found=f"check the model name and base_url ({self._base_url})")

    def _stream_error(self, error: Any) -> ProviderError | ContextOverflowError:
        """An ``{"error": ...}`` object sent inside the event stream."""
        body = {"error": error}
        status = error.get("code") if isinstance(error, dict) and isinstance(error.get("code"), int) else None
        message, code = error_fields(body)
        text = message or error_body_text(json.dumps(error))
        mapped = self._map_error(status or 500, body, text)
        if isinstance(mapped, ProviderError) and status is None:
            kind = f"{code or ''} {error.get('type', '') if isinstance(error, dict) else ''}".lower()
            mapped.retryable = any(
                word in kind for word in ("server", "rate_limit", "overload", "timeout", "unavailable")
            )
            mapped.status_code = None
        return mapped

    def context_window(self) -> int | None:
        """The window this endpoint's ``/models`` reported, else the bundled table for its host.

        The table only knows the vendors' own hosts (api.openai.com, api.deepseek.com): the same
        model name on another server may be deployed with a different window.
        """
        found = _WINDOW_CACHE.get((self._base_url, self._model))
        return found if found is not None else known_window(self._host, self._model)

    async def discover_context_window(self) -> int | None:
        """Ask a compatible server's ``/models`` for ``max_model_len`` (memoized; None if unknown).

        Skipped on api.openai.com, whose model list does not state context windows.
        """
        if self._official:
            return None
        models = f"{self._base_url}/models"
        return await self._remembered_window(
            _WINDOW_CACHE, models, self._request_headers(), lambda data: window_from_models(data, self._model)
        )


# --------------------------------------------------------------------------- request mapping


def _tool_to_wire(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    if tool.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _part_to_wire(part: TextPart | ImagePart | FilePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": part.data_url(), "detail": part.detail or "auto"}}
    if part.data is not None:
        file: dict[str, Any] = {"file_data": f"data:{part.mime_type or 'application/octet-stream'};base64,{part.data}"}
        file["filename"] = part.filename or "file"
        return {"type": "file", "file": file}
    # Chat completions cannot fetch a file by URL: name it so the model at least knows of it.
    return {"type": "text", "text": f"[file: {part.filename or part.url}] {part.url}"}


_NO_IMAGE = {"type": "text", "text": IMAGE_OMITTED}


def _input_to_message(entry: InputEntry, *, include_images: bool = True) -> dict[str, Any]:
    if isinstance(entry.content, str):
        return {"role": entry.role, "content": entry.content}
    if entry.role == "system":
        return {"role": "system", "content": entry.text}
    parts = [
        _part_to_wire(p) if include_images or not isinstance(p, ImagePart) else dict(_NO_IMAGE) for p in entry.content
    ]
    return {"role": "user", "content": parts}


def _append_assistant(
    messages: list[dict[str, Any]], entry: TranscriptEntry, *, replay_reasoning: bool, reasoning_provider: str
) -> None:
    last = messages[-1] if messages else None
    if last is None or last.get("role") != "assistant":
        last = {"role": "assistant", "content": None}
        messages.append(last)
    if isinstance(entry, ReasoningEntry):
        # Only reasoning this adapter produced goes back: another vendor's thinking (signed,
        # encrypted, or a summary) means nothing to this endpoint.
        if replay_reasoning and entry.content and entry.provider in (None, reasoning_provider):
            last["reasoning_content"] = (last.get("reasoning_content") or "") + entry.content
    elif isinstance(entry, AssistantTextEntry):
        last["content"] = (last.get("content") or "") + entry.content
    elif isinstance(entry, ToolCallEntry):
        call = {"id": entry.call_id, "type": "function", "function": {"name": entry.name, "arguments": entry.arguments}}
        last.setdefault("tool_calls", []).append(call)


def entries_to_chat(
    entries: Sequence[TranscriptEntry],
    *,
    replay_reasoning: bool,
    reasoning_provider: str = PROVIDER_TAG,
    include_images: bool = True,
) -> list[dict[str, Any]]:
    """Map transcript entries to chat-completions ``messages`` (memoized by transcript prefix:
    a turn converts only its new entries; the message dicts are shared, treat them as read-only)."""
    key = (replay_reasoning, reasoning_provider, include_images)
    memo = _CHAT_MEMOS.get(key)
    if memo is None:
        memo = _CHAT_MEMOS[key] = _chat_memo(*key)
    return memo(entries)


def _chat_cut(previous: TranscriptEntry, entry: TranscriptEntry) -> bool:
    # No pending tool images and no open assistant message carry over an input, or the first
    # tool result after a non-result (which flushed any pending images).
    return isinstance(entry, InputEntry) or (
        isinstance(entry, ToolResultEntry) and not isinstance(previous, ToolResultEntry)
    )


def _entries_to_chat(
    entries: Sequence[TranscriptEntry],
    *,
    replay_reasoning: bool,
    reasoning_provider: str = PROVIDER_TAG,
    include_images: bool = True,
) -> list[dict[str, Any]]:
    """Map transcript entries to chat-completions ``messages``.

    Consecutive reasoning/text/tool-call entries merge into one assistant message; tool results
    become ``tool`` messages carrying ``tool_call_id``. Images attached to tool results follow the
    run of tool messages as one user message (``tool`` messages are text-only). Reasoning goes
    back as ``reasoning_content`` only with ``replay_reasoning`` and only when it came from
    ``reasoning_provider`` (or is untagged). Without ``include_images`` an image becomes a short
    note and tool-result images are left out.
    """
    messages: list[dict[str, Any]] = []
    pending_images: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, ToolResultEntry) and pending_images:
            messages.append({"role": "user", "content": pending_images})
            pending_images = []
        if isinstance(entry, InputEntry):
            messages.append(_input_to_message(entry, include_images=include_images))
        elif isinstance(entry, ToolResultEntry):
            messages.append({"role": "tool", "tool_call_id": entry.call_id, "content": entry.output})
            images = [p for p in entry.parts or () if isinstance(p, ImagePart)] if include_images else []
            if images:
                pending_images.append({"type": "text", "text": f"Images returned by tool call {entry.call_id}:"})
                pending_images.extend(_part_to_wire(p) for p in images)
        else:
            _append_assistant(messages, entry, replay_reasoning=replay_reasoning, reasoning_provider=reasoning_provider)
    if pending_images:
        messages.append({"role": "user", "content": pending_images})
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls") and message["content"] == "":
            message["content"] = None
    return messages


def entries_to_openai_messages(
    entries: list[TranscriptEntry],
    *,
    reasoning_provider: str = PROVIDER_TAG,
    include_reasoning: bool = True,
    include_images: bool = False,
) -> list[dict[str, Any]]:
    """Chat-completions ``messages`` for ``entries`` (the public form of the adapter's mapping).

    Args:
        entries: The transcript view.
        reasoning_provider: Whose reasoning entries are sent back as ``reasoning_content``.
        include_reasoning: Send reasoning back at all.
        include_images: Send image parts (otherwise each becomes a short text note).
    """
    return entries_to_chat(
        entries,
        replay_reasoning=include_reasoning,
        reasoning_provider=reasoning_provider,
        include_images=include_images,
    )


def message_to_openai(msg: Message) -> dict[str, Any]:
    """One chat :class:`~lovia.messages.Message` as a chat-completions message dict."""
    rendered = entries_to_chat(messages_to_entries([msg]), replay_reasoning=True, include_images=True)
    return rendered[0] if rendered else {"role": msg.role, "content": msg.text}


# --------------------------------------------------------------------------- response parsing


class _ChunkParser:
    """Turns chat-completion chunks into deltas; remembers finish reason, usage and call slots."""

    def __init__(self, provider: OpenAIChatProvider) -> None:
        self._provider = provider
        self.done = False
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._slots: dict[int, int] = {}  # vendor index -> our index
        self._ids: dict[int, str] = {}  # our index -> call id
        self._named: set[int] = set()
        self._args: dict[int, str] = {}  # our index -> argument text so far (for index-less servers)

    def feed(self, data: str) -> list[ModelDelta]:
        try:
            chunk = loads(data)  # the text policy (lovia._text)
        except ValueError:
            raise self._provider._error(f"unreadable stream chunk: {error_body_text(data)}", retryable=True) from None
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error"):
            raise self._provider._stream_error(chunk["error"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = _usage_from(chunk["usage"])
        out: list[ModelDelta] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            out.extend(self._from_delta(delta))
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def _from_delta(self, delta: dict[str, Any]) -> list[ModelDelta]:
        out: list[ModelDelta] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(TextDelta(content))
        for raw in delta.get("tool_calls") or ():
            if isinstance(raw, dict):
                out.append(self._tool_fragment(raw))
        return out

    def _slot_for(self, raw: dict[str, Any]) -> int:
        vendor_index = raw.get("index")
        call_id = raw.get("id")
        if not isinstance(vendor_index, int):
            # Some servers omit the index. A known id continues its own call; a new id opens a new
            # call, and so does a named fragment after the last call's arguments were already
            # complete JSON (several whole calls, no ids); anything else continues the last call.
            for slot, seen in self._ids.items():
                if call_id and seen == call_id:
                    return slot
            last = len(self._slots) - 1
            function = raw.get("function")
            named = isinstance(function, dict) and bool(function.get("name"))
            if call_id or not self._slots or (named and last in self._named and _is_json(self._args.get(last, ""))):
                vendor_index = -1 - len(self._slots)
            else:
                return last
        if vendor_index not in self._slots:
            self._slots[vendor_index] = len(self._slots)
        return self._slots[vendor_index]

    def _tool_fragment(self, raw: dict[str, Any]) -> ToolCallDelta:
        index = self._slot_for(raw)
        function = raw.get("function") or {}
        call_id = raw.get("id") or None
        name = function.get("name") or None
        if call_id is not None and index in self._ids:
            call_id = None  # already announced
        elif call_id is not None:
            self._ids[index] = call_id
        if name is not None and index in self._named:
            name = None
        elif name is not None:
            self._named.add(index)
        arguments = function.get("arguments")
        if isinstance(arguments, (dict, list)):
            arguments = json.dumps(arguments)
        self._args[index] = self._args.get(index, "") + (arguments or "")
        return ToolCallDelta(index=index, call_id=call_id, name=name, arguments=arguments or "")

    def finish(self) -> list[ModelDelta]:
        out: list[ModelDelta] = []
        if self.usage is not None:
            out.append(UsageDelta(self.usage))
        out.append(FinishDelta(self.finish_reason))
        return out


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _usage_from(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or as_int(raw.get("prompt_cache_hit_tokens"))  # DeepSeek's spelling
    return Usage(
        input_tokens=as_int(raw.get("prompt_tokens")),
        output_tokens=as_int(raw.get("completion_tokens")),
        cache_read_tokens=cached,
    )


def _chat_memo(
    replay_reasoning: bool, reasoning_provider: str, include_images: bool
) -> PrefixMemo[TranscriptEntry, dict[str, Any]]:
    convert = functools.partial(
        _entries_to_chat,
        replay_reasoning=replay_reasoning,
        reasoning_provider=reasoning_provider,
        include_images=include_images,
    )
    return PrefixMemo(convert, _chat_cut, head=leading_system_count)


_CHAT_MEMOS: dict[tuple[bool, str, bool], PrefixMemo[TranscriptEntry, dict[str, Any]]] = {}
