"""The event catalog: what a run emits, in order, to the stream and to hooks (same objects).

Families: ``RunEvent``, ``TurnEvent``, ``DeltaEvent``, ``MessageEvent``, ``ToolEvent``,
``TransitionEvent``, ``ErrorEvent``, ``ContextEvent``, all deriving from ``Event``. Every run
ends with exactly one terminal event: ``RunCompleted`` or ``RunFailed``.

Note: these ``TextDelta``/``ReasoningDelta`` (field ``delta``) are not the provider deltas of
:mod:`lovia.transcript` (field ``text``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._agent_protocol import AgentLike
from .messages import ToolCall
from .transcript import TranscriptEntry

if TYPE_CHECKING:
    from .result import RunResult

__all__ = [
    "ApprovalRequired",
    "CompactionNotice",
    "ContextCompacted",
    "ContextEvent",
    "DeltaEvent",
    "ErrorEvent",
    "Event",
    "HandoffOccurred",
    "MessageCompleted",
    "MessageEvent",
    "ModelRetrying",
    "OutputDiscarded",
    "ProviderFailedOver",
    "ReasoningDelta",
    "RunCompleted",
    "RunEvent",
    "RunFailed",
    "RunStarted",
    "TextDelta",
    "ToolCallCompleted",
    "ToolCallFailed",
    "ToolCallStarted",
    "ToolEvent",
    "TransitionEvent",
    "TurnEnded",
    "TurnEvent",
    "TurnStarted",
    "UserMessageInjected",
]


class Event:
    """Base of every event."""

    __slots__ = ()


class RunEvent(Event):
    """Run lifecycle."""

    __slots__ = ()


class TurnEvent(Event):
    """Turn lifecycle."""

    __slots__ = ()


class DeltaEvent(Event):
    """Streaming fragments."""

    __slots__ = ()


class MessageEvent(Event):
    """Whole messages entering the transcript."""

    __slots__ = ()


class ToolEvent(Event):
    """Tool calls."""

    __slots__ = ()


class TransitionEvent(Event):
    """Agent changes."""

    __slots__ = ()


class ErrorEvent(Event):
    """Non-terminal failures (observability)."""

    __slots__ = ()


class ContextEvent(Event):
    """Context-window management."""

    __slots__ = ()


@dataclass(slots=True)
class RunStarted(RunEvent):
    """Emitted once, first."""

    agent: AgentLike


@dataclass(slots=True)
class RunCompleted(RunEvent):
    """Terminal success."""

    result: RunResult[Any]


@dataclass(slots=True)
class RunFailed(RunEvent):
    """Terminal failure; ``result()`` raises ``error``."""

    error: BaseException


@dataclass(slots=True)
class TurnStarted(TurnEvent):
    """Before the mailbox drain and the model call."""

    agent: AgentLike
    turn: int


@dataclass(slots=True)
class TurnEnded(TurnEvent):
    """After the turn's tools."""

    agent: AgentLike
    turn: int


@dataclass(slots=True)
class TextDelta(DeltaEvent):
    """A fragment of assistant text."""

    delta: str


@dataclass(slots=True)
class ReasoningDelta(DeltaEvent):
    """A fragment of model thinking."""

    delta: str


@dataclass(slots=True)
class OutputDiscarded(DeltaEvent):
    """Deltas streamed so far in this turn are void: the model call is being retried."""


@dataclass(slots=True)
class MessageCompleted(MessageEvent):
    """The assistant turn was assembled; ``entries`` are the new transcript entries."""

    entries: list[TranscriptEntry]


@dataclass(slots=True)
class UserMessageInjected(MessageEvent):
    """A mailbox item became a user entry at the start of ``turn``."""

    content: Any
    turn: int


@dataclass(slots=True)
class ToolCallStarted(ToolEvent):
    """Right before a tool executes."""

    call: ToolCall


@dataclass(slots=True)
class ToolCallCompleted(ToolEvent):
    """Terminal per call (completion order): ``result`` raw, ``output`` as the model sees it."""

    call: ToolCall
    result: Any
    is_error: bool = False
    output: str = ""


@dataclass(slots=True)
class ApprovalRequired(ToolEvent):
    """A gated call waits for a decision: call ``approve()`` or ``reject()``."""

    call: ToolCall
    _decision: asyncio.Future[bool] | None = field(default=None, repr=False, compare=False)

    def approve(self) -> None:
        """Allow the call."""
        self._decide(True)

    def reject(self) -> None:
        """Deny the call."""
        self._decide(False)

    def _decide(self, value: bool) -> None:
        fut = self._decision
        if fut is not None and not fut.done():
            fut.get_loop().call_soon_threadsafe(_set_if_pending, fut, value)


def _set_if_pending(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


@dataclass(slots=True)
class ToolCallFailed(ErrorEvent):
    """A tool attempt failed (non-terminal; the model still gets a result)."""

    error: BaseException
    call: ToolCall | None = None


@dataclass(slots=True)
class ModelRetrying(ErrorEvent):
    """A model call failed transiently; attempt ``attempt + 1`` of ``max_attempts`` follows in ``delay`` s."""

    error: BaseException
    attempt: int
    max_attempts: int
    delay: float


@dataclass(slots=True)
class HandoffOccurred(TransitionEvent):
    """The active agent changed (sent to both agents' hooks)."""

    from_agent: AgentLike
    to_agent: AgentLike


@dataclass(slots=True)
class CompactionNotice:
    """What the context policy did to a view (JSON-safe)."""

    reason: str
    reactive: bool = False
    summary: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    detail: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "reason": self.reason,
            "reactive": self.reactive,
            "summary": self.summary,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "detail": list(self.detail),
        }


@dataclass(slots=True)
class ContextCompacted(ContextEvent):
    """The policy compacted this turn's view (the transcript is untouched)."""

    session_id: str | None
    entries_before: int
    entries_after: int
    notice: CompactionNotice


@dataclass(slots=True)
class ProviderFailedOver(ErrorEvent):
    """A :class:`~lovia.providers.failover.FailoverProvider` gave up on one member for the next."""

    from_provider: str
    """``name:model`` of the member that kept failing."""
    to_provider: str
    """``name:model`` of the member that answers from now on."""
    error: BaseException
    """The last error of the member given up on."""
    attempts: int
    """How many calls that member failed."""
