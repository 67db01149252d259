"""Wire formats checked against the vendors' own Python SDK types (test-only dependencies).

Two directions:

- **Requests we send** are validated against the SDKs' request types: ``openai``'s
  ``ResponseCreateParamsStreaming`` / ``CompletionCreateParamsStreaming`` and ``anthropic``'s
  ``MessageCreateParamsStreaming`` (TypedDicts, validated by pydantic with unknown keys
  forbidden at every level), and ``google-genai``'s pydantic models (which forbid unknown keys
  themselves) for each top-level field of a Gemini body. A field we misname fails.
- **Streams we parse** are built from the SDKs' response types (``ResponseTextDeltaEvent``,
  ``GenerateContentResponse``...), serialised the way the vendor serialises them, so a field
  our parser reads under the wrong name reads nothing and the test fails.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import pydantic
from typing_extensions import is_typeddict

# --------------------------------------------------------------------------- request validation


@cache
def _forbid_extra(package: str) -> None:
    """Make every TypedDict in ``package`` reject unknown keys when pydantic validates it."""
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and is_typeddict(value) and value.__module__.startswith(package):
                value.__pydantic_config__ = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)  # type: ignore[attr-defined]


@cache
def _adapter(kind: str) -> pydantic.TypeAdapter[Any]:
    if kind == "responses":
        for package in ("openai.types.responses", "openai.types.shared_params"):
            _forbid_extra(package)
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

        return pydantic.TypeAdapter(ResponseCreateParamsStreaming)
    if kind == "chat":
        for package in ("openai.types.chat", "openai.types.shared_params"):
            _forbid_extra(package)
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

        return pydantic.TypeAdapter(CompletionCreateParamsStreaming)
    if kind == "anthropic":
        _forbid_extra("anthropic.types")
        from anthropic.types.message_create_params import MessageCreateParamsStreaming

        return pydantic.TypeAdapter(MessageCreateParamsStreaming)
    raise ValueError(kind)


def _drain(value: Any) -> None:
    """Consume every lazily validated iterable in a validation result.

    The SDKs type many fields as ``Iterable[...]`` (Anthropic's ``messages``, OpenAI chat's
    ``messages``); pydantic validates those items only as they are iterated, so without this
    walk a wrong field inside a message would pass.
    """
    if isinstance(value, dict):
        for item in value.values():
            _drain(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _drain(item)
    elif not isinstance(value, (str, bytes, bytearray)) and hasattr(value, "__next__"):
        for item in value:
            _drain(item)


def _validate(kind: str, body: dict[str, Any]) -> None:
    _drain(_adapter(kind).validate_python(body))


def check_responses_request(body: dict[str, Any]) -> None:
    """Raise ``pydantic.ValidationError`` unless ``body`` is a valid streaming Responses request."""
    _validate("responses", body)


# ``reasoning_content`` on assistant messages is DeepSeek's extension of chat completions, sent
# only to compatible hosts (``replay_reasoning``); the official SDK does not list it.
CHAT_TOLERATED_MESSAGE_FIELDS = frozenset({"reasoning_content"})


def check_chat_request(body: dict[str, Any]) -> None:
    """Raise unless ``body`` is a valid streaming chat-completions request."""
    messages = []
    for message in body.get("messages") or []:
        extra = CHAT_TOLERATED_MESSAGE_FIELDS & set(message)
        for key in extra:
            assert message.get("role") == "assistant" and isinstance(message[key], str), key
        messages.append({k: v for k, v in message.items() if k not in extra})
    _validate("chat", {**body, "messages": messages})


# Sampling fields lovia's contract sends "as is" (ModelSettings.temperature / top_p) that the
# installed anthropic SDK no longer lists in MessageCreateParams. They are the only tolerated
# difference; tests/providers/test_sdk_wire.py pins that list so a new one cannot slip in.
ANTHROPIC_TOLERATED = frozenset({"temperature", "top_p"})


def check_anthropic_request(body: dict[str, Any]) -> None:
    """Raise unless ``body`` is a valid streaming Messages request (see ``ANTHROPIC_TOLERATED``)."""
    from anthropic.types.message_create_params import MessageCreateParamsBase

    listed = set(MessageCreateParamsBase.__annotations__) | {"stream"}
    tolerated = {k for k in body if k in ANTHROPIC_TOLERATED and k not in listed}
    for key in tolerated:
        assert isinstance(body[key], (int, float)), f"{key} must be a number"
    _validate("anthropic", {k: v for k, v in body.items() if k not in tolerated})


_GEMINI_FIELDS = {
    "contents": ("Content", True),
    "systemInstruction": ("Content", False),
    "tools": ("Tool", True),
    "toolConfig": ("ToolConfig", False),
    "generationConfig": ("GenerationConfig", False),
    "safetySettings": ("SafetySetting", True),
    "cachedContent": (None, False),
}


def check_gemini_request(body: dict[str, Any]) -> None:
    """Raise unless every field of a ``generateContent`` body parses as the SDK's type for it.

    The JSON round trip matters: the SDK decodes ``inlineData.data`` from base64 only from JSON.
    """
    from google.genai import types

    unknown = set(body) - set(_GEMINI_FIELDS)
    assert not unknown, f"fields the Gemini API does not have: {sorted(unknown)}"
    assert body.get("contents"), "contents is required"
    for key, value in body.items():
        type_name, is_list = _GEMINI_FIELDS[key]
        if type_name is None:
            assert isinstance(value, str)
            continue
        model = getattr(types, type_name)
        for item in value if is_list else [value]:
            model.model_validate_json(json.dumps(item))


# --------------------------------------------------------------------------- stream builders


def assert_sdk_shaped(model: pydantic.BaseModel, where: str = "") -> None:
    """Fail when ``model`` (validated from our JSON) holds a field its SDK type does not declare.

    The SDKs' response models accept unknown keys silently; walking ``model_extra`` turns a
    misnamed field in a hand-written stream into a failure.
    """
    extra = model.model_extra or {}
    assert not extra, f"{type(model).__name__}{where}: fields the SDK type does not have: {sorted(extra)}"
    for name in type(model).model_fields:
        _walk_models(getattr(model, name), f"{where}.{name}")


def _walk_models(value: Any, where: str) -> None:
    if isinstance(value, pydantic.BaseModel):
        assert_sdk_shaped(value, where)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk_models(item, f"{where}[{i}]")


@cache
def _event_adapter(kind: str) -> pydantic.TypeAdapter[Any]:
    if kind == "chat":
        from openai.types.chat import ChatCompletionChunk

        return pydantic.TypeAdapter(ChatCompletionChunk)
    from anthropic.types import RawMessageStreamEvent

    return pydantic.TypeAdapter(RawMessageStreamEvent)


def check_chat_chunk(chunk: dict[str, Any]) -> None:
    """Fail unless ``chunk`` is a ``ChatCompletionChunk`` with no undeclared field."""
    assert_sdk_shaped(_event_adapter("chat").validate_python(chunk))


def check_anthropic_event(event: dict[str, Any]) -> None:
    """Fail unless ``event`` is a ``RawMessageStreamEvent`` with no undeclared field (``ping`` aside)."""
    if event.get("type") == "ping":
        return  # a keep-alive the SDK skips before typing events
    assert_sdk_shaped(_event_adapter("anthropic").validate_python(event))


def sse(events: Iterable[pydantic.BaseModel], *, with_event_names: bool = True) -> bytes:
    """Frame SDK event models as SSE, ``event:`` line = the model's ``type`` (as OpenAI sends)."""
    out = []
    for event in events:
        data = event.model_dump_json(exclude_unset=True)
        name = getattr(event, "type", None)
        out.append((f"event: {name}\n" if with_event_names and name else "") + f"data: {data}\n\n")
    return "".join(out).encode()


