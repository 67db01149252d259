"""Internal: incremental session history, shared by the bundled durable session stores.

A store keeps, per session it served in this process, the segments it already decoded together
with two change counters of the session, each written in the same transaction as the change it
counts, so a load that finds the counters it cached knows nothing changed, whoever changed it
(another process, another host):

* ``epoch`` is bumped only by the maintenance calls (``rewind``, ``trim_tool_results``,
  ``clear``), which rewrite or delete stored rows;
* ``version`` grows with every append. In PostgreSQL it is a counter in the ``session_heads`` row
  that every change bumps (appends to one session are serialised by that row, so ids grow in
  commit order). In SQLite it is the session's largest row id: ids are never reused and there is
  one writer at a time, so the row an append inserts is its own counter.

While the epoch is unchanged the session only grew, and the rows with an id above the last one
cached are exactly what is new. A load is then one indexed lookup when nothing changed, plus the
new rows when something was appended, and a full read only after maintenance. States are ordered
by ``(epoch, version)``: both only grow. Cached entries are immutable; callers receive fresh
lists, and segment meta is copied on the way out.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from ..session import Segment
from ..transcript import TranscriptEntry
from ._codec import Decoded

__all__ = ["EMPTY_ID", "HistoryCache", "HistoryState", "Mark", "history_of"]

# Sessions a store remembers at once (least recently used are forgotten first).
MAX_SESSIONS = 256


Mark = tuple[str, "dict[str, Any] | str | None", int]
"""One stored run in a :class:`HistoryState`: ``(run_id, meta, end)``, ``end`` one past its last entry.
``meta`` is the decoded object, or the JSON text the store wrote (a run this process appended:
decoded only when asked for, see :func:`meta_copy`)."""


def meta_copy(meta: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """A caller's own copy of a mark's meta (cached objects are never handed out)."""
    if isinstance(meta, str):
        data: dict[str, Any] = json.loads(meta)  # lovia's own text: a JSON object
        return data
    return copy.deepcopy(meta)


@dataclass(frozen=True, slots=True)
class HistoryState:
    """A session as of one ``version``: the first ``n_segments``/``n_entries`` of shared lists."""

    epoch: int
    version: int
    last_id: int
    segments: list[Mark]
    n_segments: int
    entries: list[TranscriptEntry]
    n_entries: int

    def entry_list(self) -> list[TranscriptEntry]:
        """A fresh list of the session's entries (the flat ``load()`` view)."""
        return self.entries[: self.n_entries]

    def segment_list(self) -> list[Segment]:
        """Fresh segments (entry lists and meta copied: callers may mutate them)."""
        out: list[Segment] = []
        entries, start = self.entries, 0
        for run_id, meta, end in self.segments[: self.n_segments]:
            out.append(Segment(run_id=run_id, entries=entries[start:end], meta=meta_copy(meta)))
            start = end
        return out

    def last_meta(self) -> dict[str, Any] | None:
        """A copy of the newest segment's meta."""
        return meta_copy(self.segments[self.n_segments - 1][1]) if self.n_segments else None


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
        new: Decoded,
        *,
        epoch: int,
        version: int,
    ) -> HistoryState:
        """``base`` (``None``: an empty session) plus the decoded rows ``new``, at
        ``epoch``/``version``; remembered unless a newer version is already cached."""
        with self._lock:
            state = self._extend(base, new, epoch=epoch, version=version)
            self._remember(session_id, state)
            return state

    def _extend(self, base: HistoryState | None, new: Decoded, *, epoch: int, version: int) -> HistoryState:
        # Under the lock. Extending the tip's lists in place leaves every existing state's view
        # unchanged (each is bounded by its own counts), so a state built and never remembered
        # (its transaction failed) costs nothing but a copy at the next extension.
        if base is not None and len(base.segments) == base.n_segments and len(base.entries) == base.n_entries:
            segments, entries = base.segments, base.entries  # the tip: extend in place, O(new)
        elif base is not None:
            segments, entries = base.segments[: base.n_segments], base.entries[: base.n_entries]
        else:
            segments, entries = [], []
        last_id = base.last_id if base is not None else EMPTY_ID
        if new.marks:
            offset = len(entries)
            if not entries:
                entries = new.entries  # decoded for this state alone: adopt it
            else:
                entries.extend(new.entries)
            if offset:
                segments.extend([(run_id, meta, end + offset) for run_id, meta, end in new.marks])
            elif not segments:
                segments = new.marks
            else:
                segments.extend(new.marks)
            last_id = max(last_id, new.last_id)
        return HistoryState(epoch, version, last_id, segments, len(segments), entries, len(entries))

    def _remember(self, session_id: str, state: HistoryState) -> None:
        # Under the lock.
        current = self._states.get(session_id)
        if current is None or (current.epoch, current.version) <= (state.epoch, state.version):
            self._states[session_id] = state
            self._states.move_to_end(session_id)
            while len(self._states) > self._max:
                self._states.popitem(last=False)

    def after_append(
        self,
        session_id: str,
        row_id: int,
        prev_id: int | None,
        run_id: str,
        entries: list[TranscriptEntry],
        meta_json: str | None,
        *,
        epoch: int,
        version: int,
        previous: int,
    ) -> HistoryState | None:
        """The state this process's own append leads to, when it directly follows the cached
        state: the session was at ``previous`` (its version just before this append) in the cached
        epoch, and its previous row is the last one cached (a row written by hand must not be
        skipped). ``entries`` become the cache's (pass a list nobody else holds) and ``meta_json``
        is the meta exactly as stored. Built, not remembered: call :meth:`publish` with it once the
        append committed, so the transaction's commit is the only work between its last statement
        and the publish."""
        with self._lock:
            base = self._states.get(session_id)
            if base is None:
                if previous != 0 or prev_id is not None:  # not the session's first row
                    return None
            elif not (base.epoch == epoch and base.version == previous and (prev_id or EMPTY_ID) == base.last_id):
                return None
            one = Decoded(entries, [(run_id, meta_json, len(entries))], row_id)
            return self._extend(base, one, epoch=epoch, version=version)

    def publish(self, session_id: str, state: HistoryState | None) -> None:
        """Remember ``state`` from :meth:`after_append` (``None``: nothing to do)."""
        if state is not None:
            with self._lock:
                self._remember(session_id, state)


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
