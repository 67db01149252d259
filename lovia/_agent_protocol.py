"""``AgentLike``: the static type under which the run's own values hand an agent back.

Why it exists. :class:`lovia.Agent` is built from the run's types (its tools and hooks receive a
``RunContext``, its handoffs are ``Handoff`` values), and those types carry the agent back:
``RunContext.agent``, ``RunResult.final_agent``, ``Handoff.target`` and the ``agent`` /
``from_agent`` / ``to_agent`` event fields. Annotating them with the class itself would make
the modules import each other, if only for the type checker. This protocol sits below all of
them (it imports nothing but the provider interface and a few leaf modules), so the package's
import graph has no cycle even counting ``TYPE_CHECKING`` imports.

What it promises. At run time those values are always :class:`lovia.Agent` instances, and the
protocol describes the whole documented surface of one, read-only: every public field (as a
property) and every public method. Fields whose types live above this module (``tools``,
``handoffs``, ``context_policy``, ``hooks``, the guardrails) and the methods returning run
objects (``run``, ``run_sync``, ``stream``, ``as_tool``) are typed ``Any`` here, so reading
them through ``ctx.agent`` or ``result.final_agent`` type-checks whatever the caller does with
the value. ``clone`` and ``with_instructions`` return the same static type they are called on.

Where an agent goes back in, the entry points take this type too: ``Runner.run``,
``Runner.run_sync`` and ``Runner.stream`` accept ``Agent[Any] | AgentLike`` (and raise
:class:`~lovia.exceptions.UserError` at run time for a value that is not an ``Agent``),
``Handoff(target=...)`` and :func:`lovia.handoff.agent_as_tool` take an ``AgentLike``. So
``Runner.run(result.final_agent, "next")`` needs no cast. ``Runner`` checks no ``deps`` type
against the agent (``deps`` is ``Any``), so nothing is lost there either.

The one thing a protocol cannot do is stand where the class is required: ``x: Agent = ctx.agent``
does not type-check. Narrow instead, with ``isinstance(ctx.agent, Agent)`` or
:func:`lovia.agent.as_agent` (which raises a ``UserError`` for anything else).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .approvals import ApprovalHandler
    from .checkpointer import CheckpointOptions
    from .output import OutputRepairStrategy
    from .providers.base import ModelSettings, Provider
    from .reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
    from .run.input import RunInput
    from .session import Session
    from .tracing import Tracer

__all__ = ["AgentLike", "Instructions"]

Instructions = str | Callable[[Any], "str | Awaitable[str]"]
"""A system prompt: a string, or a sync/async callable ``(ctx) -> str`` rendered on every turn."""

_A = TypeVar("_A", bound="AgentLike")


class AgentLike(Protocol):
    """An agent as the run's values hand it back (every :class:`lovia.Agent` is one).

    Carries every documented field (read-only) and method of :class:`lovia.Agent`; see the
    module docstring for why it exists and how to get the class itself back.
    """

    # ------------------------------------------------------------------ fields

    @property
    def name(self) -> str:
        """The agent's unique name in its handoff graph."""
        ...

    @property
    def instructions(self) -> Instructions:
        """The agent's own instructions (without the fragments added by ``@agent.instruction``)."""
        ...

    @property
    def model(self) -> str | Provider | None:
        """A ``"vendor:model"`` string, a provider, or ``None`` for the run's default."""
        ...

    @property
    def tools(self) -> list[Any]:
        """The agent's tools (``lovia.Tool`` values)."""
        ...

    @property
    def output_type(self) -> Any:
        """The type the final output is validated against (``str``: plain text)."""
        ...

    @property
    def output_repair(self) -> bool | OutputRepairStrategy:
        """Whether (or how) an output that fails validation is repaired."""
        ...

    @property
    def handoffs(self) -> list[Any]:
        """The agents this one may hand over to (``Agent`` or ``Handoff`` values)."""
        ...

    @property
    def settings(self) -> ModelSettings:
        """Sampling settings sent with every model call."""
        ...

    @property
    def retry(self) -> RetryPolicy | None:
        """The retry policy of the agent's model calls."""
        ...

    @property
    def context_policy(self) -> Any:
        """The agent's context policy (a ``lovia.ContextPolicy``)."""
        ...

    @property
    def workspace(self) -> Any:
        """The agent's workspace, if it has one."""
        ...

    @property
    def plugins(self) -> list[Any]:
        """The agent's plugins."""
        ...

    @property
    def hooks(self) -> Any:
        """The agent's ``AgentHooks``, or ``None``."""
        ...

    @property
    def approval_handler(self) -> ApprovalHandler | None:
        """Decides tool approvals when no one answers the stream's approval events."""
        ...

    @property
    def input_guardrails(self) -> list[Any]:
        """Guardrails run on the input before the first model call."""
        ...

    @property
    def output_guardrails(self) -> list[Any]:
        """Guardrails run on the final output."""
        ...

    @property
    def default_tool_retries(self) -> int:
        """Retries for a tool that does not set its own."""
        ...

    @property
    def default_tool_timeout(self) -> float | None:
        """Timeout in seconds for a tool that does not set its own."""
        ...

    @property
    def max_tool_output_chars(self) -> int | None:
        """Longest tool output sent to the model, in characters (``None``: no limit)."""
        ...

    @property
    def tool_result_renderer(self) -> Callable[[Any, Any], str] | None:
        """Turns a tool's return value into the text the model sees."""
        ...

    # ------------------------------------------------------------------ methods

    def clone(self: _A, **overrides: Any) -> _A:
        """A copy with some fields replaced."""
        ...

    def instruction(self, fn: Instructions) -> Instructions:
        """Decorator: append an instruction fragment rendered after ``instructions``."""
        ...

    def with_instructions(self: _A, fn: Instructions) -> _A:
        """A clone with one more instruction fragment."""
        ...

    def resolve_provider(self) -> Provider:
        """The provider this agent talks to (a new one when built from a model string)."""
        ...

    async def render_system_prompt(self, ctx: Any, *, extra: Any = None) -> str:
        """The agent's instructions rendered for ``ctx`` (a ``RunContext``), plus ``extra``."""
        ...

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        max_turns: int = 50,
        budget: RunBudget | None = None,
        retry: RetryPolicy | None = None,
        context_policy: Any = None,
    ) -> Any:
        """This agent as a ``lovia.Tool`` another agent calls."""
        ...

    async def run(
        self,
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
        context_policy: Any = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        context: Any = None,
    ) -> Any:
        """``Runner.run(self, input, ...)``; returns a ``RunResult``."""
        ...

    def run_sync(
        self,
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
        context_policy: Any = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        context: Any = None,
    ) -> Any:
        """``Runner.run_sync(self, input, ...)``; returns a ``RunResult``."""
        ...

    def stream(
        self,
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
        context_policy: Any = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        context: Any = None,
    ) -> Any:
        """``Runner.stream(self, input, ...)``; returns a ``RunHandle``."""
        ...
