"""The carried compaction state: sticky decisions plus calibration, JSON round-trippable.

Decisions about tool results are keyed by the result's ``call_id``; rendering applies one only
while exactly one result in the transcript carries that id (a provider that reuses ids makes
the decision ambiguous, and it is pruned). The summary covers a count of leading body entries
(the transcript without its system head), stable because the transcript only ever grows.

Invariant: once recorded, a decision is never reverted; it is removed only when the entries it
concerns are hidden behind a summary (or no longer exist, or share their id, after a rewind or
a reused id), and the only further
step is an archived preview shrinking to a cleared marker. So between compactions the view's
prefix stays byte-identical from one turn to the next, and it never grows back.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transcript import ToolResultEntry, TranscriptEntry, entry_to_dict
from .stores import content_key

__all__ = [
    "STATE_VERSION",
    "CompactionState",
    "OffloadRecord",
    "SummaryState",
    "fingerprint",
    "result_digest",
    "unique_result_ids",
    "window_key",
]

STATE_VERSION = 1
"""Version of the dict written by :meth:`CompactionState.to_dict`."""


@dataclass(frozen=True, slots=True)
class OffloadRecord:
    """One tool output replaced in the view by a preview (and archived when there is a store).

    The record is keyed by the result's ``call_id`` in :attr:`CompactionState.offloaded`.
    """

    preview: str
    """The head of the output shown in the view (kept here so the view never changes)."""
    chars: int
    """Length of the full output."""
    digest: str
    """Content digest of the full output (:func:`result_digest`): the key it is archived under and
    the ``ref`` recall takes."""

    @property
    def key(self) -> str:
        """The same as :attr:`digest` (the result store's key)."""
        return self.digest

    def to_dict(self, call_id: str | None = None) -> dict[str, Any]:
        """JSON-safe form (with the ``call_id`` it is filed under, when given)."""
        data: dict[str, Any] = {} if call_id is None else {"call_id": call_id}
        data.update({"key": self.digest, "chars": self.chars, "preview": self.preview})
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OffloadRecord:
        """Rebuild from :meth:`to_dict` output."""
        digest = data["digest"] if "digest" in data else data["key"]
        return cls(preview=str(data["preview"]), chars=int(data["chars"]), digest=str(digest))


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryState:
    """A summary standing in for the first ``covered`` body entries."""

    text: str
    """The summary text (wrapped by ``SUMMARY_WRAPPER`` in the view)."""
    covered: int
    """How many body entries it replaces."""
    fingerprint: str
    """:func:`fingerprint` of those entries; a mismatch means history was rewritten."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {"text": self.text, "upto": self.covered, "fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryState:
        """Rebuild from :meth:`to_dict` output."""
        return cls(text=str(data["text"]), covered=int(data["upto"]), fingerprint=str(data["fingerprint"]))


def fingerprint(entries: Sequence[TranscriptEntry]) -> str:
    """A digest of the entries' structure and text.

    Tool-result outputs are left out (only ``call_id`` and ``is_error`` count) so that
    ``trim_tool_results`` on the session does not invalidate a summary; a rewind does.
    """
    h = hashlib.sha256()
    for e in entries:
        if isinstance(e, ToolResultEntry):
            data: dict[str, Any] = {"type": e.type, "call_id": e.call_id, "is_error": e.is_error}
        else:
            data = entry_to_dict(e)
        h.update(json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def result_digest(output: str) -> str:
    """The sha256 hex digest of a tool output (UTF-8): the key it is offloaded under.

    Keys are digests rather than call ids because a result store is shared across sessions while
    call ids are only unique within one; identical outputs share one stored copy.
    """
    return content_key(output)


def window_key(provider: object, model: str | None) -> str:
    """The key a learned context window is remembered under: the endpoint and the model.

    A window an endpoint named for one model says nothing about another, so a chat that switches
    models does not carry the old model's limit over.
    """
    vendor = getattr(provider, "name", None) or type(provider).__name__
    base = getattr(provider, "base_url", None) or ""
    chosen = model or getattr(provider, "model", None) or ""
    return f"{vendor}|{base}|{chosen}"


def unique_result_ids(entries: Sequence[TranscriptEntry]) -> set[str]:
    """The call ids carried by exactly one tool result in ``entries``.

    A decision about a result is keyed by its call id, which is only safe when no other result
    carries the same id (some providers reuse ids across turns).
    """
    seen: dict[str, int] = {}
    for e in entries:
        if isinstance(e, ToolResultEntry):
            seen[e.call_id] = seen.get(e.call_id, 0) + 1
    return {cid for cid, n in seen.items() if n == 1}


@dataclass(slots=True, kw_only=True)
class CompactionState:
    """Everything :class:`~lovia.context.Compaction` remembers between calls.

    Decisions are keyed by the tool result's ``call_id``; one applies only while exactly one
    result in the transcript carries that id (see :meth:`prune`).
    """

    cleared: set[str] = field(default_factory=set)
    """Call ids of results replaced by a short marker."""
    offloaded: dict[str, OffloadRecord] = field(default_factory=dict)
    """Call id -> record of results replaced by a preview."""
    summary: SummaryState | None = None
    """The summary hiding the oldest entries, if any."""
    ratio: float = 1.0
    """Calibration: provider tokens / heuristic tokens (EMA)."""
    mention_recall: bool | None = None
    """Whether markers name ``recall_tool_result``; fixed by the first decision."""
    learned_windows: dict[str, int] = field(default_factory=dict)
    """:func:`window_key` -> the window that endpoint last named for that model in an overflow error."""
    last_view_estimate: int | None = None
    """Heuristic size of the last view sent, awaiting the provider's count."""
    summary_failures: int = 0
    """Summarizer failures in run ``failures_run`` (persisted with the state)."""
    failures_run: str | None = None
    """The run the failure count belongs to (the breaker is per run)."""

    @property
    def has_decisions(self) -> bool:
        """Whether any entry is rendered differently from the transcript."""
        return bool(self.cleared or self.offloaded or self.summary)

    def failures_for(self, run_id: str | None) -> int:
        """Summarizer failures recorded for ``run_id``."""
        return self.summary_failures if self.failures_run == run_id else 0

    def note_failure(self, run_id: str | None) -> int:
        """Count one summarizer failure for ``run_id``; returns the new count."""
        if self.failures_run != run_id:
            self.failures_run, self.summary_failures = run_id, 0
        self.summary_failures += 1
        return self.summary_failures

    def decided(self, call_id: str) -> bool:
        """Whether the result with ``call_id`` is already cleared or offloaded (decisions are sticky)."""
        return call_id in self.cleared or call_id in self.offloaded

    def prune(self, referable: Iterable[str]) -> None:
        """Drop decisions whose call id is absent from ``referable`` or not unique in it.

        Pass :func:`unique_result_ids` of the body, or the call ids of its results in order (a
        repeated id then counts as not unique): a decision keyed by an id two results share
        cannot say which of them it meant.
        """
        counts = Counter(referable)
        self.cleared = {c for c in self.cleared if counts.get(c) == 1}
        self.offloaded = {c: r for c, r in self.offloaded.items() if counts.get(c) == 1}

    def forget(self, call_ids: Iterable[str]) -> None:
        """Drop decisions about the results with ``call_ids`` (hidden behind a summary now)."""
        gone = set(call_ids)
        self.cleared -= gone
        self.offloaded = {c: r for c, r in self.offloaded.items() if c not in gone}

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe dict persisted as ``context_state``."""
        return {
            "version": STATE_VERSION,
            "cleared": sorted(self.cleared),
            "offloaded": [record.to_dict(call_id) for call_id, record in self.offloaded.items()],
            "summary": self.summary.to_dict() if self.summary else None,
            "ratio": self.ratio,
            "mention_recall": self.mention_recall,
            "windows": dict(sorted(self.learned_windows.items())),
            "window": min(self.learned_windows.values(), default=None),  # the lowest any endpoint named
            "pending_estimate": self.last_view_estimate,
            "failures": self.summary_failures,
            "failures_run": self.failures_run,
        }

    def save(self, scratch: dict[str, Any]) -> None:
        """Write the whole state into ``scratch`` (in place): :class:`~lovia.context.Compaction` owns
        the run's whole scratch dict."""
        scratch.clear()
        scratch.update(self.to_dict())

    def save_calibration(self, scratch: dict[str, Any]) -> None:
        """Write only the per-call fields (ratio, pending estimate); O(1)."""
        scratch["version"] = STATE_VERSION
        scratch["ratio"] = self.ratio
        scratch["pending_estimate"] = self.last_view_estimate

    @classmethod
    def load(cls, scratch: Mapping[str, Any] | None) -> CompactionState:
        """The state :meth:`save` wrote into ``scratch``; a fresh one when there is none or it is unreadable."""
        return cls.from_dict(scratch)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CompactionState:
        """Rebuild from :meth:`to_dict` output; unreadable or foreign data gives a fresh state."""
        state = cls()
        if not data or data.get("version") != STATE_VERSION:
            return state
        try:
            # Earlier states filed decisions under [body index, call id]; the call id is what counts.
            state.cleared = {str(c[-1]) if isinstance(c, list) else str(c) for c in data.get("cleared") or []}
            state.offloaded = {str(r["call_id"]): OffloadRecord.from_dict(r) for r in data.get("offloaded") or []}
            state.summary = SummaryState.from_dict(data["summary"]) if data.get("summary") else None
            ratio = float(data.get("ratio", 1.0))
            state.ratio = ratio if math.isfinite(ratio) and ratio > 0 else 1.0
            recall = data.get("mention_recall")
            state.mention_recall = None if recall is None else bool(recall)
            state.learned_windows = {str(k): int(v) for k, v in (data.get("windows") or {}).items()}
            state.last_view_estimate = _opt_int(data.get("pending_estimate"))
            state.summary_failures = int(data.get("failures") or 0)
            run = data.get("failures_run")
            state.failures_run = None if run is None else str(run)
        except (TypeError, ValueError, KeyError):
            return cls()
        return state


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
