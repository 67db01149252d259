"""Internal: the normalised arguments of one run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..approvals import ApprovalChannel
from ..checkpointer import CheckpointOptions
from ..context.base import ContextPolicy
from ..exceptions import UserError
from ..messages import Message, Usage
from ..reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
from ..session import Session
from ..transcript import TranscriptEntry

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["RunInput", "RunSpec"]

RunInput = str | Message | list[Message] | list[TranscriptEntry]


@dataclass(eq=False, slots=True)
class RunSpec:
    """Everything ``Runner.run`` was given, validated once."""

    agent: Agent[Any]
    input: RunInput
    context: Any = None
    output_type: Any = None
    extra_instructions: str | None = None
    max_turns: int = 50
    budget: RunBudget | None = None
    cancel_token: CancelToken | None = None
    mailbox: Mailbox | None = None
    retry: RetryPolicy | None = None
    context_policy: ContextPolicy | None = None
    session: Session | None = None
    session_id: str | None = None
    checkpoint: CheckpointOptions | None = None
    tracer: Any = None
    parent_usage: Usage | None = None
    approvals: ApprovalChannel | None = None

    def __post_init__(self) -> None:
        from ..agent import Agent

        if not isinstance(self.agent, Agent):
            raise UserError(
                f"expected an Agent, got {type(self.agent).__name__}", hint="Runner.run(Agent(...), 'hello')"
            )
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise UserError(f"max_turns must be a positive integer, got {self.max_turns!r}", hint="the default is 50")
        if self.session is not None and not self.session_id:
            raise UserError(
                "a session needs a session_id", hint='Runner.run(agent, text, session=session, session_id="user-42")'
            )
        if self.session_id is not None and self.session is None:
            raise UserError("session_id was given without a session", hint="pass session=SQLiteSession('chat.db') too")
        if self.session is not None and not isinstance(self.session, Session):
            raise UserError(
                f"{type(self.session).__name__} is not a Session",
                hint="it needs async segments, load, append and clear methods",
            )
        if self.checkpoint is not None and not isinstance(self.checkpoint, CheckpointOptions):
            raise UserError(
                "checkpoint= takes CheckpointOptions",
                hint="checkpoint=CheckpointOptions(SQLiteCheckpointer('runs.db'), run_id)",
            )
        resume_only = self.checkpoint is not None and self.checkpoint.if_run_exists == "resume_only"
        if isinstance(self.input, list) and not self.input and not resume_only and self.checkpoint is None:
            raise UserError(
                "the run input is empty", hint="pass a message, or [] only with if_run_exists='resume_only'"
            )
        if not isinstance(self.input, (str, Message, list)):
            raise UserError(
                f"run input must be str or a list of messages, got {type(self.input).__name__}", hint="pass a string"
            )
