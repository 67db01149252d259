"""A chat's history as clients read it: finished runs projected onto chat messages.

``GET /api/sessions/{id}`` answers ``entries`` in this form (one dict per message, the fields of
``MessageOut`` in http-api terms): user messages carry a ``ref`` (``"<run_id>:<n>"``, the n-th
user message of that run, stable across reloads and rewinds) that rewind and fork accept; the
answer that ends a run carries the run's ``duration``; timestamps come from the timing each run
recorded. The page itself renders the stored entries (``transcript`` in the same answer), which
keep what this projection merges away (reasoning ids, raw tool values).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..messages import Message
from ..parts import ImagePart
from ..session import Segment
from ..transcript import (
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    _part_to_dict,
    entries_to_messages,
    entry_to_dict,
)

__all__ = [
    "Run",
    "Runs",
    "drop_system_entries",
    "message_to_json_dict",
    "parse_ref",
    "segment_timing",
    "segments_runs",
    "segments_to_out",
    "snapshot_views",
    "tool_image_stubs",
    "tool_result_flags",
    "user_turn_refs",
    "view_messages",
]


class Run(NamedTuple):
    """One finished run of a chat: its id, its entries and its ``(started_at, finished_at)``."""

    run_id: str | None
    entries: list[TranscriptEntry]
    timing: tuple[float, float] | None = None


Runs = list[Run]


def segment_timing(meta: dict[str, Any] | None) -> tuple[float, float] | None:
    """``(started_at, finished_at)`` as the run recorded them, or ``None`` when untimed or malformed."""
    timing = (meta or {}).get("timing")
    if not isinstance(timing, dict):
        return None
    start, end = timing.get("started_at"), timing.get("finished_at")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
        return float(start), float(end)
    return None


def segments_runs(segments: Sequence[Segment]) -> Runs:
    """The stored segments as runs."""
    return [Run(s.run_id, list(s.entries), segment_timing(s.meta)) for s in segments]


def drop_system_entries(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """The entries a reader sees: system and developer inputs are the program's, not the chat's."""
    return [e for e in entries if not (isinstance(e, InputEntry) and e.role in ("system", "developer"))]


def user_turn_refs(runs: Runs) -> list[str | None]:
    """The ``ref`` of every user message, in chat order (``None`` for a run without an id)."""
    refs: list[str | None] = []
    for run in runs:
        n = 0
        for e in run.entries:
            if isinstance(e, InputEntry) and e.role == "user":
                refs.append(f"{run.run_id}:{n}" if run.run_id else None)
                n += 1
    return refs


def parse_ref(ref: str, runs: Runs) -> int | None:
    """The index of the user message ``ref`` names among the chat's user messages, or ``None``."""
    try:
        return user_turn_refs(runs).index(ref)
    except ValueError:
        return None


def tool_image_stubs(parts: Sequence[Any] | None) -> list[dict[str, Any]]:
    """``{index, mime_type}`` for each image a tool returned (the bytes stay on the server)."""
    return [{"index": i, "mime_type": p.mime_type} for i, p in enumerate(parts or ()) if isinstance(p, ImagePart)]


def tool_result_flags(
    entries: Sequence[TranscriptEntry],
) -> tuple[set[str], dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The call ids whose result was an error, the image stubs per call id, and each call's tool name."""
    errors: set[str] = set()
    images: dict[str, list[dict[str, Any]]] = {}
    names: dict[str, str] = {}
    for e in entries:
        if isinstance(e, ToolCallEntry):
            names[e.call_id] = e.name
        elif isinstance(e, ToolResultEntry):
            if e.is_error:
                errors.add(e.call_id)
            stubs = tool_image_stubs(e.parts)
            if stubs:
                images[e.call_id] = stubs
    return errors, images, names


def message_to_json_dict(
    m: Message,
    *,
    errors: set[str] | None = None,
    images: dict[str, list[dict[str, Any]]] | None = None,
    names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One message in the API's JSON form (every ``MessageOut`` field present)."""
    content: Any = m.content
    if content is not None and not isinstance(content, str):
        content = [_part_to_dict(p) for p in content]
    call_id = m.tool_call_id
    name = m.name
    if name is None and m.role == "tool" and call_id is not None:
        name = (names or {}).get(call_id)
    return {
        "role": m.role,
        "content": content,
        "ref": None,
        "reasoning": m.reasoning,
        "tool_call_id": call_id,
        "name": name,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls],
        "timestamp": None,
        "duration": None,
        "is_error": bool(call_id and call_id in (errors or ())),
        "images": list((images or {}).get(call_id or "", [])),
        "compaction": None,
    }


def view_messages(runs: Runs, *, created_at: float | None, updated_at: float | None) -> list[dict[str, Any]]:
    """Every run's messages, with refs, timestamps and the closing answer's duration.

    A run that recorded its timing stamps its user messages with its start and the rest with its
    end; an untimed run falls back to the chat's own creation and update times.
    """
    out: list[dict[str, Any]] = []
    refs = iter(user_turn_refs(runs))
    for run in runs:
        entries = drop_system_entries(run.entries)
        errors, images, names = tool_result_flags(entries)
        started, finished = run.timing if run.timing is not None else (created_at, updated_at)
        messages = [
            message_to_json_dict(m, errors=errors, images=images, names=names) for m in entries_to_messages(entries)
        ]
        for message in messages:
            if message["role"] == "user":
                message["ref"] = next(refs, None)
                message["timestamp"] = started
            else:
                message["timestamp"] = finished
        # The answer that ends the run: its last assistant message, if the run ended on one.
        if messages and messages[-1]["role"] == "assistant" and run.timing is not None:
            messages[-1]["duration"] = round(run.timing[1] - run.timing[0], 3)
        out.extend(messages)
    return out


def snapshot_views(
    history: Sequence[Segment], pending: Sequence[TranscriptEntry]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A ``snapshot`` frame's two views of finished runs plus the live run's completed turns:
    the messages (the live run's user messages have no ``ref`` yet) and the stored entry dicts."""
    runs = segments_runs(history)
    if pending:
        runs.append(Run(None, list(pending)))
    messages = view_messages(runs, created_at=None, updated_at=None)
    transcript = [entry_to_dict(e) for run in runs for e in run.entries]
    return messages, transcript


def segments_to_out(segments: Sequence[Segment], *, created_at: float, updated_at: float) -> list[dict[str, Any]]:
    """:func:`view_messages` of stored segments."""
    return view_messages(segments_runs(segments), created_at=created_at, updated_at=updated_at)
