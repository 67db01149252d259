"""The transcript: five entry kinds, their JSON form, and the provider delta types.

A run records everything as a list of entries. The list is the single source of truth: chat
:class:`~lovia.messages.Message` objects are a lossy projection of it, sessions store it per run,
checkpoints store it for the run in flight. Invariants:

* an assistant turn contributes ``reasoning?``, ``assistant_text?``, ``tool_call*`` in that order;
* results follow in completion order and pair with their call strictly by ``call_id``;
* before a partial run is finalized, calls without results are dropped
  (:func:`drop_dangling_tool_calls`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from ._entry_memo import PrefixMemo
from ._json import dumps
from .messages import AssistantTurn, ContentPart, FilePart, ImagePart, Message, TextPart, ToolCall, Usage

__all__ = [
    "AssistantTextEntry",
    "EntryCompletedDelta",
    "FinishDelta",
    "InputEntry",
    "ModelDelta",
    "ReasoningDelta",
    "ReasoningEntry",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEntry",
    "ToolResultEntry",
    "TranscriptEntry",
    "UsageDelta",
    "assistant_to_entries",
    "drop_dangling_tool_calls",
    "entries_from_json",
    "entries_to_json",
    "entries_to_messages",
    "entry_from_dict",
    "entry_to_dict",
    "input_to_entries",
    "known_fields",
    "leading_system_count",
    "messages_to_entries",
    "safe_window",
    "split_system",
    "to_json_safe",
    "unanswered_tool_calls",
]


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True)
class InputEntry:
    """Caller input, the system head, mailbox injections and repair prompts."""

    role: Literal["system", "user"]
    content: str | list[ContentPart]
    type: Literal["input"] = "input"

    @property
    def text(self) -> str:
        """The entry's text (text parts joined)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class AssistantTextEntry:
    """Text the model answered with; ``id`` only when the provider assigns one."""

    content: str
    id: str | None = None
    type: Literal["assistant_text"] = "assistant_text"


@dataclass(frozen=True, slots=True)
class ReasoningEntry:
    """Model thinking; ``metadata`` holds provider-private replay data (signatures...)."""

    content: str
    id: str | None = None
    provider: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """A tool call requested by the model; ``arguments`` is raw JSON text."""

    call_id: str
    name: str
    arguments: str
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultEntry:
    """The result of one call: ``output`` is what the model sees, ``raw`` the Python value."""

    call_id: str
    output: str
    raw: Any = None
    is_error: bool = False
    parts: list[ContentPart] | None = None
    type: Literal["tool_result"] = "tool_result"


TranscriptEntry = Union[InputEntry, AssistantTextEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry]


# --------------------------------------------------------------------------- provider deltas


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A fragment of assistant text from a provider stream."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A fragment of reasoning from a provider stream."""

    text: str
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of tool call ``index``; id and name arrive once, arguments in pieces."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class UsageDelta:
    """Token usage reported for the call."""

    usage: Usage
    type: Literal["usage_delta"] = "usage_delta"


@dataclass(frozen=True, slots=True)
class FinishDelta:
    """The stream ended; ``reason`` is the vendor's finish reason."""

    reason: str | None = None
    type: Literal["finish_delta"] = "finish_delta"


@dataclass(frozen=True, slots=True)
class EntryCompletedDelta:
    """An authoritative finished entry that replaces the one rebuilt from deltas."""

    entry: TranscriptEntry
    type: Literal["entry_completed_delta"] = "entry_completed_delta"


ModelDelta = Union[TextDelta, ReasoningDelta, ToolCallDelta, UsageDelta, FinishDelta, EntryCompletedDelta]


# --------------------------------------------------------------------------- JSON


