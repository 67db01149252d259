"""The chat SSE wire format: frames as ``{"event": name, "data": json}`` dicts, and their bytes.

A frame is a plain ``dict[str, str]`` (:func:`frame` makes one): the event name, and the payload
already encoded as one line of JSON. The run supervisor keeps and fans out these dicts; the
routes turn them into ``event:`` / ``data:`` lines (:func:`encode_frame`). A dict with a
``comment`` key instead is a keep-alive line (``: ...``).

Chat frames (see ``docs/web.md``): ``session``, ``snapshot``, ``run_waiting``, ``turn_started``, ``text_delta``,
``reasoning_delta``, ``output_discarded``, ``message_completed``, ``user_injected``, ``tool_call``,
``tool_result``, ``todo``, ``approval_required``, ``question``, ``handoff``, ``context_compacted``,
``retrying``, ``error``, ``refs``, ``timing``, ``done`` (:data:`FRAME_NAMES`). The ``*Data``
TypedDicts below describe their payloads and those of the ``GET /api/events`` notifications.

:func:`event_to_sse` translates one run event; :func:`encode_stream` translates a whole stream of
them (``Runner.stream`` output straight to frames, ending with ``done`` or a terminal ``error``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pydantic's own dependency
    from typing_extensions import NotRequired

from .. import events
from ..messages import Usage
from ..parts import FilePart, ImagePart, TextPart
from ..transcript import AssistantTextEntry, ToolCallEntry, TranscriptEntry, entry_to_dict, to_json_safe
from ..types import JsonObject, JsonValue
from .run_errors import run_error_code

if TYPE_CHECKING:
    from fastapi.responses import StreamingResponse

__all__ = [
    "FRAME_NAMES",
    "KEEPALIVE",
    "KEEPALIVE_FRAME",
    "ConfigChangedData",
    "ContextCompactedData",
    "DeltaData",
    "DoneData",
    "EmptyData",
    "EncodedStream",
    "ErrorData",
    "LegFrame",
    "LegTiming",
    "MessageCompletedData",
    "RefsData",
    "RetryingData",
    "RunFinishedData",
    "RunStartedData",
    "SessionCreatedData",
    "SessionData",
    "SessionRetitledData",
    "SnapshotData",
    "TimingData",
    "TodoData",
    "ToolCallData",
    "ToolResultData",
    "TurnStartedData",
    "UserInjectedData",
    "UserTurnRefs",
    "encode_frame",
    "encode_stream",
    "error_data",
    "event_stream",
    "event_to_sse",
    "frame",
    "frame_data",
    "message_payload",
    "usage_dict",
]

FRAME_NAMES = (
    "session",
    "snapshot",
    "run_waiting",
    "turn_started",
    "text_delta",
    "reasoning_delta",
    "output_discarded",
    "message_completed",
    "user_injected",
    "tool_call",
    "tool_result",
    "approval_required",
    "question",
    "todo",
    "handoff",
    "context_compacted",
    "retrying",
    "error",
    "refs",
    "timing",
    "done",
)
"""Every frame the chat stream sends (``static/frames.js`` lists the same names; a test checks)."""

KEEPALIVE = b": keep-alive\n\n"
KEEPALIVE_FRAME: dict[str, str] = {"comment": "keep-alive"}
"""The frame a stream yields while nothing happens (encoded as :data:`KEEPALIVE`)."""
KEEPALIVE_SECONDS = 15.0


# --------------------------------------------------------------------------- payloads


class SessionData(TypedDict):
    """``session``: the first frame of a chat stream."""

    session_id: str
    title: NotRequired[str | None]


class SnapshotData(TypedDict):
    """``snapshot``: the completed turns so far (the prologue of a re-attach)."""

    session_id: str
    status: str
    entries: list[JsonObject]
    transcript: NotRequired[list[JsonObject]]
    run_id: NotRequired[str]
    resumed: NotRequired[bool]


class DeltaData(TypedDict):
    """``text_delta`` / ``reasoning_delta``: a piece of streamed text."""

    delta: str


class EmptyData(TypedDict):
    """``output_discarded``: no payload."""


class MessageCompletedData(TypedDict):
    """``message_completed``: one assistant turn, assembled."""

    message: JsonObject


class UserInjectedData(TypedDict):
    """``user_injected``: a steering message the run took in."""

    content: str
    turn: int


class ToolCallData(TypedDict):
    """``tool_call`` / ``approval_required``: the call, its ``arguments`` the raw JSON string."""

    id: str
    name: str
    arguments: str


class _ToolResultRequired(TypedDict):
    id: str
    name: str
    result: JsonValue
    is_error: bool


class ToolResultData(_ToolResultRequired, total=False):
    """``tool_result``: the raw (JSON-safe) result, its text ``output`` and image stubs."""

    images: list[JsonObject]
    output: str


class TodoData(TypedDict):
    """``todo``: a structured todo update, in place of that call's ``tool_result``."""

    call_id: str
    name: str
    todos: list[JsonObject]


