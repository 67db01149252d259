"""OpenAI Responses API (``POST {base}/responses``, streaming) for OpenAI and servers that speak it.

One wire API per file: transcript entries become ``instructions`` plus typed ``input`` items,
settings become request fields, the typed SSE events (``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.output_item.done``, ``response.completed``
...) become :data:`~lovia.transcript.ModelDelta` values, and error bodies or ``error`` /
``response.failed`` events become :class:`~lovia.exceptions.ProviderError` or
:class:`~lovia.exceptions.ContextOverflowError`.

Our transcript is the source of truth: requests are sent with ``store: false`` and no
``previous_response_id`` (unless ``previous_response_id=True``), so every call carries the whole
conversation. Reasoning items come back encrypted (``include: ["reasoning.encrypted_content"]``);
each finished one is emitted as an :class:`~lovia.transcript.EntryCompletedDelta` whose
:class:`~lovia.transcript.ReasoningEntry` (``provider="openai-responses"``) keeps the item id and
the encrypted content in ``metadata``, so the next turn, a session reload or a resumed checkpoint
sends it back verbatim. The turn's reasoning-token count (which :class:`~lovia.messages.Usage`
has no field for) is recorded as ``metadata["reasoning_tokens"]`` on the turn's first reasoning
entry.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import httpx

from ..exceptions import ContextOverflowError, ProviderError, UserError
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
)
from ._http import HTTPProviderBase, WindowCache, apply_options, error_body_text
from ._openai import (
    OFFICIAL_HOST,
    error_fields,
    http_error,
    openai_endpoint,
    openai_request_headers,
    overflow_from,
    window_from_models,
)
from ._windows import known_window
from ._wire import IMAGE_OMITTED, as_int
from .base import ModelSettings, ToolDefinition, request_extras

__all__ = ["PROVIDER_TAG", "OpenAIResponsesProvider", "entries_to_responses_input"]

PROVIDER_TAG = "openai-responses"
_VENDOR_KEYS = ("openai", "openai-responses")
_WINDOW_CACHE: WindowCache = {}
_RETRYABLE_CODES = ("server_error", "rate_limit", "overloaded", "timeout", "unavailable")
# Why a response stopped early, in the words the rest of lovia uses for finish reasons.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class OpenAIResponsesProvider(HTTPProviderBase):
    """Streaming client for the OpenAI Responses API (reasoning models, encrypted reasoning items).

    Args:
        model: The model id, e.g. ``"gpt-5-mini"`` or ``"o4-mini"``.
        api_key: Bearer key; defaults to ``OPENAI_API_KEY``. Required on the official host.
        base_url: API root; defaults to ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
        client: An ``httpx.AsyncClient`` to use (then the caller closes it, not :meth:`aclose`).
        timeout: Seconds (or an ``httpx.Timeout``); defaults to ``LOVIA_PROVIDER_TIMEOUT`` (300).
        default_headers: Extra headers sent with every request.
        supports_json_schema: Native ``text.format`` JSON schema (default True: the Responses API
            has it everywhere it exists).
        trust_env: Honour proxy env variables; defaults to ``LOVIA_PROVIDER_TRUST_ENV`` (off).
        official_dialect: Force official-host behaviour (key required, bundled context windows);
            default: decided by the host name.
        supports_vision: Whether the model accepts images (default True).
        extra_body: Raw request fields sent with every call (before ``provider_options``).
        store: Send ``store: true`` so the vendor keeps the response (default False: our
            transcript is the record, and reasoning items travel encrypted instead).
        previous_response_id: Chain calls with ``previous_response_id`` and send only the new
            items (needs ``store=True``; default False).
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
        official_dialect: bool | None = None,
        supports_vision: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        store: bool = False,
        previous_response_id: bool = False,
        proxy: str | None = None,
        verify: Any = None,
    ) -> None:
        url, official, key = openai_endpoint(base_url, api_key, official_dialect)
        if previous_response_id and not store:
            raise UserError(
                "previous_response_id=True needs store=True",
                hint="the vendor can only chain responses it stored; or leave previous_response_id off",
            )
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
        self._json_schema = True if supports_json_schema is None else supports_json_schema
        self._vision = True if supports_vision is None else supports_vision
        self._headers = dict(default_headers or {})
        self._store = store
        self._chain = previous_response_id
        self._last_response: tuple[str, int] | None = None  # (response id, transcript length it answered)

    @property
    def name(self) -> str:
        """Provider name used in events and errors."""
        return PROVIDER_TAG

    @property
    def supports_json_schema(self) -> bool:
        """Whether ``response_format`` is sent as a native ``text.format`` JSON schema."""
        return self._json_schema

    def _request_headers(self) -> dict[str, str]:
        return openai_request_headers(self._headers, self._api_key, self._host, elsewhere="another Responses server")

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
        instructions, items = entries_to_responses_input(entries, include_images=self._vision)
        payload: dict[str, Any] = {"model": self._model, "input": items, "stream": True, "store": self._store}
        if self._chain and self._last_response is not None:
            response_id, answered = self._last_response
            if answered <= len(entries):
                payload["previous_response_id"] = response_id
                # The vendor holds everything up to its own answer: send only what came after it.
                fresh = [e for e in entries[answered:] if isinstance(e, (InputEntry, ToolResultEntry))]
                payload["input"] = entries_to_responses_input(fresh, include_images=self._vision)[1]
        if not self._store:
            payload["include"] = ["reasoning.encrypted_content"]
        if instructions:
            payload["instructions"] = instructions
        if tools:
            payload["tools"] = [_tool_to_wire(t) for t in tools]
            if settings.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = settings.parallel_tool_calls
        if response_format is not None and self._json_schema:
            payload["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": response_format.get("name") or "output",
                    "schema": response_format.get("schema") or {},
                    "strict": bool(response_format.get("strict", True)),
                }
            }
        if settings.temperature is not None:
            payload["temperature"] = settings.temperature
        if settings.top_p is not None:
            payload["top_p"] = settings.top_p
        if settings.max_tokens is not None:
            payload["max_output_tokens"] = settings.max_tokens
        # The Responses API has no stop sequences: ``settings.stop`` is not sent (see docs/providers.md).
        apply_options(payload, request_extras(self._extra_body, settings, *_VENDOR_KEYS))
        return payload

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one response as deltas.

        Raises:
            ProviderError: Non-2xx status, an ``error`` / ``response.failed`` event, a malformed
                event, transport failure, or a stream cut before ``response.completed``.
            ContextOverflowError: The endpoint said the input exceeds the context window.
        """
        payload = self.build_payload(entries, tools=tools, response_format=response_format, settings=settings)
        parser = ResponsesEventParser(self)
        async with self._sse_request(
            f"{self._base_url}/responses", payload, self._request_headers(), self._map_error
        ) as events:
            async for event in events:
                for delta in parser.feed(event.data):
                    yield delta
                if parser.done:
                    break
        if not parser.done:
            raise self._error("stream ended before response.completed (connection cut mid-response)", retryable=True)
        if self._chain and parser.response_id:
            self._last_response = (parser.response_id, len(entries))

    def _map_error(self, status: int, body: Any, raw: str) -> ProviderError | ContextOverflowError:
        not_found = f"check the model name and base_url ({self._base_url}); lovia posts to {{base_url}}/responses"
        return http_error(self, status, body, raw, not_found=not_found)

    def _event_error(self, error: Any) -> ProviderError | ContextOverflowError:
        """An ``error`` event or a failed response's ``error`` object inside a 200 stream."""
        body = {"error": error}
        message, code = error_fields(body)
        text = message or error_body_text(json.dumps(error))
        is_overflow, window = overflow_from(text, code, body, 400)
        if is_overflow:
            return self._overflow_error(text, window)
        retryable = any(word in (code or "").lower() for word in _RETRYABLE_CODES)
        return self._error(f"stream error {code or 'unknown'}: {text}", retryable=retryable)

    def context_window(self) -> int | None:
        """The bundled window on api.openai.com, else what this endpoint's ``/models`` reported."""
        if self._official:
            return known_window(OFFICIAL_HOST, self._model)
        return _WINDOW_CACHE.get((self._base_url, self._model))

    async def discover_context_window(self) -> int | None:
        """Ask a non-official server's ``/models`` for the model's window (memoized; None if unknown)."""
        if self._official:
            return known_window(OFFICIAL_HOST, self._model)
        models = f"{self._base_url}/models"
        return await self._remembered_window(
            _WINDOW_CACHE, models, self._request_headers(), lambda data: window_from_models(data, self._model)
        )