def to_json_safe(value: Any) -> Any:
    """Convert ``value`` to JSON-safe data; what cannot be converted (or NaN/inf) becomes ``None``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_safe(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return to_json_safe(dump(mode="json"))
        except Exception:
            return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return None


def _part_to_dict(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image", "url": part.url, "data": part.data, "mime_type": part.mime_type, "detail": part.detail}
    return {"type": "file", "url": part.url, "data": part.data, "mime_type": part.mime_type, "filename": part.filename}


def _part_from_dict(data: Mapping[str, Any]) -> ContentPart:
    kind = data.get("type")
    if kind == "text":
        return TextPart(str(data["text"]))
    if kind == "image":
        return ImagePart(
            url=data.get("url"),
            data=data.get("data"),
            mime_type=data.get("mime_type"),
            detail=data.get("detail"),
        )
    if kind == "file":
        return FilePart(
            url=data.get("url"), data=data.get("data"), mime_type=data.get("mime_type"), filename=data.get("filename")
        )
    raise ValueError(f"unknown content part type {kind!r}")


def entry_to_dict(entry: TranscriptEntry) -> dict[str, Any]:
    """The JSON-safe dict form of an entry, tagged with ``"type"``."""
    if isinstance(entry, InputEntry):
        content: Any = entry.content if isinstance(entry.content, str) else [_part_to_dict(p) for p in entry.content]
        return {"type": "input", "role": entry.role, "content": content}
    if isinstance(entry, AssistantTextEntry):
        return {"type": "assistant_text", "content": entry.content, "id": entry.id}
    if isinstance(entry, ReasoningEntry):
        return {
            "type": "reasoning",
            "content": entry.content,
            "id": entry.id,
            "provider": entry.provider,
            "metadata": to_json_safe(entry.metadata),
        }
    if isinstance(entry, ToolCallEntry):
        return {"type": "tool_call", "call_id": entry.call_id, "name": entry.name, "arguments": entry.arguments}
    if isinstance(entry, ToolResultEntry):
        out: dict[str, Any] = {
            "type": "tool_result",
            "call_id": entry.call_id,
            "output": entry.output,
            "is_error": entry.is_error,
            "raw": to_json_safe(entry.raw),
        }
        if entry.parts:
            out["parts"] = [_part_to_dict(p) for p in entry.parts]
        return out
    raise TypeError(f"not a transcript entry: {type(entry).__name__}")


_FIELDS: dict[str, frozenset[str]] = {
    "input": frozenset({"type", "role", "content"}),
    "assistant_text": frozenset({"type", "content", "id"}),
    "reasoning": frozenset({"type", "content", "id", "provider", "metadata"}),
    "tool_call": frozenset({"type", "call_id", "name", "arguments"}),
    "tool_result": frozenset({"type", "call_id", "output", "raw", "is_error", "parts"}),
}


def _input_from(d: Mapping[str, Any]) -> InputEntry:
    content = d["content"]
    return InputEntry(d["role"], content if isinstance(content, str) else [_part_from_dict(p) for p in content])


def _text_from(d: Mapping[str, Any]) -> AssistantTextEntry:
    return AssistantTextEntry(d["content"], d.get("id"))


def _reasoning_from(d: Mapping[str, Any]) -> ReasoningEntry:
    return ReasoningEntry(d["content"], d.get("id"), d.get("provider"), dict(d.get("metadata") or {}))


def _call_from(d: Mapping[str, Any]) -> ToolCallEntry:
    return ToolCallEntry(d["call_id"], d["name"], d["arguments"])


def _result_from(d: Mapping[str, Any]) -> ToolResultEntry:
    parts = d.get("parts")
    return ToolResultEntry(
        d["call_id"],
        d["output"],
        d.get("raw"),
        bool(d.get("is_error", False)),
        [_part_from_dict(p) for p in parts] if parts else None,
    )


# The stored row form of an entry, what the bundled stores write since SQLite session schema 4
# and checkpoint schema 5 (PostgreSQL: schema 3 of both): a JSON array ``[code, field, ...]`` with
# the kind's fields in a fixed order and trailing fields that hold their default left out, e.g.
# ``[3, "c1", "add", "{}"]`` for a tool call. Parsing it makes no dict and no key strings, and it
# is about a third smaller than the dict form, which is still read (rows written before) and stays
# the public JSON form (:func:`entries_to_json`). A newer lovia may add fields at the end: they
# are ignored.
_ROW_CODES: dict[str, int] = {"input": 0, "assistant_text": 1, "reasoning": 2, "tool_call": 3, "tool_result": 4}
_ROW_KINDS: dict[int, str] = {code: kind for kind, code in _ROW_CODES.items()}
_ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "input": ("role", "content"),
    "assistant_text": ("content", "id"),
    "reasoning": ("content", "id", "provider", "metadata"),
    "tool_call": ("call_id", "name", "arguments"),
    "tool_result": ("call_id", "output", "raw", "is_error", "parts"),
}
# Trailing values left out of a row when they equal the field's default (tested by identity or
# emptiness exactly as the builders read them back).
_ROW_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "input": (),
    "assistant_text": (None,),
    "reasoning": (None, None, {}),
    "tool_call": (),
    "tool_result": (None, False, None),
}


def _entry_to_row(entry: TranscriptEntry) -> list[Any]:
    """The stored row form of an entry (see the note above ``_ROW_CODES``): the values
    :func:`entry_to_dict` gives, in ``_ROW_FIELDS`` order, without trailing ``_ROW_DEFAULTS``."""
    if isinstance(entry, ToolCallEntry):
        return [3, entry.call_id, entry.name, entry.arguments]
    if isinstance(entry, ToolResultEntry):
        row = [4, entry.call_id, entry.output, to_json_safe(entry.raw), entry.is_error]
        if entry.parts:
            row.append([_part_to_dict(p) for p in entry.parts])
        elif entry.is_error is False:
            del row[4]
            if row[3] is None:
                del row[3]
        return row
    if isinstance(entry, InputEntry):
        content = entry.content
        return [0, entry.role, content if isinstance(content, str) else [_part_to_dict(p) for p in content]]
    if isinstance(entry, AssistantTextEntry):
        return [1, entry.content] if entry.id is None else [1, entry.content, entry.id]
    if isinstance(entry, ReasoningEntry):
        row = [2, entry.content, entry.id, entry.provider, to_json_safe(entry.metadata)]
        if isinstance(row[4], dict) and not row[4]:
            del row[4]
            while len(row) > 2 and row[-1] is None:
                row.pop()
        return row
    raise TypeError(f"not a transcript entry: {type(entry).__name__}")


def _row_kind(row: Sequence[Any]) -> str | None:
    """The entry kind a stored row's code names, or ``None``. A code is looked up by value, as the
    bulk decoder compares it, so both paths read every row alike."""
    try:
        return _ROW_KINDS.get(row[0]) if row else None
    except TypeError:  # an unhashable code
        return None


def _row_to_dict(row: Sequence[Any]) -> dict[str, Any]:
    """The dict form of a stored row (extra trailing fields dropped).

    Raises:
        ValueError: the row names no known entry type.
    """
    kind = _row_kind(row)
    if kind is None:
        raise ValueError(f"unknown transcript entry type {row[0] if row else None!r}")
    d: dict[str, Any] = {"type": kind}
    d.update(zip(_ROW_FIELDS[kind], row[1:], strict=False))  # extra trailing fields: a newer lovia
    return d


def _entry_from_stored(item: Any) -> TranscriptEntry:
    """An entry from either stored form (row or dict), leniently (unknown fields ignored)."""
    if isinstance(item, list):
        return entry_from_dict(_row_to_dict(item), strict=False)
    return entry_from_dict(item, strict=False)


# One builder per kind: loading a long session is dominated by this dispatch, keep it flat.
_BUILDERS: dict[str, Any] = {
    "input": _input_from,
    "assistant_text": _text_from,
    "reasoning": _reasoning_from,
    "tool_call": _call_from,
    "tool_result": _result_from,
}


# The same entries as ``_BUILDERS`` for the same dicts, built without the dataclass ``__init__``:
# a frozen dataclass sets every field through ``object.__setattr__``, which is most of what a long
# session load spends on an entry. Each entry class has a plain twin with the very same slots (so
# the same memory layout): an instance of the twin takes ordinary attribute stores and then
# becomes an instance of the entry class by ``__class__`` assignment, which CPython allows between
# classes of identical layout. None of the entry classes has a ``__post_init__``. The rare shapes
# (content parts) go to the builders above; a missing key or a non-dict escapes as a plain
# exception, and the stores' bulk decoder then starts over with ``entry_from_dict``
# (``lovia.stores._codec.decode_segments``), which names the problem.
_new = object.__new__


def _slots_twin(cls: type) -> Any:
    return type(f"_{cls.__name__}Slots", (), {"__slots__": cls.__dict__["__slots__"], "__module__": __name__})


_InputSlots = _slots_twin(InputEntry)
_TextSlots = _slots_twin(AssistantTextEntry)
_ReasoningSlots = _slots_twin(ReasoningEntry)
_CallSlots = _slots_twin(ToolCallEntry)
_ResultSlots = _slots_twin(ToolResultEntry)


def _input_direct(d: Mapping[str, Any]) -> InputEntry:
    content = d["content"]
    if content.__class__ is not str:
        return _input_from(d)
    e = _new(_InputSlots)
    e.role, e.content, e.type = d["role"], content, "input"
    e.__class__ = InputEntry
    return e  # type: ignore[no-any-return]


def _text_direct(d: Mapping[str, Any]) -> AssistantTextEntry:
    e = _new(_TextSlots)
    e.content, e.id, e.type = d["content"], d.get("id"), "assistant_text"
    e.__class__ = AssistantTextEntry
    return e  # type: ignore[no-any-return]


def _reasoning_direct(d: Mapping[str, Any]) -> ReasoningEntry:
    e = _new(_ReasoningSlots)
    e.content, e.id, e.provider = d["content"], d.get("id"), d.get("provider")
    e.metadata, e.type = dict(d.get("metadata") or {}), "reasoning"
    e.__class__ = ReasoningEntry
    return e  # type: ignore[no-any-return]


def _call_direct(d: Mapping[str, Any]) -> ToolCallEntry:
    e = _new(_CallSlots)
    e.call_id, e.name, e.arguments, e.type = d["call_id"], d["name"], d["arguments"], "tool_call"
    e.__class__ = ToolCallEntry
    return e  # type: ignore[no-any-return]


def _result_direct(d: Mapping[str, Any]) -> ToolResultEntry:
    if d.get("parts"):
        return _result_from(d)
    e = _new(_ResultSlots)
    e.call_id, e.output, e.raw = d["call_id"], d["output"], d.get("raw")
    e.is_error, e.parts, e.type = True if d.get("is_error", False) else False, None, "tool_result"
    e.__class__ = ToolResultEntry
    return e  # type: ignore[no-any-return]


_DIRECT_BUILDERS: dict[str, Any] = {
    "input": _input_direct,
    "assistant_text": _text_direct,
    "reasoning": _reasoning_direct,
    "tool_call": _call_direct,
    "tool_result": _result_direct,
}


def _direct_from_row(row: list[Any]) -> TranscriptEntry:
    # The rarer row shapes: through the dict form and the direct builders.
    kind = _ROW_KINDS[row[0]]  # an unknown code escapes as KeyError (see the note above)
    d: dict[str, Any] = {"type": kind}
    d.update(zip(_ROW_FIELDS[kind], row[1:], strict=False))  # extra trailing fields: a newer lovia
    return _DIRECT_BUILDERS[kind](d)  # type: ignore[no-any-return]


def _entries_direct_rows(rows: list[Any]) -> tuple[list[TranscriptEntry], list[int]]:  # noqa: C901 (one flat hot loop)
    """The entries of many rows (each a list of entry dicts) in one flat list, with each row's end
    offset in it: ``[entry_from_dict(d, strict=False) for d in row]`` for well-formed dicts,
    through the direct builders, with the four most common shapes built inline (a session load
    builds tens of thousands); anything malformed raises a plain exception (see the note above)."""
    out: list[TranscriptEntry] = []
    ends: list[int] = []
    append, new, build, end, from_row = out.append, _new, _DIRECT_BUILDERS, ends.append, _direct_from_row
    call_slots, input_slots, text_slots, result_slots = _CallSlots, _InputSlots, _TextSlots, _ResultSlots
    for items in rows:
        if items.__class__ is not list:
            raise TypeError("a stored row is not a JSON array")
        for d in items:
            if d.__class__ is list:  # the row form; the common shapes unpacked whole (one step, no index)
                code, n = d[0], len(d)
                if code == 3 and n == 4:
                    e = new(call_slots)
                    _, e.call_id, e.name, e.arguments = d
                    e.type = "tool_call"
                    e.__class__ = ToolCallEntry
                elif code == 0 and n == 3 and d[2].__class__ is str:
                    e = new(input_slots)
                    _, e.role, e.content = d
                    e.type = "input"
                    e.__class__ = InputEntry
                elif code == 4 and (n == 3 or n == 4):
                    e = new(result_slots)
                    if n == 3:
                        _, e.call_id, e.output = d
                        e.raw = None
                    else:
                        _, e.call_id, e.output, e.raw = d
                    e.is_error = False
                    e.parts = None
                    e.type = "tool_result"
                    e.__class__ = ToolResultEntry
                elif code == 1 and n == 2:
                    e = new(text_slots)
                    _, e.content = d
                    e.id = None
                    e.type = "assistant_text"
                    e.__class__ = AssistantTextEntry
                else:
                    e = from_row(d)
                append(e)
                continue
            kind = d["type"]
            if kind == "tool_call":
                e = new(call_slots)
                e.call_id, e.name, e.arguments, e.type = d["call_id"], d["name"], d["arguments"], "tool_call"
                e.__class__ = ToolCallEntry
            elif kind == "input" and d["content"].__class__ is str:
                e = new(input_slots)
                e.role, e.content, e.type = d["role"], d["content"], "input"
                e.__class__ = InputEntry
            elif kind == "tool_result" and not d.get("parts"):
                e = new(result_slots)
                e.call_id, e.output, e.raw, e.parts = d["call_id"], d["output"], d.get("raw"), None
                e.is_error, e.type = True if d.get("is_error", False) else False, "tool_result"
                e.__class__ = ToolResultEntry
            elif kind == "assistant_text":
                e = new(text_slots)
                e.content, e.id, e.type = d["content"], d.get("id"), "assistant_text"
                e.__class__ = AssistantTextEntry
            else:
                e = build[kind](d)
            append(e)
        end(len(out))
    return out, ends


def _entries_direct(items: list[Any]) -> list[TranscriptEntry]:
    """The entries of one row (see :func:`_entries_direct_rows`)."""
    return _entries_direct_rows([items])[0]


def known_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the keys its entry ``type`` does not know (what ``strict=False`` drops).

    Raises:
        ValueError: ``data`` names no known entry type.
    """
    kind = data.get("type")
    fields = _FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise ValueError(f"unknown transcript entry type {kind!r}")
    return {key: value for key, value in data.items() if key in fields}


