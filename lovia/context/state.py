"""The carried compaction state: sticky decisions plus calibration, JSON round-trippable.

Decisions are keyed by the *body index* of the entry they concern (the transcript without its
leading system entries) and remember the entry's ``call_id``; rendering applies a decision only
while the entry at that index still carries that ``call_id``. Indices are stable because the
transcript only ever grows: session history is append-only and a run appends.

Invariant: once recorded, a decision is never reverted; it is removed only when the entries it
concerns are hidden behind a summary (or no longer exist after a rewind), and the only further
step is an archived preview shrinking to a cleared marker. So between compactions the view's
prefix stays byte-identical from one turn to the next, and it never grows back.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transcript import ToolResultEntry, TranscriptEntry, entry_to_dict

__all__ = ["STATE_VERSION", "CompactionState", "OffloadRecord", "SummaryState", "history_fingerprint"]

STATE_VERSION = 1
"""Version of the dict written by :meth:`CompactionState.to_dict`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadRecord:
    """One tool output moved to the result store; the view keeps a preview."""

    index: int
    """Body index of the ``ToolResultEntry``."""
    call_id: str
    """The result's ``call_id`` (the decision applies only while it matches)."""
    key: str
    """Content digest the full output is stored under (the ``ref`` for recall)."""
    chars: int
    """Length of the full output."""
    preview: str
    """The head of the output shown in the view (kept here so the view never changes)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "index": self.index,
            "call_id": self.call_id,
            "key": self.key,
            "chars": self.chars,
            "preview": self.preview,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OffloadRecord:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            index=int(data["index"]),
            call_id=str(data["call_id"]),
            key=str(data["key"]),
            chars=int(data["chars"]),
            preview=str(data["preview"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryState:
    """A summary standing in for the first ``upto`` body entries."""

    text: str
    """The summary text (wrapped by ``SUMMARY_WRAPPER`` in the view)."""
    upto: int
    """How many body entries it replaces."""
    fingerprint: str
    """:func:`history_fingerprint` of those entries; a mismatch means history was rewritten."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {"text": self.text, "upto": self.upto, "fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryState:
        """Rebuild from :meth:`to_dict` output."""
        return cls(text=str(data["text"]), upto=int(data["upto"]), fingerprint=str(data["fingerprint"]))


def history_fingerprint(body: Sequence[TranscriptEntry]) -> str:
    """A digest of the entries' structure and text.

    Tool-result outputs are left out (only ``call_id`` and ``is_error`` count) so that
    ``trim_tool_results`` on the session does not invalidate a summary; a rewind does.
    """
    h = hashlib.sha256()
    for e in body:
        if isinstance(e, ToolResultEntry):
            data: dict[str, Any] = {"type": e.type, "call_id": e.call_id, "is_error": e.is_error}
        else:
            data = entry_to_dict(e)
        h.update(json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


@dataclass(slots=True, kw_only=True)
class CompactionState:
    """Everything :class:`~lovia.context.Compaction` remembers between calls."""

    cleared: dict[int, str] = field(default_factory=dict)
    """Body index -> ``call_id`` of results replaced by a short marker."""
    offloaded: dict[int, OffloadRecord] = field(default_factory=dict)
    """Body index -> record of results replaced by a preview."""
    summary: SummaryState | None = None
    """The summary hiding the oldest entries, if any."""
    ratio: float = 1.0
    """Calibration: provider tokens / heuristic tokens (EMA)."""
    mention_recall: bool | None = None
    """Whether markers name ``recall_tool_result``; fixed by the first decision."""
    window: int | None = None
    """The lowest window an overflow error named."""
    pending_estimate: int | None = None
    """Heuristic size of the last view sent, awaiting the provider's count."""
    failures: int = 0
    """Summarizer failures in run ``failures_run``."""
    failures_run: str | None = None
    """The run the failure count belongs to (the breaker is per run)."""

    @property
    def has_decisions(self) -> bool:
        """Whether any entry is rendered differently from the transcript."""
        return bool(self.cleared or self.offloaded or self.summary)

    def failures_for(self, run_id: str | None) -> int:
        """Summarizer failures recorded for ``run_id``."""
        return self.failures if self.failures_run == run_id else 0

    def note_failure(self, run_id: str | None) -> int:
        """Count one summarizer failure for ``run_id``; returns the new count."""
        if self.failures_run != run_id:
            self.failures_run, self.failures = run_id, 0
        self.failures += 1
        return self.failures

    def forget_before(self, upto: int) -> None:
        """Drop decisions about entries hidden behind a summary covering ``upto`` entries."""
        self.cleared = {i: c for i, c in self.cleared.items() if i >= upto}
        self.offloaded = {i: r for i, r in self.offloaded.items() if i >= upto}

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe dict persisted as ``context_state``."""
        return {
            "version": STATE_VERSION,
            "cleared": [[i, self.cleared[i]] for i in sorted(self.cleared)],
            "offloaded": [self.offloaded[i].to_dict() for i in sorted(self.offloaded)],
            "summary": self.summary.to_dict() if self.summary else None,
            "ratio": self.ratio,
            "mention_recall": self.mention_recall,
            "window": self.window,
            "pending_estimate": self.pending_estimate,
            "failures": self.failures,
            "failures_run": self.failures_run,
        }

    def save(self, scratch: dict[str, Any]) -> None:
        """Write the whole state into ``scratch`` (in place)."""
        scratch.clear()
        scratch.update(self.to_dict())

    def save_calibration(self, scratch: dict[str, Any]) -> None:
        """Write only the per-call fields (ratio, pending estimate); O(1)."""
        scratch["version"] = STATE_VERSION
        scratch["ratio"] = self.ratio
        scratch["pending_estimate"] = self.pending_estimate

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CompactionState:
        """Rebuild from :meth:`to_dict` output; unreadable or foreign data gives a fresh state."""
        state = cls()
        if not data or data.get("version") != STATE_VERSION:
            return state
        try:
            state.cleared = {int(i): str(c) for i, c in data.get("cleared") or []}
            recs = [OffloadRecord.from_dict(r) for r in data.get("offloaded") or []]
            state.offloaded = {r.index: r for r in recs}
            state.summary = SummaryState.from_dict(data["summary"]) if data.get("summary") else None
            ratio = float(data.get("ratio", 1.0))
            state.ratio = ratio if math.isfinite(ratio) and ratio > 0 else 1.0
            recall = data.get("mention_recall")
            state.mention_recall = None if recall is None else bool(recall)
            state.window = _opt_int(data.get("window"))
            state.pending_estimate = _opt_int(data.get("pending_estimate"))
            state.failures = int(data.get("failures") or 0)
            run = data.get("failures_run")
            state.failures_run = None if run is None else str(run)
        except (TypeError, ValueError, KeyError):
            return cls()
        return state


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