class TurnStartedData(TypedDict):
    """``turn_started``: the turn number and the agent taking it."""

    turn: int
    agent: str


class ContextCompactedData(TypedDict):
    """``context_compacted``: a compaction notice (the transcript itself is untouched)."""

    session_id: str | None
    reason: str
    reactive: bool
    summary: str | None
    tokens_before: int | None
    tokens_after: int | None
    detail: list[str]
    entries_before: NotRequired[int]
    entries_after: NotRequired[int]


class _ErrorRequired(TypedDict):
    type: str
    message: str
    code: str


class ErrorData(_ErrorRequired, total=False):
    """``error``: a failed tool call (``scope: "tool"``) or the run's terminal failure."""

    status_code: int
    retryable: bool
    hint: str
    status: int
    scope: str
    id: str | None
    run_id: str
    resumable: bool


class RetryingData(TypedDict):
    """``retrying``: a transient model failure; attempt ``attempt + 1`` follows in ``delay`` seconds."""

    attempt: int
    max_attempts: int
    delay: float
    message: str
    reason: NotRequired[str]


class DoneData(TypedDict):
    """``done``: terminal success (``stopped``: the user stopped the run)."""

    output: JsonValue
    usage: dict[str, int]
    run_id: NotRequired[str]
    stopped: NotRequired[bool]


class RefsData(TypedDict):
    """``refs``: the refs of the user messages the finished run holds, in order."""

    refs: list[str]


class TimingData(TypedDict):
    """``timing``: when the run's segment finished (epoch seconds) and how long it took."""

    finished_at: float
    duration: float


class RunStartedData(TypedDict):
    """``run_started`` on ``GET /api/events``."""

    session_id: str
    run_id: str
    agent: str
    source: str


class RunFinishedData(TypedDict):
    """``run_finished`` on ``GET /api/events``."""

    session_id: str
    run_id: str
    status: str
    error: str | None
    source: str


class SessionCreatedData(TypedDict):
    """``session_created`` on ``GET /api/events`` (``session``: the whole chat row)."""

    session_id: str
    agent: str | None
    title: str | None
    session: NotRequired[JsonObject]


class SessionRetitledData(TypedDict):
    """``session_retitled`` on ``GET /api/events``: a model gave the chat its title."""

    session_id: str
    title: str | None


class ConfigChangedData(TypedDict):
    """``config_changed`` on ``GET /api/events``: the served model changed; refetch ``/api/config``."""

    configured: bool
    model: str
    profile_id: str
    name: str


@dataclass(frozen=True, slots=True)
class UserTurnRefs:
    """What the run just stored, told before ``done``: the refs of its user messages."""

    refs: list[str]


@dataclass(frozen=True, slots=True)
class LegTiming:
    """What the run just stored, told before ``done``: its finish time and duration in seconds."""

    finished_at: float
    duration: float