# --------------------------------------------------------------------------- request mapping


def _tool_to_wire(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": bool(tool.strict),
    }


def _part_to_wire(part: ContentPart, *, include_images: bool) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        if not include_images:
            return {"type": "input_text", "text": IMAGE_OMITTED}
        return {"type": "input_image", "image_url": part.data_url(), "detail": part.detail or "auto"}
    if isinstance(part, FilePart):
        if part.data is not None:
            mime = part.mime_type or "application/octet-stream"
            return {
                "type": "input_file",
                "file_data": f"data:{mime};base64,{part.data}",
                "filename": part.filename or "file",
            }
        return {"type": "input_file", "file_url": part.url}
    raise TypeError(f"not a content part: {type(part).__name__}")


def _input_message(entry: InputEntry, *, include_images: bool) -> dict[str, Any]:
    if isinstance(entry.content, str):
        return {"role": entry.role, "content": entry.content}
    if entry.role == "system":
        return {"role": "system", "content": entry.text}
    return {"role": "user", "content": [_part_to_wire(p, include_images=include_images) for p in entry.content]}


def _reasoning_item(entry: ReasoningEntry) -> dict[str, Any] | None:
    """The ``reasoning`` input item for an entry this adapter produced (others are not replayable)."""
    meta = entry.metadata or {}
    item_id = meta.get("item_id") or entry.id
    if entry.provider != PROVIDER_TAG or not item_id:
        return None
    summary = meta.get("summary")
    texts = [t for t in summary if isinstance(t, str)] if isinstance(summary, list) else []
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": str(item_id),
        "summary": [{"type": "summary_text", "text": t} for t in texts],
    }
    if meta.get("encrypted_content"):
        item["encrypted_content"] = str(meta["encrypted_content"])
    return item


