"""Internal: the view one model call sees — the context policy's result plus plugins' injections.

The transcript is never changed here: the policy returns a new list, and plugin injections are
appended to that list only (never persisted).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..context.base import CompactionRequest, ContextPolicy, ContextResult
from ..events import CompactionNotice, ContextCompacted, Event
from ..reliability import RunBudget
from ..transcript import InputEntry, TranscriptEntry, leading_system_count
from .activate import Active
from .state import RunState

__all__ = ["compact", "inject"]

logger = logging.getLogger("lovia")


async def compact(
    state: RunState,
    active: Active,
    policy: ContextPolicy,
    emit: Callable[[Event], Awaitable[None]],
    *,
    session_id: str | None,
    overflow: bool = False,
    reported_window: int | None = None,
    budget: RunBudget | None = None,
) -> ContextResult:
    """Ask the policy for the view; a compaction is announced (``ContextCompacted``) and noted.

    The policy gets a copy of the transcript. Tokens it spent itself (``request.usage``) are added
    to the run's usage and checked against ``budget`` before the model is called.
    """
    transcript = state.transcript
    system = transcript[0]
    empty_system = isinstance(system, InputEntry) and not system.content
    base = transcript[1:] if empty_system else transcript  # an empty system prompt is left out
    request = CompactionRequest(
        entries=list(base),  # the policy's own copy: changing it cannot change the transcript
        provider=active.provider,
        model=getattr(active.provider, "model", None),
        tools=list(active.tools.values()),
        last_input_tokens=None if overflow else state.head.last_input_tokens,  # that count was for a refused prompt
        overflow=overflow,
        reported_window=reported_window,
        scratch=state.head.context_state,
        session_id=session_id,
        run_id=state.run_id,
    )
    result = await policy.compact(request)
    if request.usage.total_tokens:
        state.usage.add(request.usage)  # what the policy spent itself (a summary call) counts to the run
        if budget is not None:
            budget.check(state.usage)  # before the model call: over budget, the model is not asked
    if not result.changed and not result.compacted:
        result.entries = list(base)  # "unchanged" means the live transcript, whatever the copy became
    head = base[: leading_system_count(base)]
    if head and not leading_system_count(result.entries):
        result.entries = [*head, *result.entries]  # a policy that dropped the system head gets it back
    if result.compacted:
        notice = CompactionNotice(
            reason="overflow"
            if overflow
            else "threshold",  # the notice keeps its two reasons; the stages are in detail
            reactive=overflow,
            summary=result.summary,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            detail=list(result.detail),
        )
        state.context_notice = notice
        await emit(
            ContextCompacted(
                session_id=session_id, entries_before=len(base), entries_after=len(result.entries), notice=notice
            )
        )
    return result


async def inject(view: list[TranscriptEntry], active: Active, ctx: Any) -> list[TranscriptEntry]:
    """Append plugins' transient entries to the view tail (fail-open: a failing injector is skipped)."""
    extra: list[TranscriptEntry] = []
    for plugin in active.plugins:
        for injector in plugin.view_injectors:
            try:
                out = injector(ctx)
                if inspect.isawaitable(out):
                    out = await out
            except Exception:
                logger.exception("view injector %r failed (ignored)", injector)
                continue
            if out:
                extra.extend(out)
    return [*view, *extra] if extra else view