LegFrame = UserTurnRefs | LegTiming
"""The closing facts of a stored run that are not run events (``refs`` and ``timing`` frames)."""


# --------------------------------------------------------------------------- frames


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
"""What :func:`frame` encodes with (one encoder for every frame, not one per call)."""


def frame(event: str, data: Mapping[str, object], default: Callable[[object], object] | None = None) -> dict[str, str]:
    """One frame: ``{"event": event, "data": <data as one line of JSON>}``.

    ``default`` converts what JSON cannot encode; without it such a value is written as its ``str``.
    """
    if default is None:
        return {"event": event, "data": _JSON.encode(data)}
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=default)
    return {"event": event, "data": payload}


def _delta_frame(event: str, delta: str) -> dict[str, str]:
    """``frame(event, {"delta": delta})``, written out: it runs once per streamed token."""
    return {"event": event, "data": '{"delta":' + _JSON.encode(delta) + "}"}


def frame_data(sse: Mapping[str, str]) -> Any:
    """The decoded payload of a frame made by :func:`frame`."""
    return json.loads(sse["data"])


def encode_frame(sse: Mapping[str, str]) -> bytes:
    """A frame as bytes on the wire (a ``comment`` frame is a ``:`` line)."""
    if "comment" in sse:
        return f": {sse['comment']}\n\n".encode()
    return f"event: {sse['event']}\ndata: {sse['data']}\n\n".encode()


@runtime_checkable
class EncodedStream(Protocol):
    """Frames that can also be had as bytes, several frames to a write (see :func:`event_stream`)."""

    def chunks(self) -> AsyncIterator[bytes]:
        """The frames' bytes: each chunk is the frames that were ready when it was made."""
        ...


async def encode_frames(frames: AsyncIterable[Mapping[str, str]]) -> AsyncIterator[bytes]:
    """:func:`encode_frame` of every frame of ``frames``."""
    async for item in frames:
        yield encode_frame(item)


def event_stream(frames: AsyncIterable[Mapping[str, str]]) -> StreamingResponse:
    """An SSE response of ``frames`` that proxies must not buffer.

    An :class:`EncodedStream` is written through its ``chunks()``: the frames queued while the
    response waited go out in one write, not one write each.
    """
    from fastapi.responses import StreamingResponse  # only the routes need it, not the wire format

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    body = frames.chunks() if isinstance(frames, EncodedStream) else encode_frames(frames)
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


if sys.version_info >= (3, 11):

    async def next_or_keepalive(queue: asyncio.Queue[Any]) -> Any:
        """The next item of ``queue``, or :data:`KEEPALIVE_FRAME` after :data:`KEEPALIVE_SECONDS` of quiet."""
        try:
            async with asyncio.timeout(KEEPALIVE_SECONDS):  # a timer, where wait_for would add a task
                return await queue.get()
        except TimeoutError:
            return KEEPALIVE_FRAME

else:

    async def next_or_keepalive(queue: asyncio.Queue[Any]) -> Any:
        """The next item of ``queue``, or :data:`KEEPALIVE_FRAME` after :data:`KEEPALIVE_SECONDS` of quiet."""
        try:
            return await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
        except asyncio.TimeoutError:
            return KEEPALIVE_FRAME


# --------------------------------------------------------------------------- payload builders


def usage_dict(usage: Usage, *, last_input_tokens: int | None = None) -> dict[str, int]:
    """Token usage as the ``done`` frame carries it: input, output, cache read and write tokens and
    their ``total_tokens``; ``last_input_tokens`` (the last model call's prompt size) when known."""
    out = {**usage.to_dict(), "total_tokens": usage.total_tokens}
    if last_input_tokens is not None:
        out["last_input_tokens"] = last_input_tokens
    return out