def _tool_output(entry: ToolResultEntry, *, include_images: bool) -> str | list[dict[str, Any]]:
    images = [p for p in entry.parts or () if isinstance(p, ImagePart)] if include_images else []
    if not images:
        return entry.output
    content: list[dict[str, Any]] = [{"type": "input_text", "text": entry.output}] if entry.output else []
    content.extend(_part_to_wire(p, include_images=True) for p in images)
    return content


def entries_to_responses_input(
    entries: Sequence[TranscriptEntry], *, include_images: bool = True
) -> tuple[str | None, list[dict[str, Any]]]:
    """Map transcript entries to (``instructions``, ``input`` items).

    Leading system entries become ``instructions``; a later system entry is a ``system`` message.
    Assistant text becomes an assistant message, tool calls ``function_call`` items, results
    ``function_call_output`` items (paired by ``call_id``), and this adapter's reasoning entries
    ``reasoning`` items carrying their encrypted content. Images are replaced by a short note when
    ``include_images`` is False.
    """
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    head = True
    for entry in entries:
        if head and isinstance(entry, InputEntry) and entry.role == "system":
            if entry.text:
                instructions.append(entry.text)
            continue
        head = False
        if isinstance(entry, InputEntry):
            items.append(_input_message(entry, include_images=include_images))
        elif isinstance(entry, AssistantTextEntry):
            if entry.content:
                items.append({"role": "assistant", "content": entry.content})
        elif isinstance(entry, ReasoningEntry):
            item = _reasoning_item(entry)
            if item is not None:
                items.append(item)
        elif isinstance(entry, ToolCallEntry):
            items.append(
                {"type": "function_call", "call_id": entry.call_id, "name": entry.name, "arguments": entry.arguments}
            )
        elif isinstance(entry, ToolResultEntry):
            output = _tool_output(entry, include_images=include_images)
            items.append({"type": "function_call_output", "call_id": entry.call_id, "output": output})
    return ("\n\n".join(instructions) or None), items


# --------------------------------------------------------------------------- response parsing


