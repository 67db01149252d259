"""The default context policy: :class:`Compaction`.

Each call does three things, in order:

1. **Sync** the transcript into a per-run cache (only appended entries are counted and rendered;
   a transcript that is not a continuation of the cached one is re-rendered in full and the
   carried state is validated against it).
2. **Plan** only when needed: when the estimate exceeds ``compact_at`` (down to ``compact_to``),
   or on the reactive overflow path. Stages add sticky decisions to the state.
3. **Render**: the view is the system head plus the cached rendering of the body. Decisions never
   change once taken, so between compactions each view extends the previous one byte for byte.

The carried state lives in ``req.scratch`` (JSON-safe, persisted by the loop).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..transcript import InputEntry, ToolResultEntry, TranscriptEntry, leading_system_count
from .policy import CompactionRequest, ContextResult
from .recall import recall_tool_result
from .render import RECALL_TOOL_NAME, render_body, render_entry, summary_cover
from .stages import ClearToolResults, OffloadToolResults, Stage, StageContext, SummarizeHistory
from .state import CompactionState, SummaryState, fingerprint, unique_result_ids, window_key
from .stores import ResultStore
from .summarizer import LLMSummarizer, Summarizer
from .tokens import TokenBudget, TokenCounter, calibrate, check_levels
from .window import resolve_window

if TYPE_CHECKING:
    from ..tools._tool import Tool

__all__ = ["Compaction"]

logger = logging.getLogger("lovia.context")

_MAX_CACHED_RUNS = 64


@dataclass(slots=True)
class _RunCache:
    """Per-run incremental bookkeeping (never persisted; rebuilt from scratch on a miss)."""

    scratch: dict[str, Any]
    state: CompactionState
    body: list[TranscriptEntry]
    view: list[TranscriptEntry]
    raw_total: int = 0
    view_total: int = 0


class Compaction:
    """Keep each model call inside the context window without touching the transcript.

    Args:
        context_window: The model's window in tokens; ``None`` asks the provider, and when nothing
            knows it only the reactive (overflow) path acts.
        compact_at: Compact when the estimate exceeds this. A float is a fraction of the usable
            window (window minus ``reserve_output_tokens``); an int is absolute tokens.
        compact_to: Compact down to this (same units); must be below ``compact_at``.
        keep_recent_tokens: Size of the protected recent tail (at least 1); default max(1, usable // 5).
        reserve_output_tokens: Tokens kept free for the answer.
        stages: Stages to run, cheapest first; default offload, clear, summarize.
        summarizer: Writes summaries; default :class:`LLMSummarizer` on the run's provider.
        image_tokens: Flat token cost of an image.
        store: Where offloaded outputs go; without one, nothing is offloaded.

    Raises:
        ValueError: A level or size is out of range, or ``compact_to`` is not below ``compact_at``.
    """

    def __init__(
        self,
        *,
        context_window: int | None = None,
        compact_at: int | float = 0.85,
        compact_to: int | float = 0.60,
        keep_recent_tokens: int | None = None,
        reserve_output_tokens: int = 16_384,
        stages: Sequence[Stage] | None = None,
        summarizer: Summarizer | None = None,
        image_tokens: int = 1_600,
        store: ResultStore | None = None,
    ) -> None:
        check_levels(compact_at, compact_to, names=("compact_at", "compact_to"))
        if context_window is not None and context_window <= 0:
            raise ValueError("context_window must be positive")
        if keep_recent_tokens is not None and keep_recent_tokens < 1:
            raise ValueError("keep_recent_tokens must be at least 1 (or None for usable // 5)")
        if reserve_output_tokens < 0 or image_tokens < 0:
            raise ValueError("reserve_output_tokens and image_tokens must not be negative")
        self.context_window = context_window
        self.compact_at = compact_at
        self.compact_to = compact_to
        self.keep_recent_tokens = keep_recent_tokens
        self.reserve_output_tokens = reserve_output_tokens
        self.stages: list[Stage] = (
            list(stages) if stages is not None else [OffloadToolResults(), ClearToolResults(), SummarizeHistory()]
        )
        self.summarizer: Summarizer = summarizer if summarizer is not None else LLMSummarizer()
        self.store = store
        # The engine's own calibration: a large memo (a long session is counted once), files at 4,000 tokens.
        self.counter = TokenCounter(image_tokens=image_tokens, file_tokens=4_000, memo_size=200_000)
        self._caches: OrderedDict[int, _RunCache] = OrderedDict()
        self._tools: list[Tool[Any]] | None = None

    def tools(self) -> list[Tool[Any]]:
        """The ``recall_tool_result`` tool, bound to this policy's store."""
        if self._tools is None:
            self._tools = [recall_tool_result(self.store)]
        return list(self._tools)

    def budget(self, window: int) -> TokenBudget:
        """The absolute levels this policy uses for ``window``."""
        return TokenBudget(
            window,
            reserve_output=self.reserve_output_tokens,
            trigger=self.compact_at,
            target=self.compact_to,
            keep_recent_tokens=self.keep_recent_tokens,
        )

    # ------------------------------------------------------------------ the call

    async def compact(self, req: CompactionRequest) -> ContextResult:
        """Return this call's view, compacting first when the estimate calls for it."""
        cache = self._sync(req)
        state = cache.state
        n_sys = leading_system_count(req.entries)
        system = req.entries[:n_sys]
        exact = _exact_counter(req.provider)
        tools = self.counter.count_tools(req.tools)
        if not req.overflow and exact is None:
            self._calibrate(req, state, tools)
        if req.overflow and req.reported_window:
            # The newest report wins, even when it names a larger window than the one learned before.
            state.learned_windows[window_key(req.provider, req.model)] = req.reported_window
        fixed = self.counter.count_all(system)
        before = self._estimate(cache, system, fixed, req, exact)
        budget = await self._budget_for(req, state, before)
        compacted = False
        notes: list[str] = []
        acted: list[str] = []
        summary_text: str | None = None
        if budget is not None and (req.overflow or before > budget.trigger_tokens):
            sig = _signature(state)
            cleared, offloaded = set(state.cleared), set(state.offloaded)
            acted, notes = await self._plan(cache, req, budget, before)
            if state.summary is not sig[2]:
                self._rerender(cache)
            else:  # a preview that shrank to a marker is among the newly cleared
                self._patch(cache, (state.cleared - cleared) | (set(state.offloaded) - offloaded))
            after_plan = self._estimate(cache, system, fixed, req, exact)
            compacted = _signature(state)[:3] != sig[:3] and after_plan < before
            if compacted and state.summary is not None and state.summary is not sig[2]:
                summary_text = state.summary.text
            notes.insert(0, f"context was {round(100 * budget.pressure(before))}% full")
            state.save(req.scratch)
        after = self._estimate(cache, system, fixed, req, exact)
        state.last_view_estimate = fixed + cache.view_total
        state.save_calibration(req.scratch)
        return ContextResult(
            entries=list(system) + cache.view,
            changed=state.has_decisions,
            compacted=compacted,
            reason=_reason(compacted, acted, state.has_decisions, reactive=req.overflow),
            summary=summary_text,
            tokens_before=round(state.ratio * (fixed + cache.raw_total)) + tools if exact is None else before,
            tokens_after=after,
            detail=notes,
        )

    # ------------------------------------------------------------------ planning

    async def _budget_for(self, req: CompactionRequest, state: CompactionState, estimate: int) -> TokenBudget | None:
        window = await resolve_window(
            self.context_window, state.learned_windows.get(window_key(req.provider, req.model)), req.provider
        )
        if window is not None:
            budget = self.budget(window)
            return budget.aggressive() if req.overflow else budget
        if not req.overflow:
            return None
        # Unknown window and the provider refused the prompt: plan as if the failed prompt had
        # filled the usable window exactly (tail at most usable // 10, target 25% of usable).
        return self.budget(max(estimate, 1) + self.reserve_output_tokens).aggressive()

    async def _plan(
        self, cache: _RunCache, req: CompactionRequest, budget: TokenBudget, estimate: int
    ) -> tuple[list[str], list[str]]:
        """Run the stages in order until the estimate is at or below the target; returns the
        names of the stages that acted and the notes they left."""
        state = cache.state
        if state.mention_recall is None:
            state.mention_recall = any(getattr(t, "name", None) == RECALL_TOOL_NAME for t in req.tools)
        ctx = StageContext(
            state=state,
            counter=self.counter,
            tokens=estimate,
            target=budget.target_tokens,
            protected_from=0,
            reactive=req.overflow,
            store=self.store,
            summarizer=self.summarizer,
            provider=req.provider,
            model=req.model,
            run_id=req.run_id,
            request=req,
        )
        ctx.protected_from = _protected_start(cache.body, ctx, budget.keep_recent)
        acted: list[str] = []
        for stage in self.stages:
            if not ctx.over_target:
                break
            name = str(getattr(stage, "name", type(stage).__name__))
            try:
                if await stage.plan(cache.body, ctx):
                    acted.append(_STAGE_REASONS.get(name, name))
            except Exception as exc:  # a broken custom stage must not fail the run
                logger.warning("context stage %s failed: %s", name, exc)
                ctx.detail.append(f"stage {name} failed: {exc}")
        return acted, ctx.detail

    def _calibrate(self, req: CompactionRequest, state: CompactionState, tools: int) -> None:
        """Fold the provider's count for the previous view into the ratio. The tool schemas are a
        fixed payload outside the ratio: they are taken off the reported count first."""
        pending, state.last_view_estimate = state.last_view_estimate, None
        if req.last_input_tokens and pending:
            state.ratio = calibrate(state.ratio, max(req.last_input_tokens - tools, 0) / pending)

    def _estimate(
        self, cache: _RunCache, system: Sequence[TranscriptEntry], fixed: int, req: CompactionRequest, exact: Any
    ) -> int:
        if exact is not None:
            return int(exact(list(system) + cache.view)) + self.counter.count_tools(req.tools)
        # The tool schemas enter additively: the calibration ratio scales the entries only.
        return round(cache.state.ratio * (fixed + cache.view_total)) + self.counter.count_tools(req.tools)

    # ------------------------------------------------------------------ the incremental cache

    def _sync(self, req: CompactionRequest) -> _RunCache:
        key = id(req.scratch)
        cache = self._caches.get(key)
        if cache is None or cache.scratch is not req.scratch:
            state = CompactionState.load(req.scratch)
            donor = self._donor(req.entries, state)
            cache = _RunCache(scratch=req.scratch, state=state, body=[], view=[])
            self._caches[key] = cache
            while len(self._caches) > _MAX_CACHED_RUNS:
                self._caches.popitem(last=False)
            if donor is None:
                self._rebuild(cache, req.entries)
                return cache
            # A new run continuing an earlier one's history with the same decisions: start from
            # its bookkeeping (a pointer copy), so only this run's entries are counted and rendered.
            cache.body, cache.view = list(donor.body), list(donor.view)
            cache.raw_total, cache.view_total = donor.raw_total, donor.view_total
        else:
            self._caches.move_to_end(key)
        n_sys = leading_system_count(req.entries)
        if not _continues(cache.body, req.entries, n_sys):
            self._rebuild(cache, req.entries)
            return cache
        reused = False
        for entry in req.entries[n_sys + len(cache.body) :]:
            index = len(cache.body)
            if isinstance(entry, ToolResultEntry) and cache.state.decided(entry.call_id):
                reused = True  # an id a decision is keyed by came back: the decision is ambiguous now
            cache.body.append(entry)
            cache.raw_total += self.counter.count_entry(entry)
            shown = render_entry(index, entry, cache.state)
            cache.view.append(shown)
            cache.view_total += self.counter.count_entry(shown)
        if reused:
            cache.state.prune(unique_result_ids(cache.body))
            cache.state.save(cache.scratch)
            self._rerender(cache)
        return cache

    def _donor(self, entries: Sequence[TranscriptEntry], state: CompactionState) -> _RunCache | None:
        """The newest cached run whose body ``entries`` continue and whose decisions ``state`` has."""
        n_sys = leading_system_count(entries)
        room = len(entries) - n_sys
        wanted: tuple[Any, ...] | None = None
        for cache in reversed(self._caches.values()):
            if not cache.body or len(cache.body) > room or not _continues(cache.body, entries, n_sys):
                continue
            if wanted is None:
                wanted = _render_key(state)
            if _render_key(cache.state) == wanted:
                return cache
        return None

    def _rebuild(self, cache: _RunCache, entries: Sequence[TranscriptEntry]) -> None:
        n_sys = leading_system_count(entries)
        cache.body = list(entries[n_sys:])
        cache.raw_total = self.counter.count_all(cache.body)
        if not cache.state.has_decisions:  # nothing to fit or render differently: the view is the body
            cache.view, cache.view_total = list(cache.body), cache.raw_total
            return
        if _validate(cache.state, cache.body):
            cache.state.save(cache.scratch)
        self._rerender(cache)

    def _patch(self, cache: _RunCache, call_ids: set[str]) -> None:
        """Re-render only the results whose decisions changed (the summary did not)."""
        if not call_ids:
            return
        start = summary_cover(cache.body, cache.state.summary.covered) if cache.state.summary else 0
        offset = 1 - start if start else 0
        for i in range(start, len(cache.body)):
            entry = cache.body[i]
            if not isinstance(entry, ToolResultEntry) or entry.call_id not in call_ids:
                continue
            pos = i + offset
            if pos < 0 or pos >= len(cache.view):
                continue
            shown = render_entry(i, entry, cache.state)
            cache.view_total += self.counter.measure(shown) - self.counter.measure(cache.view[pos])
            cache.view[pos] = shown

    def _rerender(self, cache: _RunCache) -> None:
        cache.view = render_body(cache.body, cache.state)
        cache.view_total = self.counter.count_all(cache.view)


_STAGE_REASONS = {"offload_tool_results": "offload", "clear_tool_results": "clear", "summarize_history": "summary"}
"""How the built-in stages are named in ``ContextResult.reason``."""


def _reason(compacted: bool, acted: list[str], has_decisions: bool, *, reactive: bool) -> str | None:
    """``ContextResult.reason``: the stages that acted joined by "+" (prefixed "reactive_" on the
    overflow path), "sticky_replay" when only earlier decisions shape the view, else ``None``."""
    if compacted:
        names = "+".join(dict.fromkeys(acted)) or "compaction"
        return f"reactive_{names}" if reactive else names
    return "sticky_replay" if has_decisions else None


def _continues(body: list[TranscriptEntry], entries: Sequence[TranscriptEntry], n_sys: int | None = None) -> bool:
    """Whether ``entries`` extends the cached body (spot-checked: the transcript is append-only).
    ``n_sys``: ``leading_system_count(entries)`` when the caller has it already."""
    n = len(body)
    if n_sys is None:
        n_sys = leading_system_count(entries)
    if len(entries) - n_sys < n:
        return False
    if n == 0:
        return True
    return all(entries[n_sys + i] is body[i] for i in {0, n // 2, n - 1})


def _render_key(state: CompactionState) -> tuple[Any, ...]:
    """What rendering depends on: two states with equal keys render every entry alike."""
    data = state.to_dict()
    return (data["cleared"], data["offloaded"], data["summary"], data["mention_recall"])


def _validate(state: CompactionState, body: Sequence[TranscriptEntry]) -> bool:
    """Fit the state to ``body`` (history rewritten, or loaded from elsewhere); True if it changed.

    A summary whose covered entries no longer match is dropped; one whose coverage ends inside a
    tool call/result pair is rewound to the nearest earlier boundary (dropped if there is none).
    Decisions about results that are gone or share their id are pruned.
    """
    changed = False
    summary = state.summary
    if summary is not None and (
        summary.covered > len(body) or fingerprint(body[: summary.covered]) != summary.fingerprint
    ):
        state.summary, changed = None, True
    elif summary is not None:
        cover = summary_cover(body, summary.covered)
        if cover != summary.covered:
            changed = True
            state.summary = (
                SummaryState(text=summary.text, covered=cover, fingerprint=fingerprint(body[:cover])) if cover else None
            )
    sizes = (len(state.cleared), len(state.offloaded))
    state.prune(unique_result_ids(body))
    return changed or sizes != (len(state.cleared), len(state.offloaded))


def _signature(state: CompactionState) -> tuple[int, int, object, int]:
    return (len(state.cleared), len(state.offloaded), state.summary, state.summary_failures)


def _exact_counter(provider: object) -> Any:
    fn = getattr(provider, "estimate_tokens", None)
    return fn if callable(fn) else None


def _protected_start(body: Sequence[TranscriptEntry], ctx: StageContext, keep_tokens: int) -> int:
    """Body index where the protected tail starts: ~``keep_tokens`` of recent entries, widened to
    whole call/result pairs, and (not on the overflow path) back to the latest user message when
    that stays affordable."""
    lo = ctx.visible_from
    ratio = ctx.state.ratio
    start, acc = len(body), 0.0
    while start > lo:
        cost = ctx.tokens_of(start - 1, body[start - 1]) * ratio
        if acc + cost > keep_tokens and start < len(body):
            break
        acc += cost
        start -= 1
    needed = {getattr(e, "call_id", None) for e in body[start:] if e.type == "tool_result"}
    needed -= {getattr(e, "call_id", None) for e in body[start:] if e.type == "tool_call"}
    while needed and start > lo:
        start -= 1
        e = body[start]
        if e.type == "tool_call":
            needed.discard(getattr(e, "call_id", None))
        acc += ctx.tokens_of(start, e) * ratio
    if ctx.reactive:
        return start  # the overflow path keeps the tail within its (tightened) size
    affordable, extra = ctx.target // 2, 0.0
    for u in range(start - 1, lo - 1, -1):  # stops as soon as it gets too expensive
        e = body[u]
        extra += ctx.tokens_of(u, e) * ratio
        if acc + extra > affordable:
            break
        if isinstance(e, InputEntry) and e.role == "user":
            start = u
            break
    return start
