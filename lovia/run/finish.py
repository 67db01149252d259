"""Internal: how a run ends — the completed checkpoint, the session segment, the result, a replay,
and the terminal save of a failed run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from .._guard import save_terminal
from ..agent import Agent
from ..checkpointer import RunHead, RunSnapshot
from ..exceptions import LeaseLostError, LoviaError
from ..output import OutputSpec
from ..result import RunResult
from ..tracing import detail_span
from ..transcript import TranscriptEntry, to_json_safe
from ..usage import usage_meta
from .options import RunOptions
from .persist import CheckpointWriter, classify, error_payload
from .state import RunState

__all__ = [
    "append_session",
    "healed_timing",
    "revive_output",
    "run_result",
    "save_completed",
    "save_failed",
    "unserializable_output",
]

logger = logging.getLogger("lovia")


async def save_completed(writer: CheckpointWriter, state: RunState, output: Any, options: RunOptions) -> None:
    """Store the terminal ``completed`` head with the JSON-safe output (or why it has none)."""
    safe = to_json_safe(output)
    error = None
    if safe is None and output is not None:
        error = {"type": "OutputNotSerializable", "message": f"{type(output).__name__} is not JSON-serializable"}
    with detail_span(options.tracer, "checkpoint_save", run_id=state.run_id, status="completed"):
        await writer.save(state, status="completed", output=safe, error=error)


async def save_failed(writer: CheckpointWriter, state: RunState, exc: BaseException) -> None:
    """The terminal save of a run that stopped on ``exc`` (shielded; a refused lease is only logged)."""
    try:
        status = classify(exc)
        save = save_terminal(
            lambda error: writer.save(state, status=status, error=error), state.entries, error_payload(exc)
        )
        await asyncio.shield(save)
    except LeaseLostError:
        logger.warning("run %s: lease lost, the terminal save was refused (another worker owns the run)", state.run_id)
    except BaseException:
        logger.exception("terminal checkpoint save failed for run %s", state.run_id)


async def append_session(
    options: RunOptions,
    state: RunState,
    entries: Sequence[TranscriptEntry],
    *,
    timing: tuple[float, float] | None,
) -> None:
    """Append the run's segment to the session with its ``(started_at, finished_at)``, usage and context meta."""
    session, sid = options.session, options.session_id
    if session is None or sid is None or not entries:
        return
    meta: dict[str, Any] = {}
    if timing is not None:
        meta["timing"] = {"started_at": timing[0], "finished_at": timing[1]}
    meta["usage"] = usage_meta(state.usage, state.model_usage)
    if state.head.context_state:
        meta["context_state"] = dict(state.head.context_state)
    if state.context_notice is not None:
        meta["context_notice"] = state.context_notice.to_dict()
    await session.append(sid, list(entries), run_id=state.run_id, meta=meta)


def healed_timing(head: RunHead) -> tuple[float, float] | None:
    """A healing replay's segment timing: the stored run's first start to its last save.

    A head stored without ``started_at`` reads back with it equal to ``updated_at`` (see
    :class:`~lovia.checkpointer.RunHead`); a completed run's saves never share one instant, so that
    equality means the start is unknown, and the segment then gets no timing at all.
    """
    if head.started_at == head.updated_at:
        return None
    return (head.started_at, head.updated_at)


def run_result(
    state: RunState,
    options: RunOptions,
    output: Any,
    *,
    entries: Sequence[TranscriptEntry],
    turns: int,
    replayed: bool = False,
) -> RunResult[Any]:
    """The run's result (usage copied: the live object stays the run's)."""
    return RunResult(
        output=output,
        entries=list(entries),
        final_agent=state.agent,
        usage=state.usage.copy(),
        turns=turns,
        finish_reason=None if replayed else state.finish_reason,
        last_input_tokens=state.head.last_input_tokens,
        run_id=state.run_id,
        session_id=options.session_id,
        replayed=replayed,
    )


def replay_agent(graph: dict[str, Agent[Any]], snap: RunSnapshot, entry: Agent[Any]) -> Agent[Any]:
    """The agent that finished ``snap`` (the entry agent when it no longer exists)."""
    agent = graph.get(snap.head.agent_name)
    if agent is None:
        logger.warning(
            "replaying run %s: agent %r no longer exists; using entry agent %r",
            snap.run_id,
            snap.head.agent_name,
            entry.name,
        )
        return entry
    return agent


def revive_output(stored: Any, agent: Agent[Any], options: RunOptions, run_id: str) -> Any:
    """A stored output validated back into the run's output type.

    Raises:
        pydantic.ValidationError: The stored output does not fit the output type (the caller
            keeps the snapshot: nothing was replayed).
    """
    output_type = options.output_type if options.output_type is not None else agent.output_type
    if output_type is str or stored is None:
        return stored
    try:
        return OutputSpec(output_type).adapter.validate_python(stored)
    except Exception:
        logger.warning("stored output of run %s does not validate as %r", run_id, output_type)
        raise


def unserializable_output(snap: RunSnapshot) -> LoviaError | None:
    """The error a replay raises when the run completed with an output it could not store."""
    error = snap.head.error or {}
    if error.get("type") != "OutputNotSerializable":
        return None
    return LoviaError(
        f"run {snap.run_id!r} completed, but its output is not JSON-safe, so it was not stored and "
        f"cannot be replayed ({error.get('message') or 'no detail'})",
        hint="return JSON-safe output (str, dict, list, a pydantic model...) to replay runs, "
        "or read the answer from the session transcript",
    )
