"""``RunResult``: what a finished run returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ._agent_protocol import AgentLike
from .messages import Message, Usage
from .transcript import TranscriptEntry, entries_to_messages

__all__ = ["RunResult"]

T = TypeVar("T")


@dataclass(eq=False)
class RunResult(Generic[T]):
    """The outcome of one run.

    ``entries`` holds only this run's own entries (input and everything produced, across
    handoffs): no system prompt, no prior session history; identical for fresh and resumed runs.
    """

    output: T
    entries: list[TranscriptEntry]
    final_agent: AgentLike
    """The agent active when the run ended (a :class:`lovia.Agent`; the entry agent without a handoff)."""
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    finish_reason: str | None = None
    """Last provider finish reason; ``None`` on a replay (not persisted)."""
    last_input_tokens: int | None = None
    """Input tokens of the run's last model call: how much of the context window the conversation
    filled at its end (``usage.input_tokens`` adds up every call of the run). ``None`` when no
    model call reported usage."""
    run_id: str | None = None
    session_id: str | None = None
    replayed: bool = False
    """True when a completed checkpoint was replayed instead of running the model."""

    @property
    def messages(self) -> list[Message]:
        """Lossy chat projection of ``entries``."""
        return entries_to_messages(self.entries)