def message_payload(entries: list[TranscriptEntry]) -> JsonObject:
    """The assistant message a ``message_completed`` frame carries (text, calls and raw entries)."""
    text = "".join(e.content for e in entries if isinstance(e, AssistantTextEntry))
    calls = [
        {"id": e.call_id, "name": e.name, "arguments": e.arguments} for e in entries if isinstance(e, ToolCallEntry)
    ]
    return {"role": "assistant", "content": text, "tool_calls": calls, "entries": [entry_to_dict(e) for e in entries]}


def _error_message(error: BaseException) -> str:
    return str(getattr(error, "message", None) or error)


def error_data(ev: events.ToolCallFailed | events.RunFailed) -> ErrorData:
    """The ``error`` payload of a failed tool call or a failed run.

    ``code`` classifies it (``tool_error`` for a tool, else :func:`~lovia.web.run_errors.run_error_code`);
    a provider error adds its HTTP ``status_code`` and whether it is ``retryable``, and any lovia
    error its ``hint``.
    """
    error = ev.error
    if isinstance(ev, events.ToolCallFailed):
        return {
            "type": type(error).__name__,
            "message": _error_message(error),
            "code": "tool_error",
            "scope": "tool",
            "id": ev.call.id if ev.call else None,
        }
    data: ErrorData = {"type": type(error).__name__, "message": _error_message(error), "code": run_error_code(error)}
    hint = getattr(error, "hint", None)
    if hint:
        data["hint"] = str(hint)
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        data["status"] = status  # the page's name for it
        data["status_code"] = status
    retryable = getattr(error, "retryable", None)
    if isinstance(retryable, bool):
        data["retryable"] = retryable
    return data


def _is_todo_list(value: Any) -> bool:
    from ..plugins.todo import TodoItem

    return isinstance(value, list) and all(isinstance(item, TodoItem) for item in value)


def _tool_result(event: events.ToolCallCompleted) -> dict[str, str]:
    result = to_json_safe(event.result)
    if not event.is_error and _is_todo_list(event.result) and (event.result or event.call.name == "todo_write"):
        # the Todo plugin's write: a structured update in place of the tool_result (the page's todo panel)
        todo: TodoData = {"call_id": event.call.id, "name": event.call.name, "todos": result}
        return frame("todo", todo)
    if event.is_error:
        # A failed call has no value: its result is the error text (what the model was told).
        result = event.output or (str(event.result) if event.result is not None else "tool call failed")
    data: ToolResultData = {
        "id": event.call.id,
        "name": event.call.name,
        "result": result if result is not None or event.result is None else str(event.result),
        "is_error": event.is_error,
        "output": event.output,
    }
    images = _image_stubs(event.result)
    if images:
        data["images"] = images
    return frame("tool_result", data)


def _image_stubs(result: Any) -> list[JsonObject]:
    """``{index, mime_type}`` of each image a tool returned as content parts (a part, or a list of
    them): the positions ``GET /api/sessions/{id}/tool-images/{call_id}/{index}`` serves."""
    if isinstance(result, (ImagePart, FilePart)):
        parts: list[Any] = [result]
    elif isinstance(result, list) and result and all(isinstance(p, (TextPart, ImagePart, FilePart)) for p in result):
        parts = result
    else:
        return []
    images = [p for p in parts if isinstance(p, ImagePart)]
    return [{"index": i, "mime_type": p.mime_type} for i, p in enumerate(images)]  # counted among images, from 0


_REASONS = ("connection failed", "timed out", "connection cut")


def _retry_reason(error: BaseException) -> str:
    """Short words for "why": the HTTP status, else a transport failure, else the error type."""
    status = getattr(error, "status_code", None)
    if status is not None:
        return str(status)
    text = str(error)
    return next((word for word in _REASONS if word in text), type(error).__name__)


def _retrying(event: events.ModelRetrying) -> dict[str, str]:
    data: RetryingData = {
        "attempt": event.attempt,
        "max_attempts": event.max_attempts,
        "delay": round(event.delay, 2),
        "reason": _retry_reason(event.error),
        "message": _error_message(event.error),
    }
    return frame("retrying", data)


