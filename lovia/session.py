"""The Session protocol: conversation history that survives across runs.

A session is an append-only list of *segments*, one per finished run, keyed by a caller-chosen
``session_id``. Appending under a ``run_id`` that is already stored is a no-op, which is what
lets a replayed or resumed run re-append safely. There is deliberately no ``replace``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .transcript import TranscriptEntry

__all__ = ["NOTICE_META_KEY", "STATE_META_KEY", "TIMING_META_KEY", "Segment", "Session", "SessionInfo", "new_run_id"]

STATE_META_KEY = "context_state"
"""Segment meta key: the context policy's carried state at the end of the run (handed to the next run)."""
NOTICE_META_KEY = "context_notice"
"""Segment meta key: the last compaction notice of the run (what was compacted and why)."""
TIMING_META_KEY = "timing"
"""Segment meta key: ``{"started_at": ..., "finished_at": ...}`` wall-clock seconds of the run."""


def new_run_id() -> str:
    """A fresh, globally unique run id: ``run_`` and the 32 hex digits of a random (version 4) UUID."""
    # uuid.uuid4().hex, without building the UUID object (a third of the cost; every append makes one).
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return "run_" + raw.hex()


@dataclass(slots=True)
class Segment:
    """One finished run inside a session: its id, its own entries and opaque per-run ``meta``."""

    run_id: str
    entries: list[TranscriptEntry]
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of a session listing (bundled stores' ``list_sessions``)."""

    session_id: str
    runs: int
    entries: int
    created_at: float
    updated_at: float
    damaged: str | None = None
    """``None``, or how many of the session's stored runs cannot be decoded and what to do."""


@runtime_checkable
class Session(Protocol):
    """Where finished runs of a conversation are kept.

    Implementations must make ``append`` atomic and idempotent on ``(session_id, run_id)``.
    ``rewind(session_id, *, keep_entries) -> int`` is optional (the web UI offers
    edit-and-resend and regenerate only when it exists).
    """

    async def segments(self, session_id: str) -> list[Segment]:
        """All segments of the session, in run order."""
        ...

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat concatenation of every segment's entries."""
        ...

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Store one run as a segment; return its run id (generated when ``None``)."""
        ...

    async def clear(self, session_id: str) -> None:
        """Delete every segment of the session."""
        ...
