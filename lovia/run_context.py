"""``RunContext``: the one live handle that tools, hooks, guardrails and instructions receive."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._agent_protocol import AgentLike
from .messages import Message, Usage
from .reliability import CancelToken, Mailbox, RunBudget
from .transcript import TranscriptEntry, entries_to_messages

if TYPE_CHECKING:
    from .tracing import Tracer

__all__ = ["RunContext", "idempotency_key"]

T = TypeVar("T")


def idempotency_key(run_id: str, call_id: str) -> str:
    """The stable key of one tool call: the same on every re-execution after a crash."""
    return hashlib.sha256(f"{run_id}\x00{call_id}".encode()).hexdigest()[:32]


@dataclass(eq=False)
class RunContext(Generic[T]):
    """Live state of a run, shared by everything the run calls.

    ``entries`` is the live canonical transcript (read-only by convention). Inside a tool,
    ``call_id`` and ``idempotency_key`` identify the call being executed; the key is derived
    from ``run_id`` + ``call_id`` and is identical on every re-execution of that call, so a tool
    can hand it to a payment or mail API.
    """

    context: T
    agent: AgentLike
    """The agent running now (a :class:`lovia.Agent`; it changes on a handoff)."""
    run_id: str | None = None
    """The run's global id (always set inside a run)."""
    entries: list[TranscriptEntry] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    turn: int = 0
    session_id: str | None = None
    budget: RunBudget | None = None
    cancel_token: CancelToken = field(default_factory=CancelToken)
    mailbox: Mailbox = field(default_factory=Mailbox)
    system_prompt: str = ""
    workspace: Any = None
    call_id: str | None = None
    tracer: Tracer | None = None
    resumed: bool = False
    """True when the run continues a checkpointed run."""

    @property
    def deps(self) -> T:
        """Alias of ``context``: the deps object passed to ``Runner.run(context=...)``."""
        return self.context

    @property
    def messages(self) -> list[Message]:
        """A fresh chat projection of ``entries``."""
        return entries_to_messages(self.entries)

    @property
    def idempotency_key(self) -> str | None:
        """Stable key of the tool call being executed (``None`` outside a tool)."""
        if self.call_id is None or self.run_id is None:
            return None
        return idempotency_key(self.run_id, self.call_id)

    def for_call(self, call_id: str) -> RunContext[T]:
        """A view of this context for one tool call (shares the live transcript and usage)."""
        view = copy.copy(self)
        view.call_id = call_id
        return view