def _call(event: events.ToolCallStarted | events.ApprovalRequired) -> ToolCallData:
    return {"id": event.call.id, "name": event.call.name, "arguments": event.call.arguments}


def _compacted(event: events.ContextCompacted) -> dict[str, str]:
    notice = event.notice
    data: ContextCompactedData = {
        "session_id": event.session_id,
        "reason": notice.reason,
        "reactive": notice.reactive,
        "summary": notice.summary,
        "tokens_before": notice.tokens_before,
        "tokens_after": notice.tokens_after,
        "detail": list(notice.detail),
        "entries_before": event.entries_before,
        "entries_after": event.entries_after,
    }
    return frame("context_compacted", data)


def event_to_sse(ev: events.Event | LegFrame) -> dict[str, str] | None:  # noqa: C901  (one branch per event type)
    """The frame of one run event (``None`` for events a chat stream does not carry).

    ``RunCompleted`` becomes ``done`` and ``RunFailed`` a terminal ``error``; the run supervisor
    frames its runs' ends itself (it tells a user stop and a shutdown from a failure), so these
    two serve streams encoded straight from ``Runner.stream``. A :class:`UserTurnRefs` or
    :class:`LegTiming` becomes ``refs`` / ``timing``.
    """
    if isinstance(ev, events.TextDelta):
        return _delta_frame("text_delta", ev.delta)
    if isinstance(ev, events.ReasoningDelta):
        return _delta_frame("reasoning_delta", ev.delta)
    if isinstance(ev, events.OutputDiscarded):
        return frame("output_discarded", EmptyData())
    if isinstance(ev, events.TurnStarted):
        return frame("turn_started", TurnStartedData(turn=ev.turn, agent=ev.agent.name))
    if isinstance(ev, events.MessageCompleted):
        return frame("message_completed", MessageCompletedData(message=message_payload(list(ev.entries))))
    if isinstance(ev, events.UserMessageInjected):
        return frame("user_injected", {"content": to_json_safe(ev.content), "turn": ev.turn})
    if isinstance(ev, events.ToolCallStarted):
        return frame("tool_call", _call(ev))
    if isinstance(ev, events.ToolCallCompleted):
        return _tool_result(ev)
    if isinstance(ev, events.ApprovalRequired):
        return frame("approval_required", _call(ev))
    if isinstance(ev, events.HandoffOccurred):
        return frame("handoff", {"from": ev.from_agent.name, "to": ev.to_agent.name})
    if isinstance(ev, events.ContextCompacted):
        return _compacted(ev)
    if isinstance(ev, events.ModelRetrying):
        return _retrying(ev)
    if isinstance(ev, (events.ToolCallFailed, events.RunFailed)):
        return frame("error", error_data(ev))
    if isinstance(ev, events.RunCompleted):
        done: DoneData = {
            "output": to_json_safe(ev.result.output),
            "usage": usage_dict(ev.result.usage, last_input_tokens=ev.result.last_input_tokens),
        }
        return frame("done", done)
    if isinstance(ev, UserTurnRefs):
        return frame("refs", RefsData(refs=list(ev.refs)))
    if isinstance(ev, LegTiming):
        return frame("timing", TimingData(finished_at=ev.finished_at, duration=ev.duration))
    return None


async def encode_stream(source: AsyncIterator[events.Event]) -> AsyncIterator[dict[str, str]]:
    """The frames of a stream of run events, in order (events without a frame are skipped).

    Fed a ``RunHandle`` it ends with the run's ``done`` or terminal ``error`` frame. (The run
    supervisor frames its own runs' events with :func:`event_to_sse`, and their ends itself.)
    """
    async for ev in source:
        sse = event_to_sse(ev)
        if sse is not None:
            yield sse
