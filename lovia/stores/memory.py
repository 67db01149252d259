"""In-memory session and checkpoint stores: for tests and ephemeral chat, never crash recovery.

Both keep what they store as JSON text (the same encoding as the SQLite stores), so callers that
mutate the lists or dicts they passed in or got back can never change stored state, and a value
that would not survive SQLite fails here too.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checkpointer import Lease, RunHead, RunInfo, RunSnapshot, RunStatus
from ..session import Segment, SessionInfo, new_run_id
from ..transcript import TranscriptEntry
from . import _leases
from ._codec import decode_entries, decode_head, decode_meta, encode_entries, encode_meta
from ._maintenance import check_non_negative, plan_rewind, trim_entries

__all__ = ["InMemoryCheckpointer", "InMemorySession"]

_order = itertools.count(1)


@dataclass(slots=True)
class _Row:
    run_id: str
    entries_json: str
    meta_json: str | None
    created_at: float
    seq: int = field(default_factory=lambda: next(_order))


class InMemorySession:
    """A :class:`~lovia.session.Session` kept in a dict; lost when the process ends."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[_Row]] = {}

    async def segments(self, session_id: str) -> list[Segment]:
        """All segments of the session, in run order."""
        return [
            Segment(
                run_id=row.run_id,
                entries=decode_entries(row.entries_json, session_id=session_id, run_id=row.run_id),
                meta=decode_meta(row.meta_json, session_id=session_id, run_id=row.run_id),
            )
            for row in self._sessions.get(session_id, [])
        ]

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat concatenation of every segment's entries."""
        return [e for seg in await self.segments(session_id) for e in seg.entries]

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Store one run as a segment (a no-op when ``run_id`` is already stored); return its id."""
        rid = run_id if run_id is not None else new_run_id()
        row = _Row(rid, encode_entries(entries), encode_meta(meta), time.time())
        rows = self._sessions.setdefault(session_id, [])
        if not any(r.run_id == rid for r in rows):
            rows.append(row)
        return rid

    async def clear(self, session_id: str) -> None:
        """Delete every segment of the session."""
        self._sessions.pop(session_id, None)

    async def trim_tool_results(self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1) -> int:
        """Truncate tool outputs older than the newest ``keep_runs`` runs; return how many were trimmed."""
        check_non_negative(keep_chars=keep_chars, keep_runs=keep_runs)
        rows = self._sessions.get(session_id, [])
        older = rows[: max(len(rows) - keep_runs, 0)]
        decoded = [decode_entries(r.entries_json, session_id=session_id, run_id=r.run_id) for r in older]
        total = 0
        for row, entries in zip(older, decoded, strict=True):
            new_entries, count = trim_entries(entries, keep_chars)
            if count:
                row.entries_json = encode_entries(new_entries)
                total += count
        return total

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Drop the flat view's tail after ``keep_entries`` entries; return how many were removed."""
        rows = self._sessions.get(session_id, [])
        decoded = [decode_entries(r.entries_json, session_id=session_id, run_id=r.run_id) for r in rows]
        plan = plan_rewind(decoded, keep_entries)
        if plan is None:
            return 0
        kept = rows[: plan.keep_segments]
        if plan.cut_entries:
            cut = rows[plan.keep_segments]
            kept.append(_Row(cut.run_id, encode_entries(plan.cut_entries), None, cut.created_at, cut.seq))
        if kept:
            self._sessions[session_id] = kept
        else:
            self._sessions.pop(session_id, None)
        return plan.removed

    async def list_sessions(self, *, limit: int = 50, offset: int = 0, query: str | None = None) -> list[SessionInfo]:
        """Sessions, most recently appended first; ``query`` filters by substring of the id."""
        check_non_negative(limit=limit, offset=offset)
        infos = []
        for sid, rows in self._sessions.items():
            if not rows or (query is not None and query not in sid):
                continue
            count = sum(_array_length(r.entries_json) for r in rows)
            created = [r.created_at for r in rows]
            infos.append((max(r.seq for r in rows), SessionInfo(sid, len(rows), count, min(created), max(created))))
        infos.sort(key=lambda pair: pair[0], reverse=True)
        return [info for _, info in infos[offset : offset + limit]]


