"""Internal: the JSON form of stored segments and checkpoint batches, shared by every bundled store.

Writes are strict (only real transcript entries, JSON-safe meta); reads are lenient about unknown
fields (so what a newer lovia wrote still loads) but refuse unknown entry types. A record that
cannot be decoded becomes a :class:`~lovia.exceptions.CorruptRecordError` naming its ids.
"""

from __future__ import annotations

import gc
import json
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, overload

from pydantic_core import from_json

from .._json import dumps
from .._text import clean_text
from ..checkpointer import RunHead
from ..exceptions import CorruptRecordError, UserError
from ..session import Segment
from ..transcript import TranscriptEntry, _entries_direct_rows, _entry_from_stored, _entry_to_row, _row_kind

__all__ = [
    "KNOWN_ENTRY_TYPES",
    "checksum",
    "verify_checksum",
    "Decoded",
    "decode_entries",
    "decode_history",
    "decode_segment",
    "decode_segments",
    "gc_paused",
    "decode_head",
    "decode_meta",
    "encode_entries",
    "encode_meta",
]

KNOWN_ENTRY_TYPES = frozenset({"input", "assistant_text", "reasoning", "tool_call", "tool_result"})
_SEPARATORS = (",", ":")


def encode_entries(entries: Sequence[TranscriptEntry]) -> str:
    """The stored JSON text of entries: an array of their row forms (see ``lovia.transcript``,
    ``_ROW_CODES``); a non-entry is a :class:`UserError`."""
    try:
        return dumps([_entry_to_row(e) for e in entries])
    except TypeError as exc:
        raise UserError(
            f"cannot store entries: {exc}",
            hint="pass lovia.transcript entries (InputEntry, ToolResultEntry, ...)",
        ) from exc


