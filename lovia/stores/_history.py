"""Internal: incremental session history, shared by the bundled durable session stores.

A store keeps, per session it served in this process, the segments it already decoded together
with the session's change counters from its ``session_heads`` row:

* ``version`` is bumped by every change (an append, ``rewind``, ``trim_tool_results``, ``clear``)
  in the same transaction as the change, so a load that reads the head row and finds the version
  it cached knows nothing changed, whoever changed it (another process, another host);
* ``epoch`` is bumped only by the maintenance calls, which rewrite stored rows; while it is
  unchanged, the session only grew and the rows with an id above the last one cached are exactly
  what is new (appends to one session are serialised by the head row, so ids grow in commit order).

A load is then one primary-key lookup when nothing changed, plus the new rows when something was
appended, and a full read only after maintenance. Cached entries are immutable; callers receive
fresh lists, and segment meta is copied on the way out.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol

from ..session import Segment
from ..transcript import TranscriptEntry

__all__ = ["HistoryCache", "HistoryState", "history_of"]

# Sessions a store remembers at once (least recently used are forgotten first).
MAX_SESSIONS = 256


@dataclass(frozen=True, slots=True)
class HistoryState:
    """A session as of one ``version``: the first ``n_segments``/``n_entries`` of shared lists."""

    epoch: int
    version: int
    last_id: int
    segments: list[Segment]
    n_segments: int
    entries: list[TranscriptEntry]
    n_entries: int

    def entry_list(self) -> list[TranscriptEntry]:
        """A fresh list of the session's entries (the flat ``load()`` view)."""
        return self.entries[: self.n_entries]

    def segment_list(self) -> list[Segment]:
        """Fresh segments (entry lists and meta copied: callers may mutate them)."""
        return [
            Segment(run_id=s.run_id, entries=list(s.entries), meta=copy.deepcopy(s.meta))
            for s in self.segments[: self.n_segments]
        ]

    def last_meta(self) -> dict[str, Any] | None:
        """A copy of the newest segment's meta."""
        return copy.deepcopy(self.segments[self.n_segments - 1].meta) if self.n_segments else None


EMPTY_ID = 0


class HistoryCache:
    """Decoded sessions by id, advanced only to newer versions (thread-safe: the SQLite fast
    write path runs on callers' threads while loads run on the store's worker)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._states: OrderedDict[str, HistoryState] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_sessions

    def get(self, session_id: str) -> HistoryState | None:
        """The cached state, or ``None``."""
        with self._lock:
            state = self._states.get(session_id)
            if state is not None:
                self._states.move_to_end(session_id)
            return state

    def drop(self, session_id: str) -> None:
        """Forget the session (this process changed it by maintenance)."""
        with self._lock:
            self._states.pop(session_id, None)

    def advance(
        self,
        session_id: str,
        base: HistoryState | None,
        new: Sequence[tuple[int, Segment]],
        *,
        epoch: int,
        version: int,
    ) -> HistoryState:
        """``base`` (``None``: an empty session) plus the ``(row id, segment)`` pairs ``new``, at
        ``epoch``/``version``; remembered unless a newer version is already cached."""
        with self._lock:
            if base is not None and len(base.segments) == base.n_segments and len(base.entries) == base.n_entries:
                segments, entries = base.segments, base.entries  # the tip: extend in place, O(new)
            elif base is not None:
                segments, entries = base.segments[: base.n_segments], base.entries[: base.n_entries]
            else:
                segments, entries = [], []
            last_id = base.last_id if base is not None else EMPTY_ID
            if new:
                segments.extend([segment for _, segment in new])
                entries.extend(chain.from_iterable([segment.entries for _, segment in new]))
                last_id = max(last_id, max([row_id for row_id, _ in new]))
            state = HistoryState(epoch, version, last_id, segments, len(segments), entries, len(entries))
            current = self._states.get(session_id)
            if current is None or current.version <= version:
                self._states[session_id] = state
                self._states.move_to_end(session_id)
                while len(self._states) > self._max:
                    self._states.popitem(last=False)
            return state

    def after_append(
        self, session_id: str, row_id: int, prev_id: int | None, segment: Segment, *, epoch: int, version: int
    ) -> None:
        """Record this process's own append when it directly follows the cached state: the head
        moved by exactly this append and the session's previous row is the last one cached (a row
        written by hand, bumping nothing, must not be skipped)."""
        base = self.get(session_id)
        if base is None:
            if version == 1 and epoch == 0 and prev_id is None:
                self.advance(session_id, None, [(row_id, segment)], epoch=epoch, version=version)
        elif base.epoch == epoch and base.version == version - 1 and (prev_id or EMPTY_ID) == base.last_id:
            self.advance(session_id, base, [(row_id, segment)], epoch=epoch, version=version)


class _HasHistory(Protocol):
    async def segments(self, session_id: str) -> list[Segment]: ...


async def history_of(session: _HasHistory, session_id: str) -> tuple[list[TranscriptEntry], dict[str, Any] | None]:
    """A session's flat history and a copy of its newest segment's meta, for a run start.

    Bundled stores answer from their incremental cache (O(what changed)); any other
    :class:`~lovia.session.Session` through ``segments()``.
    """
    fast = getattr(session, "_history", None)
    if fast is not None:
        result: tuple[list[TranscriptEntry], dict[str, Any] | None] = await fast(session_id)
        return result
    segments = await session.segments(session_id)
    history = [e for seg in segments for e in seg.entries]
    return history, (copy.deepcopy(segments[-1].meta) if segments else None)