class ResponsesStream:
    """Builds a Responses API event stream from ``openai.types.responses`` models."""

    def __init__(self, response_id: str = "resp_test", model: str = "m") -> None:
        self.response_id = response_id
        self.model = model
        self.events: list[pydantic.BaseModel] = []
        self.output: list[Any] = []
        self._seq = 0

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _response(self, status: str, **extra: Any) -> Any:
        from openai.types.responses import Response

        return Response(
            id=self.response_id,
            created_at=0,
            model=self.model,
            object="response",
            output=list(self.output) if status != "in_progress" else [],
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
            status=status,
            **extra,
        )

    def created(self) -> ResponsesStream:
        from openai.types.responses import ResponseCreatedEvent, ResponseInProgressEvent

        self.events.append(
            ResponseCreatedEvent(
                type="response.created", sequence_number=self._next(), response=self._response("in_progress")
            )
        )
        self.events.append(
            ResponseInProgressEvent(
                type="response.in_progress", sequence_number=self._next(), response=self._response("in_progress")
            )
        )
        return self

    def reasoning(self, item_id: str, summary: Sequence[str], *, encrypted: str | None = "enc-blob") -> ResponsesStream:
        from openai.types.responses import (
            ResponseOutputItemAddedEvent,
            ResponseOutputItemDoneEvent,
            ResponseReasoningItem,
            ResponseReasoningSummaryTextDeltaEvent,
        )
        from openai.types.responses.response_reasoning_item import Summary

        index = len(self.output)
        empty = ResponseReasoningItem(id=item_id, type="reasoning", summary=[])
        self.events.append(
            ResponseOutputItemAddedEvent(
                type="response.output_item.added", sequence_number=self._next(), output_index=index, item=empty
            )
        )
        for part, text in enumerate(summary):
            for i in range(0, len(text), 5):
                self.events.append(
                    ResponseReasoningSummaryTextDeltaEvent(
                        type="response.reasoning_summary_text.delta",
                        sequence_number=self._next(),
                        item_id=item_id,
                        output_index=index,
                        summary_index=part,
                        delta=text[i : i + 5],
                    )
                )
        done = ResponseReasoningItem(
            id=item_id,
            type="reasoning",
            summary=[Summary(type="summary_text", text=t) for t in summary],
            encrypted_content=encrypted,
        )
        self.output.append(done)
        self.events.append(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done", sequence_number=self._next(), output_index=index, item=done
            )
        )
        return self

    def message(self, text: str, *, item_id: str = "msg_1", piece: int = 3) -> ResponsesStream:
        from openai.types.responses import (
            ResponseContentPartAddedEvent,
            ResponseOutputItemAddedEvent,
            ResponseOutputItemDoneEvent,
            ResponseOutputMessage,
            ResponseOutputText,
            ResponseTextDeltaEvent,
            ResponseTextDoneEvent,
        )

        index = len(self.output)
        started = ResponseOutputMessage(id=item_id, type="message", role="assistant", status="in_progress", content=[])
        self.events.append(
            ResponseOutputItemAddedEvent(
                type="response.output_item.added", sequence_number=self._next(), output_index=index, item=started
            )
        )
        self.events.append(
            ResponseContentPartAddedEvent(
                type="response.content_part.added",
                sequence_number=self._next(),
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=ResponseOutputText(type="output_text", text="", annotations=[]),
            )
        )
        for i in range(0, len(text), piece):
            self.events.append(
                ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    sequence_number=self._next(),
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=text[i : i + piece],
                    logprobs=[],
                )
            )
        self.events.append(
            ResponseTextDoneEvent(
                type="response.output_text.done",
                sequence_number=self._next(),
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
        )
        done = ResponseOutputMessage(
            id=item_id,
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        self.output.append(done)
        self.events.append(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done", sequence_number=self._next(), output_index=index, item=done
            )
        )
        return self

    def calls(self, calls: Sequence[tuple[str, str, str]], *, interleave: bool = True) -> ResponsesStream:
        """Function calls ``(call_id, name, arguments)``; argument fragments interleaved by item."""
        from openai.types.responses import (
            ResponseFunctionCallArgumentsDeltaEvent,
            ResponseFunctionCallArgumentsDoneEvent,
            ResponseFunctionToolCall,
            ResponseOutputItemAddedEvent,
            ResponseOutputItemDoneEvent,
        )

        first = len(self.output)
        for offset, (call_id, name, _) in enumerate(calls):
            item = ResponseFunctionToolCall(
                type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments="", status="in_progress"
            )
            self.events.append(
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added",
                    sequence_number=self._next(),
                    output_index=first + offset,
                    item=item,
                )
            )
        pieces = [[args[i : i + 4] for i in range(0, len(args), 4)] for _, _, args in calls]
        steps = max((len(p) for p in pieces), default=0)
        order = (
            [(o, s) for s in range(steps) for o in range(len(calls))]
            if interleave
            else [(o, s) for o in range(len(calls)) for s in range(steps)]
        )
        for offset, step in order:
            if step < len(pieces[offset]):
                self.events.append(
                    ResponseFunctionCallArgumentsDeltaEvent(
                        type="response.function_call_arguments.delta",
                        sequence_number=self._next(),
                        item_id=f"fc_{calls[offset][0]}",
                        output_index=first + offset,
                        delta=pieces[offset][step],
                    )
                )
        for offset, (call_id, name, args) in enumerate(calls):
            self.events.append(
                ResponseFunctionCallArgumentsDoneEvent(
                    type="response.function_call_arguments.done",
                    sequence_number=self._next(),
                    item_id=f"fc_{call_id}",
                    output_index=first + offset,
                    arguments=args,
                    name=name,
                )
            )
            done = ResponseFunctionToolCall(
                type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments=args, status="completed"
            )
            self.output.append(done)
            self.events.append(
                ResponseOutputItemDoneEvent(
                    type="response.output_item.done",
                    sequence_number=self._next(),
                    output_index=first + offset,
                    item=done,
                )
            )
        return self

    def completed(
        self,
        *,
        input_tokens: int = 30,
        output_tokens: int = 12,
        cached: int = 0,
        cache_write: int = 0,
        reasoning: int = 0,
    ) -> ResponsesStream:
        from openai.types.responses import ResponseCompletedEvent, ResponseUsage
        from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

        usage = ResponseUsage(
            input_tokens=input_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=cache_write),
            output_tokens=output_tokens,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning),
            total_tokens=input_tokens + output_tokens,
        )
        self.events.append(
            ResponseCompletedEvent(
                type="response.completed",
                sequence_number=self._next(),
                response=self._response("completed", usage=usage),
            )
        )
        return self

    def incomplete(self, reason: str = "max_output_tokens") -> ResponsesStream:
        from openai.types.responses import ResponseIncompleteEvent
        from openai.types.responses.response import IncompleteDetails

        self.events.append(
            ResponseIncompleteEvent(
                type="response.incomplete",
                sequence_number=self._next(),
                response=self._response("incomplete", incomplete_details=IncompleteDetails(reason=reason)),
            )
        )
        return self

    def failed(self, code: str, message: str) -> ResponsesStream:
        from openai.types.responses import ResponseError, ResponseFailedEvent

        self.events.append(
            ResponseFailedEvent(
                type="response.failed",
                sequence_number=self._next(),
                response=self._response("failed", error=ResponseError(code=code, message=message)),
            )
        )
        return self

    def error(self, code: str, message: str) -> ResponsesStream:
        from openai.types.responses import ResponseErrorEvent

        self.events.append(
            ResponseErrorEvent(type="error", sequence_number=self._next(), code=code, message=message, param=None)
        )
        return self

    def body(self) -> bytes:
        return sse(self.events)


