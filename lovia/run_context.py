"""``RunContext``: the one live handle that tools, hooks, guardrails and instructions receive."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ._agent_protocol import AgentLike
from .exceptions import UserError
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


@dataclass(eq=False, init=False)
class RunContext(Generic[T]):
    """Live state of a run, shared by everything the run calls.

    ``deps`` is the object passed to ``Runner.run(deps=...)``; ``context`` is the same value under
    its older name, and either keyword builds one (``RunContext(deps=my_deps, agent=agent)``).
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

    def __init__(
        self,
        context: T | None = None,
        agent: AgentLike | None = None,
        run_id: str | None = None,
        entries: list[TranscriptEntry] | None = None,
        usage: Usage | None = None,
        turn: int = 0,
        session_id: str | None = None,
        budget: RunBudget | None = None,
        cancel_token: CancelToken | None = None,
        mailbox: Mailbox | None = None,
        system_prompt: str = "",
        workspace: Any = None,
        call_id: str | None = None,
        tracer: Tracer | None = None,
        resumed: bool = False,
        *,
        deps: T | None = None,
    ) -> None:
        if deps is not None and context is not None and deps is not context:
            raise UserError(
                "RunContext got both deps= and context= with different values",
                hint="pass the deps object once, as deps= (context= is its older name)",
            )
        self.context = cast(T, deps if deps is not None else context)
        self.agent = cast(AgentLike, agent)
        self.run_id = run_id
        self.entries = entries if entries is not None else []
        self.usage = usage if usage is not None else Usage()
        self.turn = turn
        self.session_id = session_id
        self.budget = budget
        self.cancel_token = cancel_token if cancel_token is not None else CancelToken()
        self.mailbox = mailbox if mailbox is not None else Mailbox()
        self.system_prompt = system_prompt
        self.workspace = workspace
        self.call_id = call_id
        self.tracer = tracer
        self.resumed = resumed

    @property
    def deps(self) -> T:
        """The deps object passed to ``Runner.run(deps=...)`` (also readable as ``context``)."""
        return self.context

    @deps.setter
    def deps(self, value: T) -> None:
        self.context = value

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
        # What copy.copy does for a plain instance, without its generic protocol lookups.
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.call_id = call_id
        return view