def entry_from_dict(data: Mapping[str, Any], *, strict: bool = False) -> TranscriptEntry:
    """Rebuild an entry from :func:`entry_to_dict` output.

    Unknown fields are ignored on every entry type (the stability promise: an entry written by a
    newer lovia still loads); only an unknown ``type`` is a ``ValueError``. ``strict=True`` makes
    unknown fields errors too, for callers that validate input they own.
    """
    kind = data.get("type")
    build = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if build is None:
        raise ValueError(f"unknown transcript entry type {kind!r}")
    if strict:
        extra = set(data) - _FIELDS[kind]  # type: ignore[index]
        if extra:
            raise ValueError(f"unknown field(s) {sorted(extra)} in {kind!r} entry")
    try:
        entry: TranscriptEntry = build(data)
    except KeyError as exc:
        raise ValueError(f"{kind!r} entry is missing field {exc.args[0]!r}") from None
    return entry


def entries_to_json(entries: Iterable[TranscriptEntry]) -> str:
    """Serialize entries as one compact JSON array."""
    return dumps([entry_to_dict(e) for e in entries])


def entries_from_json(text: str | bytes, *, strict: bool = False) -> list[TranscriptEntry]:
    """Parse a JSON array written by :func:`entries_to_json` (lenient about unknown fields by default)."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("expected a JSON array of entries")
    return [entry_from_dict(d, strict=strict) for d in data]


# --------------------------------------------------------------------------- conversions


def input_to_entries(
    messages: str | Message | Sequence[Message] | Sequence[TranscriptEntry],
) -> list[TranscriptEntry]:
    """Normalise run input (a string, messages, or entries) into transcript entries."""
    if isinstance(messages, str):
        return [InputEntry(role="user", content=messages)]
    if isinstance(messages, Message):
        return messages_to_entries([messages])
    out: list[TranscriptEntry] = []
    for item in messages:
        if isinstance(item, Message):
            out.extend(messages_to_entries([item]))
        elif isinstance(item, (InputEntry, AssistantTextEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry)):
            out.append(item)
        else:
            raise TypeError(f"run input items must be Message or transcript entries, got {type(item).__name__}")
    return out


def assistant_to_entries(am: Message | AssistantTurn) -> list[TranscriptEntry]:
    """Expand an assistant message or turn into reasoning, text and tool-call entries, in that order."""
    out: list[TranscriptEntry] = []
    reasoning = am.reasoning if isinstance(am, Message) else None
    if reasoning:
        out.append(ReasoningEntry(content=reasoning))
    content = am.text if isinstance(am, Message) else am.content
    if content:
        out.append(AssistantTextEntry(content=content))
    out.extend(ToolCallEntry(call_id=c.id, name=c.name, arguments=c.arguments) for c in am.tool_calls)
    return out


def messages_to_entries(messages: Iterable[Message]) -> list[TranscriptEntry]:
    """Convert chat messages into transcript entries."""
    out: list[TranscriptEntry] = []
    for m in messages:
        if m.role in ("system", "user"):
            content = m.content if m.content is not None else ""
            out.append(InputEntry(role=m.role, content=content if isinstance(content, str) else list(content)))
        elif m.role == "assistant":
            out.extend(assistant_to_entries(m))
        else:
            out.append(ToolResultEntry(call_id=m.tool_call_id or "", output=m.text))
    return out


def entries_to_messages(entries: Iterable[TranscriptEntry]) -> list[Message]:
    """Project entries onto chat messages (consecutive assistant parts merge into one message).

    Memoized by transcript prefix (a growing transcript converts only its new entries), so the
    returned messages may be shared with other calls: treat them as read-only.
    """
    return _MESSAGES_MEMO(entries if isinstance(entries, list) else list(entries))


def _entries_to_messages(entries: Iterable[TranscriptEntry]) -> list[Message]:
    out: list[Message] = []
    current: Message | None = None
    for e in entries:
        if isinstance(e, (ReasoningEntry, AssistantTextEntry, ToolCallEntry)):
            if current is None:
                current = Message(role="assistant")
                out.append(current)
            if isinstance(e, ReasoningEntry):
                current.reasoning = (current.reasoning or "") + e.content
            elif isinstance(e, AssistantTextEntry):
                current.content = (current.content or "") + e.content  # type: ignore[operator]
            else:
                current.tool_calls.append(ToolCall(id=e.call_id, name=e.name, arguments=e.arguments))
            continue
        current = None
        if isinstance(e, InputEntry):
            out.append(Message(role=e.role, content=e.content))
        else:
            out.append(Message(role="tool", content=e.output, tool_call_id=e.call_id))
    return out


def _starts_message(previous: TranscriptEntry, entry: TranscriptEntry) -> bool:
    # Inputs and tool results always open a message of their own and merge with nothing.
    return isinstance(entry, (InputEntry, ToolResultEntry))


_MESSAGES_MEMO: PrefixMemo[TranscriptEntry, Message] = PrefixMemo(
    _entries_to_messages, _starts_message, head=lambda entries: leading_system_count(entries)
)


# --------------------------------------------------------------------------- structure helpers


def leading_system_count(entries: Sequence[TranscriptEntry]) -> int:
    """How many system ``InputEntry`` items open the list."""
    n = 0
    for e in entries:
        if isinstance(e, InputEntry) and e.role == "system":
            n += 1
        else:
            break
    return n


def split_system(entries: Sequence[TranscriptEntry]) -> tuple[list[TranscriptEntry], list[TranscriptEntry]]:
    """Split into (leading system entries, body)."""
    n = leading_system_count(entries)
    return list(entries[:n]), list(entries[n:])


def _pair_tool_entries(entries: Sequence[TranscriptEntry]) -> tuple[list[int], list[int]]:
    """Indices of unanswered calls and of results without a call, pairing in order.

    A result answers the oldest unanswered call with its id, so a call id that a later turn
    reuses is matched to its own result, not to an earlier one.
    """
    waiting: dict[str, list[int]] = {}
    orphans: list[int] = []
    for i, e in enumerate(entries):
        if isinstance(e, ToolCallEntry):
            waiting.setdefault(e.call_id, []).append(i)
        elif isinstance(e, ToolResultEntry):
            queue = waiting.get(e.call_id)
            if queue:
                queue.pop(0)
            else:
                orphans.append(i)
    return sorted(i for positions in waiting.values() for i in positions), orphans


def unanswered_tool_calls(entries: Sequence[TranscriptEntry]) -> list[ToolCallEntry]:
    """The tool calls that have no result yet, in transcript order."""
    dangling, _ = _pair_tool_entries(entries)
    return [entries[i] for i in dangling]  # type: ignore[misc]


def drop_dangling_tool_calls(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """Remove tool calls that have no result, and results whose call is missing.

    Use it before recording a partial run as a finished segment: the stored transcript must stay
    tool-consistent (every call paired with its result).
    """
    dangling, orphans = _pair_tool_entries(entries)
    if not dangling and not orphans:
        return list(entries)
    drop = set(dangling) | set(orphans)
    return [e for i, e in enumerate(entries) if i not in drop]


def safe_window(entries: Sequence[TranscriptEntry], *, head: int = 0, tail: int) -> list[TranscriptEntry]:
    """Keep the first ``head`` and last ``tail`` entries without splitting a call from its result.

    A negative ``head`` counts as 0. The head end moves later until every call it keeps has its
    result (in the head or the tail). A tail that starts on (or holds) a result whose call lies
    between head and tail moves earlier to take that call in, repeatedly; a call the head keeps
    already answers for a result in the tail (nothing is duplicated), and a result whose call
    exists nowhere is dropped. When the tail reaches the head, the whole list is returned.
    """
    n = len(entries)
    head, tail = max(0, head), max(0, tail)
    if head + tail >= n:
        return list(entries)
    head_end = head
    # Calls the head keeps whose results are neither in the head nor in the tail: the head grows.
    open_calls = {e.call_id for e in entries[:head_end] if isinstance(e, ToolCallEntry)}
    open_calls -= {e.call_id for e in entries[:head_end] if isinstance(e, ToolResultEntry)}
    open_calls -= {e.call_id for e in entries[n - tail :] if isinstance(e, ToolResultEntry)}
    while open_calls and head_end < n - tail:
        e = entries[head_end]
        if isinstance(e, ToolResultEntry):
            open_calls.discard(e.call_id)
        elif isinstance(e, ToolCallEntry):
            open_calls.add(e.call_id)
        head_end += 1
    start = max(n - tail, head_end)
    if start <= head_end:
        return list(entries)
    every_call = {e.call_id for e in entries if isinstance(e, ToolCallEntry)}
    head_calls = {e.call_id for e in entries[:head_end] if isinstance(e, ToolCallEntry)}
    needed = {e.call_id for e in entries[start:] if isinstance(e, ToolResultEntry)} & every_call
    needed -= head_calls | {e.call_id for e in entries[start:] if isinstance(e, ToolCallEntry)}
    while needed and start > head_end:
        start -= 1
        e = entries[start]
        if isinstance(e, ToolCallEntry):
            needed.discard(e.call_id)
        elif isinstance(e, ToolResultEntry) and e.call_id in every_call and e.call_id not in head_calls:
            needed.add(e.call_id)
    if start <= head_end:
        return list(entries)
    kept_tail = [e for e in entries[start:] if not (isinstance(e, ToolResultEntry) and e.call_id not in every_call)]
    return list(entries[:head_end]) + kept_tail