def encode_meta(meta: dict[str, Any] | None) -> str | None:
    """JSON text of a segment's meta (``None`` stays ``None``)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise UserError(f"segment meta must be a dict, got {type(meta).__name__}", hint="pass meta={...} or None")
    try:
        # Cleaning the text is cleaning every key and string in it: with ensure_ascii=False a lone
        # surrogate is written as itself, inside the one string token it belongs to.
        return clean_text(json.dumps(meta, separators=_SEPARATORS, ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"segment meta is not JSON-serializable: {exc}",
            hint="meta is stored verbatim as JSON; use str/int/float/bool/None/list/dict values",
        ) from exc


def checksum(entries_json: str, meta_json: str | None = None) -> int:
    """CRC-32 of a stored record's exact text (entries, then meta when present).

    Not a defence against a deliberate forger (who can recompute it): it catches damage and edits
    made outside lovia, and costs about a memory copy.
    """
    crc = zlib.crc32(entries_json.encode("utf-8", "surrogatepass"))
    if meta_json is not None:
        crc = zlib.crc32(b"\x00" + meta_json.encode("utf-8", "surrogatepass"), crc)
    return crc


def verify_checksum(
    stored: int | None,
    entries_json: object,
    meta_json: object = None,
    *,
    session_id: str | None,
    run_id: str | None,
) -> None:
    """Raise :class:`CorruptRecordError` unless ``stored`` is the checksum of the record's text
    (``None`` is accepted: a row written without one, by hand or before checksums existed)."""
    # NULL: written without one (by hand, or by a writer that predates checksums): unverified.
    if stored is None:
        return
    texts = isinstance(entries_json, str) and (meta_json is None or isinstance(meta_json, str))
    if texts and int(stored) == checksum(entries_json, meta_json):  # type: ignore[arg-type]
        return
    what = "does not match its checksum"
    raise CorruptRecordError(
        f"stored record of {_where(session_id, run_id)} {what}: it was changed outside lovia",
        session_id=session_id,
        run_id=run_id,
        hint="restore the file from a backup, or "
        + ("checkpointer.delete(run_id)" if session_id is None else "rewind or clear the session")
        + " (other records are unaffected)",
    )


def decode_segment(
    session_id: str, row_id: int, run_id: str, entries_json: str, meta_json: str | None, stored: int | None
) -> tuple[int, Segment]:
    """One checksummed session row, verified and decoded, with its row id."""
    verify_checksum(stored, entries_json, meta_json, session_id=session_id, run_id=run_id)
    entries = decode_entries(entries_json, session_id=session_id, run_id=run_id)
    return int(row_id), Segment(
        run_id=run_id, entries=entries, meta=decode_meta(meta_json, session_id=session_id, run_id=run_id)
    )


SegmentRow = tuple[int, str, "str | bytes", "str | bytes | None", "int | None"]
"""``(row id, run id, entries_json, meta_json, checksum)``: a stored session row as both stores select it
(the JSON texts as text, or as their UTF-8 bytes)."""

# Below this many rows the cyclic collector is left alone: it would hardly run anyway.
PAUSE_GC_FROM = 64


class _Retry(Exception):
    """The bulk decode met something it does not handle itself: decode row by row instead."""


class Decoded(NamedTuple):
    """Decoded session rows, flat: every entry in row order, and per row ``(run_id, meta, end)``
    where ``end`` is one past the row's last entry in ``entries``. A decoded row's meta is its
    object; the history cache also keeps a run it appended itself with the meta as the stored
    JSON text (``lovia.stores._history.meta_copy``)."""

    entries: list[TranscriptEntry]
    marks: list[tuple[str, dict[str, Any] | str | None, int]]
    last_id: int


def decode_history(session_id: str, rows: Sequence[SegmentRow]) -> Decoded:
    """Many rows of one session (a full or partial load), verified and decoded, in row order.

    The result, and the error when a row is damaged, are exactly those of :func:`decode_segment`
    applied to each row in turn; only the cost differs. Every row's checksum is verified first;
    the entries of the verified rows are then parsed in one JSON call (their texts are exactly
    what lovia wrote, each a JSON array, so joining them with commas inside brackets yields the
    list of the rows' arrays) and built into one flat list with the transcript's direct builders,
    with the cyclic collector paused (:func:`gc_paused`): no per-row list or segment object is
    made. Anything unexpected (a checksum mismatch, a row without a checksum, a malformed entry)
    abandons the bulk path without side effects and decodes row by row, which raises the
    :class:`CorruptRecordError` naming the first damaged row.
    """
    if rows:
        try:
            if len(rows) < PAUSE_GC_FROM:
                return _decode_bulk(session_id, rows)
            with gc_paused():
                return _decode_bulk(session_id, rows)
        except Exception:
            pass  # start over row by row: the same result, or the error naming the first bad row
    entries: list[TranscriptEntry] = []
    marks: list[tuple[str, dict[str, Any] | str | None, int]] = []
    last_id = 0
    for row in rows:
        row_id, segment = decode_segment(session_id, *_as_text(session_id, row))
        entries.extend(segment.entries)
        marks.append((segment.run_id, segment.meta, len(entries)))
        last_id = max(last_id, row_id)
    return Decoded(entries, marks, last_id)


def decode_segments(session_id: str, rows: Sequence[SegmentRow]) -> list[tuple[int, Segment]]:
    """:func:`decode_history` as ``(row id, segment)`` pairs."""
    decoded = decode_history(session_id, rows)
    out: list[tuple[int, Segment]] = []
    start = 0
    for row, (run_id, meta, end) in zip(rows, decoded.marks, strict=True):
        assert not isinstance(meta, str)  # rows decoded here carry their meta decoded
        out.append((int(row[0]), Segment(run_id=run_id, entries=decoded.entries[start:end], meta=meta)))
        start = end
    return out


def _as_text(session_id: str, row: SegmentRow) -> tuple[int, str, str, str | None, int | None]:
    row_id, run_id, entries_json, meta_json, stored = row
    return (
        row_id,
        run_id,
        _text(entries_json, "entries are", session_id, run_id),
        _text(meta_json, "meta is", session_id, run_id),
        stored,
    )


@overload
def _text(value: str | bytes, what: str, session_id: str, run_id: str) -> str: ...
@overload
def _text(value: str | bytes | None, what: str, session_id: str, run_id: str) -> str | None: ...
def _text(value: str | bytes | None, what: str, session_id: str, run_id: str) -> str | None:
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        subject, verb = what.split()
        message = f"stored {subject} of {_where(session_id, run_id)} {verb} not UTF-8 text"
        raise _corrupt(message, session_id, run_id) from exc


def _decode_bulk(session_id: str, rows: Sequence[SegmentRow]) -> Decoded:
    crc = zlib.crc32
    texts: list[bytes] = []
    metas: list[bytes] = []
    for _, _, entries_json, meta_json, stored in rows:
        if stored is None:
            raise _Retry("unverified")  # rare (a row written by hand): decoded on its own
        data = entries_json if entries_json.__class__ is bytes else entries_json.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
        value = crc(data)
        if meta_json is not None:
            meta = meta_json if meta_json.__class__ is bytes else meta_json.encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
            value = crc(meta, crc(b"\x00", value))
            metas.append(meta)
        if value != stored:
            raise _Retry("checksum")
        texts.append(data)
    # Short strings are cached (role names, tool names, repeated arguments): in the row form they
    # are most of the strings, and a hit saves building one (10-25% of the parse, bench/session_store.py).
    texts[0] = b"[" + texts[0]  # brackets on the ends: one copy of the whole text, not three
    texts[-1] += b"]"
    arrays = from_json(b",".join(texts), cache_strings="all")
    del texts
    if len(arrays) != len(rows):
        raise _Retry("shape")
    entries, ends = _entries_direct_rows(arrays)
    del arrays  # the parsed dicts go now, while the collector is paused: it never scans them
    # Every run the runner stores carries meta (its timing at least): parsed in one call too, like
    # the entries (each one JSON object, or ``null``, which decode_meta reads as no meta).
    parsed = from_json(b"[" + b",".join(metas) + b"]", cache_strings="keys") if metas else []
    if len(parsed) != len(metas):
        raise _Retry("shape")
    objects = iter(parsed)
    marks: list[tuple[str, dict[str, Any] | str | None, int]] = []
    mark = marks.append
    for (_, run_id, _, meta_json, _), end in zip(rows, ends, strict=True):
        if meta_json is None:
            mark((run_id, None, end))
            continue
        value = next(objects)
        if value is not None and value.__class__ is not dict:
            raise _Retry("meta")
        mark((run_id, value, end))
    return Decoded(entries, marks, int(rows[-1][0]))  # both stores select rows ORDER BY id


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_resume = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector from running inside the block (it is process-wide).

    A bulk decode allocates tens of thousands of container objects that all survive, so the
    collector would otherwise run many times over them (and over the whole heap when a full
    collection falls due) in the middle of the load: most of a long load's cost. The collections
    are not skipped, only deferred: the first allocation after the block collects the young
    objects once. Nested and concurrent pauses (several stores' worker threads) count: the
    collector is re-enabled when the last one ends, and only if it was enabled when the first
    one began; a block that raises restores it just the same.
    """
    global _gc_pausers, _gc_resume
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_resume:
                gc.enable()


def _where(session_id: str | None, run_id: str | None) -> str:
    if session_id is None:
        return f"checkpoint of run {run_id!r}"
    return f"session {session_id!r}, run {run_id!r}"


def decode_entries(text: str | bytes | None, *, session_id: str | None, run_id: str | None) -> list[TranscriptEntry]:
    """Parse a stored entries array leniently; anything undecodable is a :class:`CorruptRecordError`."""
    try:
        # pydantic-core's parser is several times faster than json.loads on many small objects.
        data = from_json(text) if text is not None else None
    except (ValueError, TypeError) as exc:
        where = _where(session_id, run_id)
        raise _corrupt(f"stored entries of {where} are not valid JSON: {exc}", session_id, run_id) from exc
    if not isinstance(data, list):
        raise _corrupt(f"stored entries of {_where(session_id, run_id)} are not a JSON array", session_id, run_id)
    try:
        return [_entry_from_stored(item) for item in data]
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        pass  # fall through to find and name the bad entry
    for i, item in enumerate(data):
        where = _where(session_id, run_id)
        if isinstance(item, list):
            kind = _row_kind(item)
            kind = kind if kind is not None else (item[0] if item else None)
        else:
            kind = item.get("type") if isinstance(item, dict) else None
        if not (isinstance(kind, str) and kind in KNOWN_ENTRY_TYPES):  # a list or dict is unhashable
            raise CorruptRecordError(
                f"entry {i} of {where} has unknown transcript entry type {kind!r}",
                session_id=session_id,
                run_id=run_id,
                hint="it was probably written by a newer lovia: upgrade lovia to read it",
            )
        try:
            _entry_from_stored(item)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            raise _corrupt(f"entry {i} of {where} is malformed: {exc}", session_id, run_id) from exc
    raise _corrupt(f"stored entries of {_where(session_id, run_id)} are malformed", session_id, run_id)


def decode_meta(text: str | bytes | None, *, session_id: str, run_id: str) -> dict[str, Any] | None:
    """Parse a stored meta object (``NULL`` means no meta)."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise _corrupt(
            f"stored meta of {_where(session_id, run_id)} is not valid JSON: {exc}", session_id, run_id
        ) from exc
    if data is not None and not isinstance(data, dict):
        raise _corrupt(f"stored meta of {_where(session_id, run_id)} is not a JSON object", session_id, run_id)
    return data


def _corrupt(message: str, session_id: str | None, run_id: str | None) -> CorruptRecordError:
    target = "checkpointer.delete(run_id)" if session_id is None else "rewind or clear the session"
    return CorruptRecordError(
        message,
        session_id=session_id,
        run_id=run_id,
        hint=f"the row was damaged outside lovia; restore it from a backup or {target} (other records are unaffected)",
    )


def decode_head(run_id: str, text: str | bytes | None) -> RunHead:
    """Parse a stored run head; anything undecodable is a :class:`CorruptRecordError`."""
    try:
        if text is None:
            raise ValueError("head is NULL")
        return RunHead.from_json(text)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CorruptRecordError(
            f"stored head of run {run_id!r} cannot be decoded: {exc}",
            run_id=run_id,
            hint="the row was damaged outside lovia; restore it from a backup or checkpointer.delete(run_id)",
        ) from exc
