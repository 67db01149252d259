"""Google Gemini API (``POST {root}/models/{model}:streamGenerateContent?alt=sse``).

One wire API per file: transcript entries become ``systemInstruction`` plus alternating
``user`` / ``model`` ``contents``, settings become ``generationConfig``, each SSE chunk (a
``GenerateContentResponse``) becomes :data:`~lovia.transcript.ModelDelta` values, and error
bodies, prompt blocks and safety stops become :class:`~lovia.exceptions.ProviderError` or
:class:`~lovia.exceptions.ContextOverflowError`.

Function calls arrive whole (one part per call, possibly several per turn). When the API gives a
call no ``id``, the adapter assigns one derived from the request (its length and its last
entries, the call's position, name and arguments), so a retried or resumed call gets the same id and its
result pairs with it. Thought signatures, which Gemini requires back on the next request, are
kept on the turn's :class:`~lovia.transcript.ReasoningEntry` (``provider="gemini"``,
``metadata["signatures"]``) and re-attached to the parts they came with; the turn's thinking-token
count is stored there too (``metadata["reasoning_tokens"]``), since
:class:`~lovia.messages.Usage` has no field for it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlparse

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
    entry_to_dict,
)
from ._http import HTTPProviderBase, WindowCache, apply_options, error_body_text, stream_headers
from ._windows import known_window
from ._wire import IMAGE_OMITTED, arguments_object, as_int, positive_field
from .base import ModelSettings, ToolDefinition, request_extras

__all__ = ["PROVIDER_TAG", "GeminiProvider", "entries_to_gemini"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
OFFICIAL_HOST = "generativelanguage.googleapis.com"
API_VERSION_PATH = "/v1beta"
PROVIDER_TAG = "gemini"
_VENDOR_KEYS = ("gemini", "google")
_ASSIGNED_PREFIX = "gcall_"
_WINDOW_CACHE: WindowCache = {}
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_RETRYABLE_TEXT = ("RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED")
# Finish reasons that mean "the safety system stopped this", not "the model finished".
_BLOCKED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "MODEL_ARMOR",
    }
)
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}
# A broken tool call with nothing else in the turn: another attempt usually succeeds.
_RETRY_FINISH = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "MALFORMED_RESPONSE"})
_OVERFLOW = re.compile(r"input token count \(?(\d+)\)? exceeds the maximum number of tokens allowed \(?(\d+)\)?", re.I)


def gemini_root(base_url: str) -> str:
    """The API root for ``base_url``: a bare host gets ``/v1beta``; any explicit path is kept."""
    url = base_url.strip().rstrip("/")
    if httpx.URL(url).path in ("", "/"):
        return f"{url}{API_VERSION_PATH}"
    return url


class GeminiProvider(HTTPProviderBase):
    """Streaming client for the Gemini API's ``streamGenerateContent`` (SSE).

    Args:
        model: The model id, e.g. ``"gemini-2.5-flash"`` (a ``models/`` prefix is accepted).
        api_key: Sent as ``x-goog-api-key``; defaults to ``GEMINI_API_KEY``, then
            ``GOOGLE_API_KEY``. Required on the official host.
        base_url: Endpoint; defaults to ``GEMINI_BASE_URL``, else
            ``https://generativelanguage.googleapis.com``. A bare host gets ``/v1beta`` added.
        client: An ``httpx.AsyncClient`` to use (then the caller closes it, not :meth:`aclose`).
        timeout: Seconds (or an ``httpx.Timeout``); defaults to ``LOVIA_PROVIDER_TIMEOUT`` (300).
        default_headers: Extra headers sent with every request.
        trust_env: Honour proxy env variables; defaults to ``LOVIA_PROVIDER_TRUST_ENV`` (off).
        supports_json_schema: Native ``responseJsonSchema`` output (default True).
        supports_vision: Whether the model accepts images (default True).
        extra_body: Raw request fields sent with every call (before ``provider_options``).
        safety_settings: ``safetySettings`` sent with every request (the API's own shape).
        proxy: An explicit proxy URL for this provider's client.
        verify: TLS verification for this provider's client (context, CA bundle path or flag).
    """

    vendor = "gemini"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        default_headers: Mapping[str, str] | None = None,
        trust_env: bool | None = None,
        supports_json_schema: bool | None = None,
        supports_vision: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        safety_settings: Sequence[Mapping[str, Any]] | None = None,
        proxy: str | None = None,
        verify: Any = None,
    ) -> None:
        url = base_url or os.environ.get("GEMINI_BASE_URL") or DEFAULT_BASE_URL
        self._host = urlparse(url).hostname
        key = api_key if api_key is not None else (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"))
        if self._host == OFFICIAL_HOST and not key:
            raise UserError(
                "the Gemini API needs an API key",
                hint="set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass api_key=",
            )
        name = (model or "").strip().removeprefix("models/")
        super().__init__(
            model=name,
            base_url=url,
            client=client,
            timeout=timeout,
            trust_env=trust_env,
            extra_body=extra_body,
            proxy=proxy,
            verify=verify,
            root=gemini_root(url),
        )
        self._api_key = key or None
        self._headers = dict(default_headers or {})
        self._json_schema = True if supports_json_schema is None else supports_json_schema
        self._vision = True if supports_vision is None else supports_vision
        self._safety = [dict(s) for s in safety_settings or ()]

    @property
    def name(self) -> str:
        """Provider name used in events and errors."""
        return PROVIDER_TAG

    @property
    def supports_json_schema(self) -> bool:
        """Whether ``response_format`` is sent as ``responseJsonSchema``."""
        return self._json_schema

    def _request_headers(self) -> dict[str, str]:
        return stream_headers(self._headers, "x-goog-api-key", self._api_key)

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
        system, contents = entries_to_gemini(entries, include_images=self._vision)
        payload: dict[str, Any] = {"contents": contents}
        if system:
            payload["systemInstruction"] = {"parts": [{"text": text} for text in system]}
        if tools:
            payload["tools"] = [{"functionDeclarations": [_declaration(t) for t in tools]}]
        config: dict[str, Any] = {}
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        if settings.top_p is not None:
            config["topP"] = settings.top_p
        if settings.max_tokens is not None:
            config["maxOutputTokens"] = settings.max_tokens
        if settings.stop:
            config["stopSequences"] = list(settings.stop)
        if response_format is not None and self._json_schema:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = response_format.get("schema") or {}
        if config:
            payload["generationConfig"] = config
        if self._safety:
            payload["safetySettings"] = [dict(s) for s in self._safety]
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
            ProviderError: Non-2xx status, a blocked prompt or safety stop, a malformed chunk,
                transport failure, or a stream that ends without a finish reason.
            ContextOverflowError: The input exceeds the model's token limit.
        """
        payload = self.build_payload(entries, tools=tools, response_format=response_format, settings=settings)
        url = f"{self._base_url}/models/{quote(self._model, safe='')}:streamGenerateContent?alt=sse"
        parser = GeminiChunkParser(self, salt=_request_salt(entries))
        async with self._sse_request(url, payload, self._request_headers(), self._map_error) as events:
            async for event in events:
                for delta in parser.feed(event.data):
                    yield delta
        for delta in parser.finish():
            yield delta

    def _map_error(self, status: int, body: Any, raw: str) -> ProviderError | ContextOverflowError:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(body, list) and body and isinstance(body[0], dict):
            error = body[0].get("error")  # the non-SSE endpoint wraps errors in a list
        message = str(error.get("message") or "") if isinstance(error, dict) else ""
        code = str(error.get("status") or "") if isinstance(error, dict) else ""
        text = message or error_body_text(raw) or f"HTTP {status}"
        match = _OVERFLOW.search(text)
        if match:
            return self._overflow_error(text, int(match.group(2)))
        hint = None
        if status in (401, 403) or "API key" in text:
            hint = "check GEMINI_API_KEY / GOOGLE_API_KEY / api_key="
        elif status == 404:
            hint = f"check the model name and base_url ({self._base_url}); lovia posts to {{base_url}}/models/<model>"
        retryable = status in _RETRYABLE_STATUS or status >= 500 or code in _RETRYABLE_TEXT
        label = f"HTTP {status}" + (f" {code}" if code else "")
        return self._error(f"{label}: {text}", status=status, retryable=retryable, hint=hint)

    def context_window(self) -> int | None:
        """What ``/models/{model}`` already reported for this endpoint (no I/O).

        The bundled table is consulted by :meth:`discover_context_window` only after the endpoint
        could not answer.
        """
        return _WINDOW_CACHE.get((self._base_url, self._model))

    async def discover_context_window(self) -> int | None:
        """Ask ``/models/{model}`` for ``inputTokenLimit`` (memoized per endpoint and model)."""
        info = f"{self._base_url}/models/{quote(self._model, safe='')}"
        read = functools.partial(positive_field, "inputTokenLimit")
        found = await self._remembered_window(_WINDOW_CACHE, info, self._request_headers(), read)
        return found or known_window(self._host, self._model)


def _request_salt(entries: Sequence[TranscriptEntry]) -> str:
    """What makes assigned call ids unique per request and equal for the same request.

    The entry count alone could repeat after a compaction shrinks the view, so the last two
    entries (a tool result with its own call id, or the user's input) go in as well.
    """
    tail = json.dumps([entry_to_dict(e) for e in entries[-2:]], sort_keys=True, default=str)
    return f"{len(entries)}:{hashlib.sha256(tail.encode()).hexdigest()[:16]}"


# --------------------------------------------------------------------------- request mapping


def _declaration(tool: ToolDefinition) -> dict[str, Any]:
    # ``parametersJsonSchema`` takes plain JSON Schema; ``parameters`` would need Gemini's
    # OpenAPI subset, which rejects ``additionalProperties``, ``$defs`` and friends.
    return {"name": tool.name, "description": tool.description, "parametersJsonSchema": tool.parameters}


def _part(part: ContentPart, *, include_images: bool) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    if isinstance(part, ImagePart) and not include_images:
        return {"text": IMAGE_OMITTED}
    if isinstance(part, (ImagePart, FilePart)):
        default = "image/png" if isinstance(part, ImagePart) else "application/octet-stream"
        mime = part.mime_type or default
        if part.data is not None:
            return {"inlineData": {"mimeType": mime, "data": part.data}}
        return {"fileData": {"mimeType": mime, "fileUri": part.url}}
    raise TypeError(f"not a content part: {type(part).__name__}")


def _parts(content: str | Sequence[ContentPart], *, include_images: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    return [_part(p, include_images=include_images) for p in content if not (isinstance(p, TextPart) and not p.text)]


class _Contents:
    """Builds the alternating ``contents`` list, merging consecutive parts of one role."""

    def __init__(self, include_images: bool) -> None:
        self.items: list[dict[str, Any]] = []
        self.include_images = include_images
        self.names: dict[str, str] = {}  # call id -> function name (responses must name it)
        self.signatures: dict[str, str] = {}  # call id or "text" -> signature for the current turn

    def add(self, role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if self.items and self.items[-1]["role"] == role:
            self.items[-1]["parts"].extend(parts)
        else:
            self.items.append({"role": role, "parts": parts})

    def reasoning(self, entry: ReasoningEntry) -> None:
        self.signatures = {}
        if entry.provider != PROVIDER_TAG:
            return
        for item in entry.metadata.get("signatures") or ():
            if isinstance(item, dict) and isinstance(item.get("signature"), str):
                self.signatures[str(item.get("call_id") or "text")] = item["signature"]

    def text(self, entry: AssistantTextEntry) -> None:
        part: dict[str, Any] = {"text": entry.content}
        signature = self.signatures.pop("text", None)
        if signature:
            part["thoughtSignature"] = signature
        self.add("model", [part] if entry.content else [])

    def call(self, entry: ToolCallEntry) -> None:
        self.names[entry.call_id] = entry.name
        function: dict[str, Any] = {"name": entry.name, "args": arguments_object(entry.arguments)}
        if not entry.call_id.startswith(_ASSIGNED_PREFIX):
            function["id"] = entry.call_id  # an id Gemini gave us goes back; ours stay local
        part: dict[str, Any] = {"functionCall": function}
        signature = self.signatures.pop(entry.call_id, None)
        if signature:
            part["thoughtSignature"] = signature
        self.add("model", [part])

    def result(self, entry: ToolResultEntry) -> None:
        key = "error" if entry.is_error else "output"
        function: dict[str, Any] = {"name": self.names.get(entry.call_id, "tool"), "response": {key: entry.output}}
        if not entry.call_id.startswith(_ASSIGNED_PREFIX):
            function["id"] = entry.call_id
        parts: list[dict[str, Any]] = [{"functionResponse": function}]
        images = [p for p in entry.parts or () if isinstance(p, ImagePart)]
        parts += [_part(p, include_images=self.include_images) for p in images]
        self.add("user", parts)


def entries_to_gemini(
    entries: Sequence[TranscriptEntry], *, include_images: bool = True
) -> tuple[list[str], list[dict[str, Any]]]:
    """Map entries to (``systemInstruction`` texts, ``contents``).

    Leading system entries become the system instruction; a later one is sent as user text.
    Assistant entries become ``model`` parts (with their thought signatures back in place), tool
    results ``functionResponse`` parts named after their call, and consecutive same-role entries
    share one content, as the API requires for parallel calls and their results.
    """
    system: list[str] = []
    out = _Contents(include_images)
    head = True
    for entry in entries:
        if head and isinstance(entry, InputEntry) and entry.role == "system":
            if entry.text:
                system.append(entry.text)
            continue
        head = False
        if isinstance(entry, InputEntry):
            out.signatures = {}
            out.add("user", _parts(entry.content, include_images=include_images))
        elif isinstance(entry, ReasoningEntry):
            out.reasoning(entry)
        elif isinstance(entry, AssistantTextEntry):
            out.text(entry)
        elif isinstance(entry, ToolCallEntry):
            out.call(entry)
        elif isinstance(entry, ToolResultEntry):
            out.result(entry)
    return system, out.items


# --------------------------------------------------------------------------- response parsing


class GeminiChunkParser:
    """Turns ``GenerateContentResponse`` chunks into deltas.

    ``salt`` (derived from the request) makes assigned call ids unique per turn and identical
    when the same request is made again.
    """

    def __init__(self, provider: GeminiProvider, *, salt: str) -> None:
        self._provider = provider
        self._salt = salt
        self._calls = 0
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}
        self._thoughts: list[str] = []
        self._signatures: list[dict[str, str]] = []
        self._saw_text = False

    def feed(self, data: str) -> list[ModelDelta]:
        """Parse one chunk; raise on errors and blocks, return the deltas it carries."""
        try:
            chunk = json.loads(data)
        except ValueError:
            raise self._provider._error(f"unreadable stream chunk: {error_body_text(data)}", retryable=True) from None
        if isinstance(chunk, list) and all(isinstance(c, dict) for c in chunk):
            # Without ``alt=sse`` (a proxy that dropped the query) the API answers one JSON array.
            return [delta for c in chunk for delta in self.feed(json.dumps(c))]
        if not isinstance(chunk, dict):
            raise self._provider._error(f"unexpected stream chunk: {error_body_text(data)}", retryable=True)
        if isinstance(chunk.get("error"), dict):
            status = chunk["error"].get("code")
            raise self._provider._map_error(status if isinstance(status, int) else 500, chunk, data)
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            reason = str(feedback["blockReason"])
            detail = feedback.get("blockReasonMessage")
            raise self._blocked(f"the prompt was blocked ({reason})" + (f": {detail}" if detail else ""), reason)
        if isinstance(chunk.get("usageMetadata"), dict):
            self._usage = chunk["usageMetadata"]
        candidates = chunk.get("candidates") or []
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        return self._candidate(candidate) if isinstance(candidate, dict) else []

    def _candidate(self, candidate: dict[str, Any]) -> list[ModelDelta]:
        out: list[ModelDelta] = []
        content = candidate.get("content") or {}
        for part in content.get("parts") or () if isinstance(content, dict) else ():
            if isinstance(part, dict):
                out += self._part(part)
        finish = candidate.get("finishReason")
        if isinstance(finish, str) and finish:
            if finish in _BLOCKED:
                detail = candidate.get("finishMessage")
                raise self._blocked(
                    f"the response was stopped by the safety system ({finish})" + (f": {detail}" if detail else ""),
                    finish,
                )
            if finish in _RETRY_FINISH and not self._calls and not self._saw_text:
                raise self._provider._error(
                    f"the model produced no usable answer (finish reason {finish})", retryable=True
                )
            self._finish = finish
        return out

    def _blocked(self, message: str, reason: str) -> ProviderError:
        return self._provider._error(
            message,
            hint="rephrase the request, or review the safety_settings passed to GeminiProvider "
            f"(block reason {reason}); retrying the same prompt will be blocked again",
        )

    def _part(self, part: dict[str, Any]) -> list[ModelDelta]:
        signature = part.get("thoughtSignature")
        if isinstance(part.get("functionCall"), dict):
            return self._call(part["functionCall"], signature)
        text = part.get("text")
        if not isinstance(text, str):
            return []
        if part.get("thought"):
            self._thoughts.append(text)  # thought parts are not sent back, so neither is their signature
            return [ReasoningDelta(text)] if text else []
        if isinstance(signature, str) and signature and not self._saw_text:
            self._signatures.append({"signature": signature, "call_id": "text"})
        self._saw_text = self._saw_text or bool(text)
        return [TextDelta(text)] if text else []

    def _call(self, call: dict[str, Any], signature: Any) -> list[ModelDelta]:
        index = self._calls
        self._calls += 1
        name = str(call.get("name") or "")
        args = call.get("args")
        arguments = json.dumps(args if isinstance(args, dict) else {}, ensure_ascii=False, sort_keys=True)
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            digest = hashlib.sha256(f"{self._salt}:{index}:{name}:{arguments}".encode()).hexdigest()[:16]
            call_id = f"{_ASSIGNED_PREFIX}{digest}"
        if isinstance(signature, str) and signature:
            self._signatures.append({"signature": signature, "call_id": call_id})
        return [ToolCallDelta(index=index, call_id=call_id, name=name, arguments=arguments)]

    def finish(self) -> list[ModelDelta]:
        """End of stream: the reasoning entry, usage and finish reason (or a cut-stream error)."""
        if self._finish is None:
            raise self._provider._error(
                "stream ended without a finish reason (connection cut mid-response)", retryable=True
            )
        out: list[ModelDelta] = []
        usage = self._usage
        thinking = as_int(usage.get("thoughtsTokenCount"))
        if self._thoughts or self._signatures:
            meta: dict[str, Any] = {"signatures": self._signatures}
            if thinking:
                meta["reasoning_tokens"] = thinking
            entry = ReasoningEntry(content="".join(self._thoughts), provider=PROVIDER_TAG, metadata=meta)
            out.append(EntryCompletedDelta(entry))
        if usage:
            out.append(
                UsageDelta(
                    Usage(
                        input_tokens=as_int(usage.get("promptTokenCount"))
                        + as_int(usage.get("toolUsePromptTokenCount")),
                        output_tokens=as_int(usage.get("candidatesTokenCount")) + thinking,
                        cache_read_tokens=as_int(usage.get("cachedContentTokenCount")),
                    )
                )
            )
        reason = "tool_calls" if self._calls and self._finish == "STOP" else _FINISH.get(self._finish, self._finish)
        out.append(FinishDelta(reason))
        return out