def _array_length(text: str) -> int:
    try:
        data = json.loads(text)
    except ValueError:
        return 0
    return len(data) if isinstance(data, list) else 0


@dataclass(slots=True)
class _Run:
    head_json: str
    batches: list[str] = field(default_factory=list)


class InMemoryCheckpointer:
    """A :class:`~lovia.checkpointer.LeasingCheckpointer` kept in a dict (tests only: not crash recovery)."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._leases: dict[str, _leases.LeaseRow] = {}

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Append a batch of new entries (possibly empty) and overwrite the head."""
        self._write(run_id, entries, head)

    def _write(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        batch = encode_entries(entries) if entries else None
        head_json = head.to_json()
        run = self._runs.setdefault(run_id, _Run(head_json))
        run.head_json = head_json
        if batch is not None:
            run.batches.append(batch)

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The stored snapshot, or ``None``."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        head = decode_head(run_id, run.head_json)
        entries = [e for batch in run.batches for e in decode_entries(batch, session_id=None, run_id=run_id)]
        return RunSnapshot.from_parts(run_id, entries, head)

    async def delete(self, run_id: str) -> None:
        """Forget the run (no error when absent); a live lease on it is kept."""
        self._runs.pop(run_id, None)
        row = self._leases.get(run_id)
        if row is not None and row[2] <= time.time():
            del self._leases[run_id]

    async def list_runs(self, *, status: RunStatus | None = None, limit: int = 50, offset: int = 0) -> list[RunInfo]:
        """Stored runs, most recently updated first, optionally only those with ``status``."""
        check_non_negative(limit=limit, offset=offset)
        infos = []
        for run_id, run in self._runs.items():
            head = decode_head(run_id, run.head_json)
            if status is None or head.status == status:
                count = sum(_array_length(b) for b in run.batches)
                infos.append(
                    RunInfo(run_id, head.agent_name, head.status, head.turns, count, head.started_at, head.updated_at)
                )
        infos.sort(key=lambda i: (i.updated_at, i.run_id), reverse=True)
        return infos[offset : offset + limit]

    async def acquire_lease(self, run_id: str, *, owner: str, ttl: float) -> Lease:
        """Claim the run; raises :class:`~lovia.exceptions.RunBusy` while another live lease holds it."""
        lease = _leases.decide_acquire(run_id, self._leases.get(run_id), owner=owner, ttl=ttl, now=time.time())
        self._leases[run_id] = (lease.owner, lease.token, lease.expires_at)
        return lease

    async def renew_lease(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend the lease; raises :class:`~lovia.exceptions.LeaseLostError` if it is no longer current."""
        _leases.check_ttl(ttl)
        _leases.check_current(lease, self._leases.get(lease.run_id))
        renewed = Lease(run_id=lease.run_id, owner=lease.owner, token=lease.token, expires_at=time.time() + ttl)
        self._leases[lease.run_id] = (renewed.owner, renewed.token, renewed.expires_at)
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Give the run up (no error when already lost)."""
        row = self._leases.get(lease.run_id)
        if row is not None and row[0] == lease.owner and row[1] == lease.token:
            self._leases[lease.run_id] = _leases.released(row)

    async def live_leases(self) -> list[Lease]:
        """Leases held right now (who drives which run), soonest to expire first."""
        now = time.time()
        held = [
            Lease(run_id=r, owner=o, token=t, expires_at=e) for r, (o, t, e) in self._leases.items() if o and e > now
        ]
        return sorted(held, key=lambda lease: lease.expires_at)

    async def append_fenced(
        self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead, *, lease: Lease
    ) -> None:
        """``append`` that raises :class:`~lovia.exceptions.LeaseLostError` (writing nothing)
        unless ``lease`` is current."""
        _leases.check_current(lease, self._leases.get(run_id) if lease.run_id == run_id else None)
        self._write(run_id, entries, head)
