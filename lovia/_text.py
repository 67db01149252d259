"""Internal: the one text policy, applied wherever text enters lovia.

A Python ``str`` may hold a *lone surrogate* (a code point in U+D800..U+DFFF without its partner):
the JSON escape ``"\\ud800"`` from a model, a tool or a caller decodes to one. UTF-8 has no
encoding for it, so SQLite and PostgreSQL both refuse such text, and one bad character would
stop every save of the run. The policy, the same on every backend:

* every lone surrogate becomes U+FFFD (the Unicode replacement character);
* an adjacent high + low surrogate pair becomes the one character it encodes;
* invalid UTF-8 bytes in a provider stream are decoded as U+FFFD (``errors="replace"``);
* everything else is kept as is, control characters and NUL included (stored JSON escapes them).

It is applied where text enters: provider response decoding (:func:`loads`, used for every SSE
``data:`` payload), each streamed text, reasoning and tool-argument fragment, the entries a run
appends (model output, tool results, caller input, injected messages; :func:`clean_entries`),
JSON tool arguments that spell a lone surrogate as an escape (:func:`clean_arguments`), and, as
the last line, the JSON encoder every store uses (:func:`clean_value` in ``lovia._json``). So what
a run holds in memory, what it streams and what any store reads back are the same text.

Every function returns its argument itself when there is nothing to change, so the common case
costs one scan and no copy.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["REPLACEMENT", "clean_arguments", "clean_entries", "clean_text", "clean_value", "loads"]

REPLACEMENT = "\ufffd"
T = TypeVar("T")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (pairs joined); the same object when clean."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16 code units: a high+low pair decodes to its character, a lone half to U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def clean_value(value: T) -> T:
    """``value`` with :func:`clean_text` applied to every string in nested dicts, lists and tuples.

    Dict keys are cleaned too. Other objects are returned untouched (the store's JSON conversion
    turns them into plain data first). Unchanged containers are returned as the same object.
    """
    if isinstance(value, str):
        return clean_text(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = clean_text(key) if isinstance(key, str) else key
            new_item = clean_value(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value  # type: ignore[return-value]
    if type(value) is list or type(value) is tuple:
        seq: list[Any] | tuple[Any, ...] = value  # type: ignore[assignment]
        items = [clean_value(item) for item in seq]
        if all(new is old for new, old in zip(items, seq, strict=True)):
            return value
        return items if type(value) is list else tuple(items)  # type: ignore[return-value]
    return value


def loads(data: str | bytes) -> Any:
    """``json.loads`` for text from outside (provider payloads), with the text policy applied."""
    value = json.loads(data)
    # Decoded JSON can only hold a lone surrogate that was written as an escape (``\\ud800``-``\\udfff``).
    escaped = (b"\\ud" in data or b"\\uD" in data) if isinstance(data, bytes) else ("\\ud" in data or "\\uD" in data)
    return clean_value(value) if escaped else value


def clean_arguments(arguments: str) -> str:
    """Tool-call arguments (JSON text) whose string values spell no lone surrogate, even escaped.

    ``{"q": "\\ud800"}`` is valid JSON and plain ASCII, but the tool would receive a lone
    surrogate; such arguments are re-encoded with the surrogate replaced. Text that is not JSON
    only gets :func:`clean_text`.
    """
    arguments = clean_text(arguments)
    if "\\ud" not in arguments and "\\uD" not in arguments:
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    cleaned = clean_value(value)
    if cleaned is value:
        return arguments  # the escapes were proper pairs
    return json.dumps(cleaned, ensure_ascii=False)


_INIT_FIELDS: dict[type, tuple[str, ...]] = {}
"""Per dataclass type, the names of its ``__init__`` fields (``dataclasses.fields`` rebuilds them on each call)."""


def _init_fields(cls: type) -> tuple[str, ...]:
    names = _INIT_FIELDS.get(cls)
    if names is None:
        names = _INIT_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return names


_PLAIN = frozenset({int, float, bool, type(None)})
"""Field value types that hold no text: nothing to clean."""


def _clean_fields(obj: T) -> T:
    """A frozen dataclass with every str / container field cleaned (parts and entries)."""
    changes: dict[str, Any] = {}
    for name in _init_fields(type(obj)):
        old = getattr(obj, name)
        kind = type(old)
        if kind in _PLAIN:
            continue
        if kind is str:
            new: Any = clean_arguments(old) if name == "arguments" else clean_text(old)
        elif name == "arguments" and isinstance(old, str):
            new = clean_arguments(old)
        elif isinstance(old, list) and old and dataclasses.is_dataclass(old[0]):
            items = [_clean_fields(item) for item in old]
            new = old if all(a is b for a, b in zip(items, old, strict=True)) else items
        else:
            new = clean_value(old)
        if new is not old:
            changes[name] = new
    return dataclasses.replace(obj, **changes) if changes else obj  # type: ignore[type-var]


def clean_entries(entries: Sequence[T]) -> list[T]:
    """Transcript entries with the text policy applied (unchanged entries are the same objects)."""
    # A type seen before is a known dataclass: skip the generic check for it.
    return [
        _clean_fields(entry) if type(entry) in _INIT_FIELDS or dataclasses.is_dataclass(entry) else entry
        for entry in entries
    ]
