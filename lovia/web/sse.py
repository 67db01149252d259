"""The chat SSE wire format: ``event:`` name plus one ``data:`` JSON line per frame.

Frames (see ``docs/web.md``): ``session``, ``snapshot``, ``turn_started``, ``text_delta``,
``reasoning_delta``, ``output_discarded``, ``message_completed``, ``user_injected``, ``tool_call``,
``tool_result``, ``todo``, ``approval_required``, ``question``, ``handoff``, ``context_compacted``,
``retrying``, ``error``, ``refs``, ``timing``, ``done`` (:data:`FRAME_NAMES`).
Lines starting with ``:`` are keep-alives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..transcript import AssistantTextEntry, ToolCallEntry, TranscriptEntry, entry_to_dict, to_json_safe

if TYPE_CHECKING:
    from fastapi.responses import StreamingResponse

__all__ = ["FRAME_NAMES", "KEEPALIVE", "Frame", "event_stream", "event_to_frame", "live_tail", "message_payload"]

FRAME_NAMES = (
    "session",
    "snapshot",
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
KEEPALIVE_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE frame: an event name and its JSON payload."""

    event: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        """The frame as bytes on the wire."""
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"), default=str)
        return f"event: {self.event}\ndata: {payload}\n\n".encode()


async def live_tail(queue: asyncio.Queue[Frame | None]) -> AsyncIterator[bytes]:
    """Encoded frames from ``queue`` until its ``None`` end marker, with a keep-alive when idle."""
    while True:
        try:
            item = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
        except asyncio.TimeoutError:
            yield KEEPALIVE
            continue
        if item is None:
            return
        yield item.encode()


def event_stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    """An SSE response that proxies must not buffer."""
    from fastapi.responses import StreamingResponse  # only the routes need it, not the wire format

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


def message_payload(entries: list[TranscriptEntry]) -> dict[str, Any]:
    """The assistant message a ``message_completed`` frame carries (text, calls and raw entries)."""
    text = "".join(e.content for e in entries if isinstance(e, AssistantTextEntry))
    calls = [
        {"id": e.call_id, "name": e.name, "arguments": e.arguments} for e in entries if isinstance(e, ToolCallEntry)
    ]
    return {"role": "assistant", "content": text, "tool_calls": calls, "entries": [entry_to_dict(e) for e in entries]}


def _is_todo_list(value: Any) -> bool:
    from ..plugins.todo import TodoItem

    return isinstance(value, list) and all(isinstance(item, TodoItem) for item in value)


def _tool_result(event: ev.ToolCallCompleted) -> Frame:
    result = to_json_safe(event.result)
    if not event.is_error and _is_todo_list(event.result) and (event.result or event.call.name == "todo_write"):
        # the Todo plugin's write: a structured update in place of the tool_result (the page's todo panel)
        return Frame("todo", {"call_id": event.call.id, "name": event.call.name, "todos": result})
    return Frame(
        "tool_result",
        {
            "id": event.call.id,
            "name": event.call.name,
            "result": result if result is not None or event.result is None else str(event.result),
            "is_error": event.is_error,
            "output": event.output,
        },
    )


_REASONS = ("connection failed", "timed out", "connection cut")


def _retry_reason(error: BaseException) -> str:
    """Short words for "why": the HTTP status, else a transport failure, else the error type."""
    status = getattr(error, "status_code", None)
    if status is not None:
        return str(status)
    text = str(error)
    return next((word for word in _REASONS if word in text), type(error).__name__)


def _retrying(event: ev.ModelRetrying) -> Frame:
    reason = _retry_reason(event.error)
    return Frame(
        "retrying",
        {
            "attempt": event.attempt,
            "max_attempts": event.max_attempts,
            "delay": round(event.delay, 2),
            "reason": reason,
            "message": str(getattr(event.error, "message", None) or event.error),
        },
    )


def event_to_frame(event: ev.Event) -> Frame | None:  # noqa: C901  (one branch per event type)
    """Translate a run event into its wire frame (``None`` for events the page does not need).

    Terminal events (``RunCompleted``/``RunFailed``) are framed by the supervisor, which knows
    whether a failure was a user stop, a shutdown or an error.
    """
    if isinstance(event, ev.TextDelta):
        return Frame("text_delta", {"delta": event.delta})
    if isinstance(event, ev.ReasoningDelta):
        return Frame("reasoning_delta", {"delta": event.delta})
    if isinstance(event, ev.OutputDiscarded):
        return Frame("output_discarded", {})
    if isinstance(event, ev.TurnStarted):
        return Frame("turn_started", {"turn": event.turn, "agent": event.agent.name})
    if isinstance(event, ev.MessageCompleted):
        return Frame("message_completed", {"message": message_payload(list(event.entries))})
    if isinstance(event, ev.UserMessageInjected):
        return Frame("user_injected", {"content": to_json_safe(event.content), "turn": event.turn})
    if isinstance(event, ev.ToolCallStarted):
        return Frame("tool_call", {"id": event.call.id, "name": event.call.name, "arguments": event.call.arguments})
    if isinstance(event, ev.ToolCallCompleted):
        return _tool_result(event)
    if isinstance(event, ev.ApprovalRequired):
        return Frame(
            "approval_required", {"id": event.call.id, "name": event.call.name, "arguments": event.call.arguments}
        )
    if isinstance(event, ev.HandoffOccurred):
        return Frame("handoff", {"from": event.from_agent.name, "to": event.to_agent.name})
    if isinstance(event, ev.ContextCompacted):
        return Frame(
            "context_compacted",
            {"entries_before": event.entries_before, "entries_after": event.entries_after, **event.notice.to_dict()},
        )
    if isinstance(event, ev.ModelRetrying):
        return _retrying(event)
    if isinstance(event, ev.ToolCallFailed):
        message = str(getattr(event.error, "message", None) or event.error)
        return Frame(
            "error",
            {
                "type": type(event.error).__name__,
                "message": message,
                "code": "tool_error",
                "scope": "tool",
                "id": event.call.id if event.call else None,
            },
        )
    return None
