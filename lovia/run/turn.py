"""Internal: one turn's model call and what the turn ended with.

A turn ends in one of three outcomes, which the loop dispatches on:

* :class:`Final` — the answer is in (and parsed, for structured output): the run completes.
* :class:`RunAgain` — tools ran, or a repair prompt was appended: the next turn follows.
* :class:`HandoffTo` — a handoff tool fired: the target is activated, then the next turn follows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..agent import Agent
from ..events import Event, MessageCompleted
from ..exceptions import ContextOverflowError, OutputValidationError
from ..output import RepairOnce
from ..transcript import AssistantTextEntry, InputEntry, ToolCallEntry, TranscriptEntry
from ..usage import add_model_usage
from .activate import Active
from .assemble import TurnAssembler
from .model_call import call_model
from .options import RunOptions
from .state import RunState
from .view import compact, inject

__all__ = ["Final", "HandoffTo", "RunAgain", "TurnOutcome", "answer_outcome", "model_turn"]

logger = logging.getLogger("lovia")


@dataclass(frozen=True, slots=True)
class Final:
    """The run's answer (the parsed output for structured output)."""

    value: Any


@dataclass(frozen=True, slots=True)
class RunAgain:
    """Another turn follows with the same agent."""


@dataclass(frozen=True, slots=True)
class HandoffTo:
    """A handoff fired this turn: ``target`` takes over before the next turn."""

    target: Agent[Any]


TurnOutcome = Final | RunAgain | HandoffTo


async def model_turn(
    state: RunState,
    active: Active,
    options: RunOptions,
    emit: Callable[[Event], Awaitable[None]],
    save: Callable[[], Awaitable[None]],
    *,
    stream_deltas: bool = True,
) -> list[TranscriptEntry]:
    """Build the view, call the model (once more after a reactive compaction), record the reply.

    ``stream_deltas=False``: nobody listens, so text and reasoning deltas are not emitted."""
    view = await _view(state, active, options, emit, overflow=False, reported_window=None)
    try:
        assembled = await _call(state, active, options, emit, view, stream_deltas)
    except ContextOverflowError as exc:
        logger.warning("context.overflow run_id=%s window=%s", state.run_id, exc.reported_window)
        result = await compact(
            state,
            active,
            options.context_policy,
            emit,
            session_id=options.session_id,
            overflow=True,
            reported_window=exc.reported_window,
            budget=options.budget,
        )
        if not result.compacted:
            raise
        view = await inject(result.entries, active, state.ctx)
        assembled = await _call(state, active, options, emit, view, stream_deltas)
    state.usage.add(assembled.usage)
    add_model_usage(state.model_usage, active.model_key, assembled.usage)
    if assembled.usage.input_tokens:
        state.head.last_input_tokens = assembled.usage.input_tokens
    state.finish_reason = assembled.finish_reason
    entries = state.append(assembled.entries(turn=state.turns))  # cleaned by the text policy (lovia._text)
    await emit(MessageCompleted(entries=list(entries)))
    await save()
    if options.budget is not None:
        options.budget.check(state.usage)
    return entries


async def _view(
    state: RunState,
    active: Active,
    options: RunOptions,
    emit: Callable[[Event], Awaitable[None]],
    *,
    overflow: bool,
    reported_window: int | None,
) -> list[TranscriptEntry]:
    result = await compact(
        state,
        active,
        options.context_policy,
        emit,
        session_id=options.session_id,
        overflow=overflow,
        reported_window=reported_window,
        budget=options.budget,
    )
    return await inject(result.entries, active, state.ctx)


async def _call(
    state: RunState,
    active: Active,
    options: RunOptions,
    emit: Callable[[Event], Awaitable[None]],
    view: list[TranscriptEntry],
    stream_deltas: bool,
) -> TurnAssembler:
    return await call_model(
        active.provider,
        view,
        tools=list(active.tools.values()) or None,
        response_format=active.response_format(),
        settings=active.agent.settings,
        retry=options.retry,
        emit=emit,
        tracer=options.tracer,
        turn=state.turns,
        stream_deltas=stream_deltas,
    )


def answer_outcome(state: RunState, active: Active) -> Final | RunAgain:
    """Parse the final answer; when it does not fit the output type, append a repair prompt or raise."""
    text = last_answer_text(state.entries)
    if active.output is None:
        if not text:
            logger.warning("run %s ended with an empty answer", state.run_id)
        return Final(text)
    try:
        return Final(active.output.parse(text))
    except OutputValidationError as exc:
        strategy = active.agent.output_repair
        if strategy is False:
            raise
        if strategy is True:
            strategy = RepairOnce()
        state.head.repair_attempts += 1
        prompt = strategy.build_prompt(exc, state.head.repair_attempts)
        if prompt is None:
            raise
        state.append([InputEntry(role="user", content=prompt)])
        return RunAgain()


def last_answer_text(entries: list[TranscriptEntry]) -> str:
    """The text of the last assistant message (its text entries after the last non-assistant entry)."""
    parts: list[str] = []
    for entry in reversed(entries):
        if isinstance(entry, AssistantTextEntry):
            parts.append(entry.content)
        elif not isinstance(entry, ToolCallEntry) and entry.type != "reasoning":
            break
    return "".join(reversed(parts))
