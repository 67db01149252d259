"""A chat's history as clients read it: finished runs projected onto chat messages.

``GET /api/sessions/{id}`` answers ``entries`` in this form (one dict per message, the fields of
``MessageOut`` in http-api terms): user messages carry a ``ref`` (``"<run_id>:<n>"``, the n-th
user message of that run, stable across reloads and rewinds) that rewind and fork accept; the
answer that ends a run carries the run's ``duration``; timestamps come from the timing each run
recorded. The page itself renders the stored entries (``transcript`` in the same answer), which
keep what this projection merges away (reasoning ids, raw tool values).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, cast

from ..messages import Message
from ..parts import FilePart, ImagePart, TextPart
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
from .schemas import ChatSessionInfo, MessageOut, RunRecordInfo

RunStatus = Literal["running", "completed", "failed", "cancelled", "interrupted"]

if TYPE_CHECKING:
    from .store.runs import RunRow

__all__ = [
    "EXPORT_HTML_CSP",
    "Run",
    "Runs",
    "display_text",
    "drop_system_entries",
    "export_html",
    "export_md",
    "export_txt",
    "message_to_json_dict",
    "message_to_out",
    "origin_kind",
    "parse_ref",
    "run_record",
    "segment_timing",
    "segments_runs",
    "segments_to_out",
    "session_info",
    "snapshot_views",
    "stamp_refs",
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
    images = [p for p in parts or () if isinstance(p, ImagePart)]
    return [{"index": i, "mime_type": p.mime_type} for i, p in enumerate(images)]  # counted among images, from 0


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
    runs: Runs, pending: Sequence[TranscriptEntry], *, created_at: float | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A ``snapshot`` frame's two views of the finished ``runs`` plus the live run's completed
    turns: the messages (the live run's user messages have no ``ref`` yet) and the stored entry
    dicts. ``created_at`` stamps the messages of untimed runs."""
    runs = list(runs)
    if pending:
        runs.append(Run(None, list(pending)))
    messages = view_messages(runs, created_at=created_at, updated_at=None)
    transcript = [entry_to_dict(e) for run in runs for e in run.entries]
    return messages, transcript


def segments_to_out(segments: Sequence[Segment], *, created_at: float, updated_at: float) -> list[dict[str, Any]]:
    """:func:`view_messages` of stored segments."""
    return view_messages(segments_runs(segments), created_at=created_at, updated_at=updated_at)


# --------------------------------------------------------------------------- typed views and exports


def origin_kind(value: str | None) -> Literal["fork", "spawn"] | None:
    """``"fork"`` or ``"spawn"`` when ``value`` names one of those origins, else ``None``."""
    return value if value in ("fork", "spawn") else None  # type: ignore[return-value]


class ChatRow(Protocol):
    """What :func:`session_info` reads of a chat (:class:`lovia.web.store.ChatMeta` has it; the store
    imports this module, so this one names the fields instead of importing the class)."""

    @property
    def id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def created_at(self) -> float: ...
    @property
    def updated_at(self) -> float: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def origin_kind(self) -> str | None: ...


def session_info(meta: ChatRow, *, last_run_status: str | None = None) -> ChatSessionInfo:
    """A chat's listing entry from its index row."""
    return ChatSessionInfo(
        id=meta.id,
        title=meta.title,
        agent=meta.agent,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        pinned=meta.pinned,
        parent_id=meta.parent_id,
        last_run_status=last_run_status,
        origin_kind=origin_kind(meta.origin_kind),
    )


def run_record(row: RunRow) -> RunRecordInfo:
    """A persisted run row as the API shows it (any object with the ``RunRow`` fields)."""
    return RunRecordInfo(
        run_id=row.id,
        session_id=row.session_id,
        agent=row.agent,
        source=row.source,
        status=cast("RunStatus", row.status),  # the store writes only these statuses
        error=row.error,
        started_at=row.started_at,
        finished_at=row.finished_at,
        usage=row.usage,
    )


def display_text(m: Message) -> str:
    """What a reader sees of a message: its text, with a ``[image]``/``[file name]`` mark per attachment."""
    if m.content is None or isinstance(m.content, str):
        return m.content or ""
    out: list[str] = []
    for part in m.content:
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ImagePart):
            out.append("[image]")
        elif isinstance(part, FilePart):
            out.append(f"[file {part.filename}]" if part.filename else "[file]")
    return "\n".join(out)