class ResponsesEventParser:
    """Turns Responses API stream events into deltas.

    Function calls get a stable index in the order their items are added (keyed by
    ``output_index``); reasoning entries are held back until the response completes, so the
    turn's reasoning-token count can be written into the first one's metadata.
    """

    def __init__(self, provider: OpenAIResponsesProvider) -> None:
        self._provider = provider
        self.done = False
        self.response_id: str | None = None
        self._calls: dict[int, int] = {}  # output_index -> our call index
        self._call_args: dict[int, bool] = {}  # our call index -> argument fragments were streamed
        self._text_items: set[int] = set()  # output indexes whose text arrived as deltas
        self._reasoning: list[ReasoningEntry] = []
        self._reasoning_part: tuple[Any, Any] | None = None

    def feed(self, data: str) -> list[ModelDelta]:
        """Parse one event's ``data``; raise on errors, return the deltas it carries."""
        body = self._decode(data)
        kind = body.get("type")
        if kind is None and body.get("object") == "response":
            return self._whole_response(body)
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return self._text(body)
        if kind == "response.reasoning_summary_text.delta" or kind == "response.reasoning_text.delta":
            return self._reasoning_text(body)
        if kind == "response.function_call_arguments.delta":
            return self._arguments(body)
        if kind == "response.output_item.added":
            return self._item_added(body)
        if kind == "response.output_item.done":
            return self._item_done(body)
        if kind in ("response.completed", "response.incomplete"):
            return self._finish(body.get("response") or {}, kind)
        if kind == "response.created":
            response = body.get("response") or {}
            self.response_id = response.get("id") if isinstance(response.get("id"), str) else None
        elif kind == "response.failed":
            response = body.get("response") or {}
            raise self._provider._event_error(response.get("error") or {"message": "response failed"})
        elif kind == "error":
            raise self._provider._event_error(body.get("error") if isinstance(body.get("error"), dict) else body)
        return []  # in_progress, content_part.*, *.done and unknown events carry nothing new

    def _decode(self, data: str) -> dict[str, Any]:
        try:
            body = json.loads(data)
        except ValueError:
            raise self._provider._error(f"unreadable stream event: {error_body_text(data)}", retryable=True) from None
        if not isinstance(body, dict):
            raise self._provider._error(f"unexpected stream event: {error_body_text(data)}", retryable=True)
        return body

    def _reasoning_text(self, body: dict[str, Any]) -> list[ModelDelta]:
        delta = body.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        # Summary parts of one item are separate paragraphs: stream the break the finished
        # entry will have, so a live view and the stored entry read the same.
        part = (body.get("item_id"), body.get("summary_index", body.get("content_index")))
        if self._reasoning_part is not None and part != self._reasoning_part and part[0] == self._reasoning_part[0]:
            delta = "\n\n" + delta
        self._reasoning_part = part
        return [ReasoningDelta(delta)]

    def _text(self, body: dict[str, Any]) -> list[ModelDelta]:
        delta = body.get("delta")
        if isinstance(body.get("output_index"), int):
            self._text_items.add(body["output_index"])
        return [TextDelta(delta)] if isinstance(delta, str) and delta else []

    def _call_index(self, output_index: Any) -> int | None:
        return self._calls.get(output_index) if isinstance(output_index, int) else None

    def _arguments(self, body: dict[str, Any]) -> list[ModelDelta]:
        index = self._call_index(body.get("output_index"))
        delta = body.get("delta")
        if index is None or not isinstance(delta, str) or not delta:
            return []
        self._call_args[index] = True
        return [ToolCallDelta(index=index, arguments=delta)]

    def _open_call(self, output_index: int, item: dict[str, Any]) -> list[ModelDelta]:
        index = len(self._calls)
        self._calls[output_index] = index
        call_id = item.get("call_id") or item.get("id")
        out: list[ModelDelta] = [
            ToolCallDelta(index=index, call_id=str(call_id) if call_id else None, name=item.get("name") or None)
        ]
        arguments = item.get("arguments")
        if isinstance(arguments, str) and arguments:
            self._call_args[index] = True
            out.append(ToolCallDelta(index=index, arguments=arguments))
        return out

    def _item_added(self, body: dict[str, Any]) -> list[ModelDelta]:
        item = body.get("item")
        output_index = body.get("output_index")
        if not isinstance(item, dict) or not isinstance(output_index, int):
            return []
        if item.get("type") == "function_call" and output_index not in self._calls:
            return self._open_call(output_index, item)
        return []

    def _item_done(self, body: dict[str, Any]) -> list[ModelDelta]:
        item = body.get("item")
        output_index = body.get("output_index")
        if not isinstance(item, dict) or not isinstance(output_index, int):
            return []
        kind = item.get("type")
        if kind == "reasoning":
            self._reasoning.append(_reasoning_entry(item))
            return []
        if kind == "function_call":
            out: list[ModelDelta] = []
            if output_index not in self._calls:
                return self._open_call(output_index, item)
            index = self._calls[output_index]
            if not self._call_args.get(index):
                arguments = item.get("arguments")
                out.append(ToolCallDelta(index=index, arguments=arguments if isinstance(arguments, str) else "{}"))
                self._call_args[index] = True
            return out
        if kind == "message" and output_index not in self._text_items:
            # A server that sent the finished message without streaming its text.
            text = "".join(
                str(part.get("text") or part.get("refusal") or "")
                for part in item.get("content") or ()
                if isinstance(part, dict)
            )
            return [TextDelta(text)] if text else []
        return []

    def _whole_response(self, response: dict[str, Any]) -> list[ModelDelta]:
        """A complete Response (from a server or proxy that ignored ``stream: true``)."""
        out: list[ModelDelta] = []
        for output_index, item in enumerate(response.get("output") or ()):
            if isinstance(item, dict) and item.get("type") in ("message", "reasoning"):
                out += self._item_done({"item": item, "output_index": output_index})
        status = response.get("status")
        return out + self._finish(response, "response.incomplete" if status == "incomplete" else "response.completed")

    def _finish(self, response: dict[str, Any], kind: str) -> list[ModelDelta]:
        self.done = True
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        out: list[ModelDelta] = []
        for output_index, item in enumerate(response.get("output") or ()):
            # Items the stream never announced (a terse server) still reach the transcript.
            if isinstance(item, dict) and item.get("type") == "function_call" and output_index not in self._calls:
                out += self._open_call(output_index, item)
        usage, reasoning_tokens = _usage_from(response.get("usage"))
        if self._reasoning and reasoning_tokens:
            first = self._reasoning[0]
            self._reasoning[0] = ReasoningEntry(
                content=first.content,
                id=first.id,
                provider=first.provider,
                metadata={**first.metadata, "reasoning_tokens": reasoning_tokens},
            )
        out += [EntryCompletedDelta(entry) for entry in self._reasoning]
        if usage is not None:
            out.append(UsageDelta(usage))
        if kind == "response.incomplete":
            details = response.get("incomplete_details") or {}
            reason = str(details.get("reason") or "incomplete") if isinstance(details, dict) else "incomplete"
            out.append(FinishDelta(_INCOMPLETE.get(reason, reason)))
        else:
            out.append(FinishDelta("tool_calls" if self._calls else "stop"))
        return out