# --------------------------------------------------------------------------- Gemini


def gemini_chunk(
    parts: Sequence[dict[str, Any]] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    finish_message: str | None = None,
    block_reason: str | None = None,
) -> Any:
    """One ``GenerateContentResponse`` built and validated by ``google-genai``.

    ``parts`` use the SDK's field names (``text``, ``function_call``, ``thought``,
    ``thought_signature``...); serialisation turns them into the API's camelCase.
    """
    from google.genai import types

    data: dict[str, Any] = {"model_version": "gemini-test", "response_id": "r1"}
    if parts is not None or finish is not None:
        candidate: dict[str, Any] = {"index": 0}
        if parts is not None:
            candidate["content"] = {"role": "model", "parts": list(parts)}
        if finish is not None:
            candidate["finish_reason"] = finish
        if finish_message is not None:
            candidate["finish_message"] = finish_message
        data["candidates"] = [candidate]
    if usage is not None:
        data["usage_metadata"] = usage
    if block_reason is not None:
        data["prompt_feedback"] = {"block_reason": block_reason}
    return types.GenerateContentResponse.model_validate(data)


def gemini_sse(chunks: Iterable[Any]) -> bytes:
    """Frame ``GenerateContentResponse`` models as the API's ``?alt=sse`` stream (camelCase JSON)."""
    out = []
    for chunk in chunks:
        data = chunk.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.append(f"data: {json.dumps(data)}\r\n\r\n")
    return "".join(out).encode()


def gemini_text_stream(text: str, *, usage: dict[str, int] | None = None, piece: int = 4) -> bytes:
    chunks = [gemini_chunk([{"text": text[i : i + piece]}]) for i in range(0, len(text), piece)]
    chunks.append(
        gemini_chunk(
            [],
            finish="STOP",
            usage=usage or {"prompt_token_count": 11, "candidates_token_count": 5, "total_token_count": 16},
        )
    )
    return gemini_sse(chunks)
