"""Compaction stages: each records new, permanent decisions into the state, cheapest first.

A stage never renders or edits anything; it only adds decisions to ``ctx.state`` and lowers
``ctx.tokens`` by what they save. :class:`~lovia.context.Compaction` runs stages in order and stops
as soon as the estimate is at or below ``ctx.target``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from .render import render_entry, summary_entry
from .state import CompactionState, OffloadRecord, SummaryState, fingerprint, unique_result_ids
from .stores import ResultStore, content_key
from .summarizer import Summarizer
from .tokens import TokenCounter

if TYPE_CHECKING:
    from ..providers.base import Provider
    from .policy import CompactionRequest

__all__ = [
    "ClearToolResults",
    "OffloadToolResults",
    "Stage",
    "StageContext",
    "SummarizeHistory",
    "pair_safe_cut",
    "safe_cut",
]

logger = logging.getLogger("lovia.context")


@dataclass(slots=True, kw_only=True)
class StageContext:
    """What a stage may read, and the running estimate it lowers."""

    state: CompactionState
    """The sticky state; stages add decisions to it, never remove them."""
    counter: TokenCounter
    """Heuristic token counts."""
    tokens: int
    """Current estimate of the whole request (calibrated); stages lower it as they save."""
    target: int
    """Stop once ``tokens`` is at or below this."""
    protected_from: int
    """Body index where the protected recent tail starts."""
    reactive: bool = False
    """True on the overflow path: per-stage thresholds are dropped."""
    store: ResultStore | None = None
    summarizer: Summarizer | None = None
    provider: Provider | None = None
    model: str | None = None
    run_id: str | None = None
    request: CompactionRequest | None = None
    """The request being served (the summarizer receives it)."""
    referable: set[str] | None = None
    """Call ids exactly one result in the body carries (only those can take a decision);
    computed on first use when ``None``."""
    detail: list[str] = field(default_factory=list)
    """Human-readable notes on what was done (end up in ``ContextResult.detail``)."""

    @property
    def over_target(self) -> bool:
        """Whether more saving is needed."""
        return self.tokens > self.target

    @property
    def visible_from(self) -> int:
        """First body index not hidden behind the summary."""
        return self.state.summary.covered if self.state.summary else 0

    def tokens_of(self, index: int, entry: TranscriptEntry) -> int:
        """Heuristic tokens of body entry ``index`` as currently rendered."""
        shown = render_entry(index, entry, self.state)
        return self.counter.count_entry(entry) if shown is entry else self.counter.measure(shown)

    def account(self, saved_heuristic: int) -> None:
        """Lower the running estimate by ``saved_heuristic`` raw tokens (scaled by the ratio)."""
        self.tokens -= round(saved_heuristic * self.state.ratio)

    def is_unprotected(self, index: int, entry: TranscriptEntry) -> bool:
        """Outside the protected tail, or (overflow path) a single result larger than the target."""
        if index < self.protected_from:
            return True
        return self.reactive and self.counter.count_entry(entry) * self.state.ratio > self.target


@runtime_checkable
class Stage(Protocol):
    """One way of shrinking the view. ``plan`` returns whether it recorded new decisions."""

    name: str

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        """Record decisions about ``body`` (the transcript without its system head) into ``ctx.state``."""
        ...


def _candidate_results(
    body: Sequence[TranscriptEntry], ctx: StageContext, keep_last: int, *, offloaded: bool = False
) -> list[int]:
    """Indices of tool results a stage may act on, oldest first: with an id no other result
    shares, not cleared, outside the protected tail and the newest ``keep_last``; with
    ``offloaded`` only archived ones, else only undecided ones."""
    state = ctx.state
    if ctx.referable is None:
        ctx.referable = unique_result_ids(body)
    referable = ctx.referable
    results: list[int] = []
    for i in range(ctx.visible_from, len(body)):
        e = body[i]
        if isinstance(e, ToolResultEntry):
            results.append(i)
    if keep_last > 0:
        results = results[:-keep_last]
    out: list[int] = []
    for i in results:
        cid = body[i].call_id  # type: ignore[union-attr]
        if cid not in referable or cid in state.cleared or (cid in state.offloaded) != offloaded:
            continue  # a shared id cannot carry a decision; decided ones are final
        if ctx.is_unprotected(i, body[i]):
            out.append(i)
    return out


@dataclass(slots=True)
class OffloadToolResults:
    """Move large tool outputs to the result store; the view keeps a preview and a reference.

    Args:
        min_chars: Only outputs at least this long move.
        keep_last: The newest results left alone (0 on the overflow path).
        preview_chars: How much of the output the view keeps.
    """

    min_chars: int = 4_000
    keep_last: int = 2
    preview_chars: int = 400
    name: str = "offload_tool_results"

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        """Replace the oldest large outputs by previews until the target is met.

        With ``ctx.store`` the full output is archived there first; without one the preview's
        reference is still the content digest, which recall finds in the transcript.
        """
        keep = 0 if ctx.reactive else self.keep_last
        floor = self.preview_chars + 400 if ctx.reactive else max(self.min_chars, self.preview_chars + 400)
        moved = 0
        for i in _candidate_results(body, ctx, keep):
            entry = body[i]
            assert isinstance(entry, ToolResultEntry)
            if entry.parts or len(entry.output) < floor:
                continue
            key = content_key(entry.output)
            if ctx.store is not None:
                try:
                    await ctx.store.put(key, entry.output)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    logger.warning("offloading tool result %s failed: %s", entry.call_id, exc)
                    ctx.detail.append(f"offload failed: {exc}")
                    break
            before = ctx.counter.count_entry(entry)
            record = OffloadRecord(preview=entry.output[: self.preview_chars], chars=len(entry.output), digest=key)
            ctx.state.offloaded[entry.call_id] = record
            ctx.account(before - ctx.tokens_of(i, entry))
            moved += 1
            if not ctx.over_target:
                break
        if moved:
            where = "to the result store" if ctx.store is not None else "(previews; no result store)"
            ctx.detail.append(f"offloaded {moved} tool result(s) {where}")
        return moved > 0


@dataclass(slots=True)
class ClearToolResults:
    """Replace old tool outputs with a short marker that keeps ``call_id`` and ``is_error``.

    Args:
        keep_last: The newest results left alone (0 on the overflow path).
        min_chars: Only outputs at least this long are cleared (ignored on the overflow path).
    """

    keep_last: int = 3
    min_chars: int = 200
    name: str = "clear_tool_results"

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        """Clear the oldest outputs until the target is met (only where the marker is smaller)."""
        keep = 0 if ctx.reactive else self.keep_last
        floor = 0 if ctx.reactive else self.min_chars
        cleared = self._clear(body, ctx, _candidate_results(body, ctx, keep), floor)
        if ctx.over_target:  # last resort: shrink archived previews to markers too
            cleared += self._clear(body, ctx, _candidate_results(body, ctx, keep, offloaded=True), 0)
        if cleared:
            ctx.detail.append(f"cleared {cleared} tool result(s)")
        return cleared > 0

    @staticmethod
    def _clear(body: Sequence[TranscriptEntry], ctx: StageContext, indices: list[int], floor: int) -> int:
        cleared = 0
        for i in indices:
            if not ctx.over_target:
                break
            entry = body[i]
            assert isinstance(entry, ToolResultEntry)
            if len(entry.output) < floor and not entry.parts:
                continue
            before = ctx.tokens_of(i, entry)
            ctx.state.cleared.add(entry.call_id)
            after = ctx.tokens_of(i, entry)
            if after >= before:
                ctx.state.cleared.discard(entry.call_id)  # never recorded: the marker would not save anything
                continue
            ctx.account(before - after)
            cleared += 1
        return cleared


def _is_turn_start(body: Sequence[TranscriptEntry], i: int) -> bool:
    e = body[i]
    if isinstance(e, InputEntry):
        return True
    if isinstance(e, (ReasoningEntry, AssistantTextEntry, ToolCallEntry)):
        return i == 0 or isinstance(body[i - 1], (InputEntry, ToolResultEntry))
    return False


def safe_cut(body: Sequence[TranscriptEntry], start: int, limit: int) -> int:
    """The latest index in ``(start, limit]`` where history can be cut: a turn starts there and
    every call before it has its result before it. Returns ``start`` when there is none."""
    limit = min(limit, len(body))
    open_calls: set[str] = set()
    best = start
    for i in range(start, limit):
        if i > start and not open_calls and _is_turn_start(body, i):
            best = i
        e = body[i]
        if isinstance(e, ToolCallEntry):
            open_calls.add(e.call_id)
        elif isinstance(e, ToolResultEntry):
            open_calls.discard(e.call_id)
    if limit > start and not open_calls and (limit == len(body) or _is_turn_start(body, limit)):
        best = limit
    return best


def pair_safe_cut(body: Sequence[TranscriptEntry], start: int, limit: int) -> int:
    """The latest index in ``(start, limit]`` where history can be cut without separating a tool
    call from its result (every call before it has its result before it). Returns ``start`` when
    there is none."""
    limit = min(limit, len(body))
    open_calls: dict[str, int] = {}
    best = start
    for i in range(start, limit):
        if i > start and not open_calls:
            best = i
        e = body[i]
        if isinstance(e, ToolCallEntry):
            open_calls[e.call_id] = open_calls.get(e.call_id, 0) + 1
        elif isinstance(e, ToolResultEntry) and e.call_id in open_calls:
            open_calls[e.call_id] -= 1
            if not open_calls[e.call_id]:
                del open_calls[e.call_id]
    if limit > start and not open_calls:
        best = limit
    return best


@dataclass(slots=True)
class SummarizeHistory:
    """Replace all history before the protected tail with an LLM-written summary.

    The summarizer is asked whenever there is something before the tail (no up-front guess of the
    summary's size); its answer is dropped only when it saves less than ``min_savings_ratio`` of
    the request.

    Args:
        min_savings_ratio: Drop a summary that saves less than this share of the request.
        max_failures: Summarizer failures per run after which the proactive path stops asking
            (the overflow path still tries: it is the breaker's half-open probe).
    """

    min_savings_ratio: float = 0.10
    max_failures: int = 3
    name: str = "summarize_history"

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        """Summarize ``body[visible_from:cut]`` (plus the previous summary), cut at the protected tail."""
        if ctx.request is None or ctx.summarizer is None:
            return False
        if ctx.provider is None and getattr(ctx.summarizer, "provider", False) is None:
            return False  # an LLM summarizer with no model to ask: nothing to try (not a failure)
        failures = ctx.state.failures_for(ctx.run_id)
        if failures >= self.max_failures and not ctx.reactive:
            ctx.detail.append(f"summarizer disabled for this run after {failures} failures")
            return False
        previous = ctx.state.summary
        start = ctx.visible_from
        cut = pair_safe_cut(body, start, ctx.protected_from)
        if cut <= start:
            return False
        shown = [render_entry(i, body[i], ctx.state) for i in range(start, cut)]
        covered = sum(ctx.tokens_of(i, body[i]) for i in range(start, cut))
        if previous is not None:
            covered += ctx.counter.measure(summary_entry(previous.text))
        try:
            text = await ctx.summarizer.summarize(
                shown, req=ctx.request, prior_summary=previous.text if previous else None
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            count = ctx.state.note_failure(ctx.run_id)
            logger.warning("summarizing history failed (%d/%d): %s", count, self.max_failures, exc)
            ctx.detail.append(f"summary failed ({count}/{self.max_failures}): {exc}")
            return False
        saved = covered - ctx.counter.measure(summary_entry(text))
        if saved <= 0 or saved * ctx.state.ratio < self.min_savings_ratio * max(ctx.tokens, 1):
            ctx.detail.append("summary discarded: it would save less than the minimum")
            return False
        ctx.state.summary = SummaryState(text=text, covered=cut, fingerprint=fingerprint(body[:cut]))
        ctx.state.forget(e.call_id for e in body[:cut] if isinstance(e, ToolResultEntry))
        ctx.account(saved)
        ctx.detail.append(f"summarized {cut - start} entries")
        return True