def _reasoning_entry(item: dict[str, Any]) -> ReasoningEntry:
    summary = [str(p.get("text") or "") for p in item.get("summary") or () if isinstance(p, dict)]
    content = [str(p.get("text") or "") for p in item.get("content") or () if isinstance(p, dict)]
    meta: dict[str, Any] = {"item_id": item.get("id"), "summary": summary}
    if item.get("encrypted_content"):
        meta["encrypted_content"] = item["encrypted_content"]
    text = "\n\n".join(t for t in summary if t) or "\n\n".join(t for t in content if t)
    return ReasoningEntry(content=text, id=item.get("id"), provider=PROVIDER_TAG, metadata=meta)


def _usage_from(raw: Any) -> tuple[Usage | None, int]:
    """(usage, reasoning tokens) from a Responses ``usage`` object."""
    if not isinstance(raw, dict):
        return None, 0
    input_details = raw.get("input_tokens_details")
    output_details = raw.get("output_tokens_details")
    cached = as_int(input_details.get("cached_tokens")) if isinstance(input_details, dict) else 0
    written = as_int(input_details.get("cache_write_tokens")) if isinstance(input_details, dict) else 0
    reasoning = as_int(output_details.get("reasoning_tokens")) if isinstance(output_details, dict) else 0
    usage = Usage(
        input_tokens=as_int(raw.get("input_tokens")),
        output_tokens=as_int(raw.get("output_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )
    return usage, reasoning