def message_to_out(m: Message, *, timestamp: float | None = None) -> MessageOut:
    """One message as a :class:`~lovia.web.schemas.MessageOut` (no ref, duration or tool flags yet)."""
    out = MessageOut.model_validate(message_to_json_dict(m))
    out.timestamp = timestamp
    return out


def stamp_refs(outs: list[MessageOut], runs: Runs) -> list[MessageOut]:
    """``outs`` with each user message's ``ref`` set from ``runs``, in chat order."""
    refs = iter(user_turn_refs(runs))
    for out in outs:
        if out.role == "user":
            out.ref = next(refs, None)
    return outs


def _code(text: str) -> str:
    """``text`` as one Markdown code span, fenced by more backticks than any run it holds."""
    ticks = "`" * (max((len(r) for r in _tick_runs(text)), default=0) + 1)
    return f"{ticks} {text} {ticks}" if "`" in text else f"`{text}`"


def _tick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for ch in text:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    if current:
        runs.append(current)
    return runs


def _blocks(msgs: Sequence[Message]) -> list[tuple[str, str]]:
    """``(kind, text)`` per thing a reader sees: user/assistant text, tool calls and results."""
    out: list[tuple[str, str]] = []
    for m in msgs:
        if m.role in ("system", "developer"):
            continue
        if m.role == "tool":
            out.append(("result", display_text(m)[:300]))
            continue
        text = display_text(m)
        if text.strip():
            out.append((m.role if m.role in ("user", "assistant") else "assistant", text))
        for call in m.tool_calls:
            out.append(("call", f"{call.name} {call.arguments}"))
    return out


def export_txt(msgs: list[Message]) -> str:
    """A plain-text export: who said what, with tool calls and results on a line each."""
    labels = {"user": "User: ", "assistant": "Assistant: ", "call": "[tool call] ", "result": "[tool result] "}
    lines = [labels[kind] + text + ("" if kind == "call" else "\n") for kind, text in _blocks(msgs)]
    return "\n".join(lines).rstrip() + "\n"


def export_md(msgs: list[Message], *, title: str, session_id: str) -> str:
    """A Markdown export headed by the chat's title and id (tool values as code spans)."""
    blocks = [f"# {title or 'Chat'}", "", f"_Chat `{session_id}`_", ""]
    heading = None
    for kind, text in _blocks(msgs):
        if kind in ("user", "assistant"):
            blocks.append(f"## {kind.title()}\n\n{text}\n")
            heading = kind
            continue
        if heading != "assistant":  # a turn that starts with tool calls (no text) is still the assistant's
            blocks.append("## Assistant\n")
            heading = "assistant"
        if kind == "call":
            blocks.append(f"- tool call {_code(text)}")
        else:
            blocks.append(f"- tool result: {_code(text)}\n")
    return "\n".join(blocks).rstrip() + "\n"


EXPORT_HTML_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'"
"""The Content-Security-Policy of an HTML export: no scripts, no external resources, inline CSS only."""

_HTML_CSS = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "section{border-left:3px solid #ccc;padding:.25rem .75rem;margin:1rem 0}"
    ".user{border-color:#3a7bd5}.assistant{border-color:#4caf50}.call,.result{border-color:#999;color:#555}"
    "h2{font-size:.8rem;text-transform:uppercase;margin:0;color:#666}"
    "pre{white-space:pre-wrap;margin:.25rem 0;font:inherit}"
    ".call pre,.result pre{font-family:ui-monospace,monospace;font-size:.85rem}"
)


def export_html(msgs: list[Message], *, title: str, session_id: str) -> str:
    """A standalone HTML page of the chat: every text escaped, a strict CSP, inline CSS, no external resources."""
    esc = html.escape
    labels = {"user": "User", "assistant": "Assistant", "call": "Tool call", "result": "Tool result"}
    sections = [
        f'<section class="{kind}"><h2>{labels[kind]}</h2><pre>{esc(text)}</pre></section>'
        for kind, text in _blocks(msgs)
    ]
    name = esc(title or "Chat")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_HTML_CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{name}</title><style>{_HTML_CSS}</style></head>\n<body><h1>{name}</h1>"
        f"<p>Chat <code>{esc(session_id)}</code></p>\n" + "\n".join(sections) + "\n</body></html>\n"
    )
