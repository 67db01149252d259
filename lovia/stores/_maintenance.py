"""Internal: the two sanctioned carve-outs from append-only, as pure functions over entries.

Every bundled store (memory, SQLite, and later PostgreSQL) loads the affected segments inside
one transaction, asks these functions what to write, and writes it in that same transaction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..exceptions import UserError
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

__all__ = ["InvalidArgument", "RewindPlan", "check_non_negative", "plan_rewind", "trim_entries", "trim_marker"]


class InvalidArgument(UserError, ValueError):
    """A maintenance argument was out of range (also a ``ValueError``, as the contract says)."""


def check_non_negative(**values: int) -> None:
    """Raise :class:`InvalidArgument` for a negative or non-integer argument."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(
                f"{name} must be a non-negative integer, got {value!r}", hint=f"pass {name}=0 or more"
            )


_MARKER_RE = re.compile(r"\n\[lovia: trimmed \d+ chars of this tool output; [^\]]*\]\Z")


def trim_marker(trimmed_chars: int) -> str:
    """The note appended to a trimmed output."""
    return (
        f"\n[lovia: trimmed {trimmed_chars} chars of this tool output; "
        "recall_tool_result can restore it only if it was archived]"
    )


def _trim_one(entry: ToolResultEntry, keep_chars: int) -> ToolResultEntry | None:
    output = entry.output
    if _MARKER_RE.search(output):
        return None
    cut = len(output) - keep_chars
    if cut <= 0 or len(trim_marker(cut)) >= cut:
        return None
    return replace(entry, output=output[:keep_chars] + trim_marker(cut), raw=None)


def trim_entries(entries: Sequence[TranscriptEntry], keep_chars: int) -> tuple[list[TranscriptEntry], int]:
    """Trim every long tool output in ``entries``; return the new list and how many were trimmed.

    Count, order, ``call_id``, ``is_error`` and ``parts`` are kept; ``raw`` is dropped from trimmed
    results. Outputs already ending in the marker are left alone, so trimming is idempotent, and an
    output is left whole when the marker would not make it shorter.
    """
    out: list[TranscriptEntry] = []
    count = 0
    for entry in entries:
        trimmed = _trim_one(entry, keep_chars) if isinstance(entry, ToolResultEntry) else None
        if trimmed is None:
            out.append(entry)
        else:
            out.append(trimmed)
            count += 1
    return out, count


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """What a rewind writes: keep ``keep_segments`` whole, then cut segment ``keep_segments``.

    ``cut_entries`` is ``None`` when the cut falls on a segment boundary (that segment and every
    later one are deleted); otherwise it replaces segment ``keep_segments`` (its meta dropped, the
    segment deleted when empty) and every later segment is deleted.
    """

    keep_segments: int
    cut_entries: list[TranscriptEntry] | None
    removed: int


def _drop_unanswered(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """``drop_dangling_tool_calls`` that pairs in order, so a call id reused by a later turn counts.

    Each result answers the earliest still-open call with its id; calls left open and results
    answering nothing are dropped. On a prefix of a run with unique ids it keeps exactly what
    ``drop_dangling_tool_calls`` keeps.
    """
    open_calls: dict[str, list[int]] = {}
    paired: set[int] = set()
    for i, entry in enumerate(entries):
        if isinstance(entry, ToolCallEntry):
            open_calls.setdefault(entry.call_id, []).append(i)
        elif isinstance(entry, ToolResultEntry) and open_calls.get(entry.call_id):
            paired.update((open_calls[entry.call_id].pop(0), i))
    return [e for i, e in enumerate(entries) if i in paired or not isinstance(e, (ToolCallEntry, ToolResultEntry))]


def plan_rewind(segments: Sequence[Sequence[TranscriptEntry]], keep_entries: int) -> RewindPlan | None:
    """Plan a rewind to the first ``keep_entries`` entries of the flat view; ``None`` is a no-op."""
    check_non_negative(keep_entries=keep_entries)
    total = sum(len(s) for s in segments)
    if keep_entries >= total:
        return None
    seen = 0
    for index, entries in enumerate(segments):
        if seen + len(entries) <= keep_entries:
            seen += len(entries)
            continue
        take = keep_entries - seen
        cut = _drop_unanswered(entries[:take]) if take else None
        kept = seen + (len(cut) if cut else 0)
        return RewindPlan(keep_segments=index, cut_entries=cut, removed=total - kept)
    raise AssertionError("unreachable: keep_entries < total")  # pragma: no cover
