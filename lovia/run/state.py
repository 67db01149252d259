"""Internal: ``RunState``, the one mutable record of a run in flight.

The durable fields live in a :class:`~lovia.checkpointer.RunHead` (declared there, once): the
loop mutates ``state.head`` as the run goes and a checkpoint save writes a copy of it together
with the run's new entries. What is live only (the active ``Agent`` object, the full transcript,
the compaction notice) sits next to it here and is never persisted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._text import clean_entries
from ..agent import Agent
from ..checkpointer import RunHead, RunSnapshot
from ..events import CompactionNotice
from ..messages import Usage
from ..run_context import RunContext
from ..transcript import TranscriptEntry

__all__ = ["RunState"]

E = TypeVar("E", bound=TranscriptEntry)


@dataclass(eq=False, slots=True)
class RunState:
    """A run's state: the durable head, its own entries and the live objects that go with them."""

    run_id: str
    agent: Agent[Any]
    """The active agent; ``head.agent_name`` always names it (see :meth:`switch_to`)."""
    ctx: RunContext[Any]
    head: RunHead
    """The durable fields; ``head.usage`` is the live usage object the context shares."""
    entries: list[TranscriptEntry] = field(default_factory=list)
    """The run's own entries (input and everything produced): what the checkpoint stores."""
    transcript: list[TranscriptEntry] = field(default_factory=list)
    """System entry + session history + own entries: what views are built from."""
    pending_target: Agent[Any] | None = None
    """The agent a handoff fired for this turn (``head.pending_handoff`` holds its name)."""
    context_notice: CompactionNotice | None = None
    finish_reason: str | None = None

    @classmethod
    def new(cls, run_id: str, agent: Agent[Any], ctx: RunContext[Any], *, started_at: float) -> RunState:
        """A fresh state for ``agent``; ``ctx.usage`` and ``ctx.entries`` become the live ones."""
        head = RunHead(agent_name=agent.name, usage=ctx.usage, started_at=started_at, updated_at=started_at)
        state = cls(run_id=run_id, agent=agent, ctx=ctx, head=head)
        ctx.entries = state.transcript
        return state

    @property
    def usage(self) -> Usage:
        """The run's live usage (shared with ``ctx.usage``)."""
        return self.head.usage

    @property
    def model_usage(self) -> dict[str, Usage]:
        """The run's usage per ``"vendor:model"`` (``head.model_usage``, every attempt)."""
        return self.head.model_usage

    @property
    def turns(self) -> int:
        """Turns started so far."""
        return self.head.turns

    def switch_to(self, agent: Agent[Any]) -> None:
        """Make ``agent`` the active agent: the one place the run changes agents."""
        self.agent = agent
        self.ctx.agent = agent
        self.head.agent_name = agent.name

    def restore(self, snap: RunSnapshot, agent: Agent[Any], pending: Agent[Any] | None) -> None:
        """Continue ``snap``: take over its head (usage added to the live one) and its entries."""
        stored = snap.head
        self.switch_to(agent)
        self.ctx.resumed = True
        self.usage.add(stored.usage)
        head = self.head
        head.turns = stored.turns
        head.context_state = dict(stored.context_state)
        head.last_input_tokens = stored.last_input_tokens
        head.started_calls = list(stored.started_calls)
        head.repair_attempts = stored.repair_attempts
        head.started_at = stored.started_at
        head.model_usage = {model: usage.copy() for model, usage in stored.model_usage.items()}
        head.trace = stored.trace
        head.provider_state = dict(stored.provider_state)
        if pending is not None:
            self.fire_handoff(pending)
        self.entries.extend(snap.entries)

    def append(self, entries: Sequence[E]) -> list[E]:
        """Add entries to the run (its own entries and the transcript together); returns them as
        stored, with the text policy (:mod:`lovia._text`) applied."""
        cleaned = clean_entries(entries)
        self.transcript.extend(cleaned)
        self.entries.extend(cleaned)
        return cleaned

    def begin_turn(self) -> None:
        """Count a new turn (the context sees its number)."""
        self.head.turns += 1
        self.ctx.turn = self.head.turns

    def fire_handoff(self, target: Agent[Any]) -> None:
        """Record a handoff that fired; it is applied after the turn's tools."""
        self.pending_target = target
        self.head.pending_handoff = target.name

    def take_handoff(self) -> Agent[Any] | None:
        """The pending handoff target, cleared."""
        target, self.pending_target = self.pending_target, None
        self.head.pending_handoff = None
        return target

    def call_started(self, call_id: str) -> None:
        """A non-idempotent call is about to run (a crash must not re-run it blindly)."""
        self.head.started_calls.append(call_id)

    def call_finished(self, call_id: str) -> None:
        """A call's result is recorded."""
        if call_id in self.head.started_calls:
            self.head.started_calls.remove(call_id)

    def saved_head(self, *, updated_at: float) -> RunHead:
        """A copy of the head to store (nothing in it is shared with the live state)."""
        head = self.head.copy()
        head.updated_at = updated_at
        return head
