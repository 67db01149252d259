"""Internal: ``RunOptions``, the keywords of one run, validated and defaulted in one place."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent, AgentLike
from ..approvals import ApprovalChannel
from ..checkpointer import CheckpointOptions
from ..context.base import ContextPolicy
from ..exceptions import UserError
from ..messages import Message, Usage
from ..reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
from ..session import Session
from ..tracing import NoopTracer, Tracer
from .input import RunInput

__all__ = ["RunInput", "RunOptions", "pick_deps"]


def pick_deps(deps: Any, context: Any) -> Any:
    """``deps=`` is the keyword; ``context=`` is its deprecated spelling (both at once is an error)."""
    if context is None:
        return deps
    warnings.warn("the context= keyword is deprecated; pass deps= instead", DeprecationWarning, stacklevel=3)
    if deps is not None:
        raise UserError("pass deps= or context=, not both", hint="context= is the old name of deps=; keep deps=")
    return context


@dataclass(frozen=True, eq=False, slots=True)
class RunOptions:
    """Everything one run was given, validated once; every default is resolved here.

    ``Runner.run``, ``run_sync``, ``stream``, ``Agent.run`` and ``agent.as_tool`` all build one of
    these and nothing downstream re-applies a default: what the loop reads is what runs.
    """

    agent: Agent[Any]
    input: RunInput
    deps: Any = None
    output_type: Any = None
    extra_instructions: str | None = None
    max_turns: int = 50
    budget: RunBudget | None = None
    cancel_token: CancelToken = field(default_factory=CancelToken)
    mailbox: Mailbox = field(default_factory=Mailbox)
    retry: RetryPolicy | None = None
    """The run's retry policy; ``None`` means no model retries (see :meth:`build`)."""
    context_policy: ContextPolicy = field(default=None)  # type: ignore[assignment]  # always set by build()
    session: Session | None = None
    session_id: str | None = None
    checkpoint: CheckpointOptions | None = None
    tracer: Tracer = field(default_factory=NoopTracer)
    parent_usage: Usage | None = None
    """A parent run's usage that this (child) run's usage is folded into when it ends."""
    approvals: ApprovalChannel = field(default_factory=ApprovalChannel)

    @classmethod
    def build(
        cls,
        agent: Agent[Any] | AgentLike,
        input: RunInput,
        *,
        deps: Any = None,
        output_type: Any = None,
        extra_instructions: str | None = None,
        max_turns: int = 50,
        budget: RunBudget | None = None,
        cancel_token: CancelToken | None = None,
        mailbox: Mailbox | None = None,
        retry: RetryPolicy | None = None,
        context_policy: ContextPolicy | None = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        parent_usage: Usage | None = None,
        approvals: ApprovalChannel | None = None,
    ) -> RunOptions:
        """Validate the keywords and fill in the defaults (the entry agent's retry and context policy).

        ``agent`` may be typed ``AgentLike`` (``result.final_agent``, ``ctx.agent``); it must be an
        :class:`Agent` at run time.
        """
        agent = _check(agent, input, max_turns=max_turns, session=session, session_id=session_id, checkpoint=checkpoint)
        return cls(
            agent=agent,
            input=input,
            deps=deps,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token or CancelToken(),
            mailbox=mailbox if mailbox is not None else Mailbox(),
            retry=retry if retry is not None else agent.retry,
            context_policy=context_policy or agent.context_policy,
            session=session,
            session_id=session_id,
            checkpoint=checkpoint,
            tracer=tracer or NoopTracer(),
            parent_usage=parent_usage,
            approvals=approvals or ApprovalChannel(),
        )


def _check(
    agent: Any,
    input: Any,
    *,
    max_turns: Any,
    session: Any,
    session_id: str | None,
    checkpoint: Any,
) -> Agent[Any]:
    if not isinstance(agent, Agent):
        raise UserError(f"expected an Agent, got {type(agent).__name__}", hint="Runner.run(Agent(...), 'hello')")
    if not isinstance(max_turns, int) or max_turns < 1:
        raise UserError(f"max_turns must be a positive integer, got {max_turns!r}", hint="the default is 50")
    if session is not None and not session_id:
        raise UserError(
            "a session needs a session_id", hint='Runner.run(agent, text, session=session, session_id="user-42")'
        )
    if session is not None and not isinstance(session, Session):
        raise UserError(
            f"{type(session).__name__} is not a Session", hint="it needs async segments, load, append and clear methods"
        )
    if checkpoint is not None and not isinstance(checkpoint, CheckpointOptions):
        raise UserError(
            "checkpoint= takes CheckpointOptions",
            hint="checkpoint=CheckpointOptions(SQLiteCheckpointer('runs.db'), run_id)",
        )
    if isinstance(input, list) and not input and checkpoint is None:
        raise UserError("the run input is empty", hint="pass a message, or [] only with if_run_exists='resume_only'")
    if not isinstance(input, (str, Message, list)):
        raise UserError(
            f"run input must be str or a list of messages, got {type(input).__name__}", hint="pass a string"
        )
    return agent
