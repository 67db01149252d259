"""``Agent``: plain configuration (no conversation state) that ``Runner`` executes."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._agent_protocol import AgentLike, Instructions
from .context.base import ContextPolicy
from .context.compaction import Compaction
from .exceptions import UserError
from .handoff import Handoff
from .hooks import AgentHooks
from .output import OutputRepairStrategy
from .providers.base import ModelSettings, Provider
from .providers.registry import resolve_model
from .reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
from .run import entry
from .run.input import RunInput
from .tools._tool import Tool

if TYPE_CHECKING:
    from .approvals import ApprovalHandler
    from .checkpointer import CheckpointOptions
    from .guardrails import Guardrail
    from .handle import RunHandle
    from .result import RunResult
    from .run_context import RunContext
    from .session import Session
    from .tracing import Tracer

__all__ = ["Agent", "AgentLike", "Instructions", "as_agent"]

Deps = TypeVar("Deps")


def _default_context_policy() -> ContextPolicy:
    return Compaction()


@dataclass(eq=False)
class Agent(Generic[Deps]):
    """An agent: instructions, a model, tools and handoffs. Every default is a literal.

    ``instructions`` may be a string or a sync/async callable ``(ctx) -> str`` re-evaluated on
    every render of the system prompt. Register more fragments with ``@agent.instruction``.
    """

    name: str
    instructions: Instructions = ""
    model: str | Provider | None = None
    tools: list[Tool[Any]] = field(default_factory=list)
    output_type: Any = str
    output_repair: bool | OutputRepairStrategy = True
    handoffs: list[Agent[Any] | Handoff] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=ModelSettings)
    retry: RetryPolicy | None = field(default_factory=RetryPolicy)
    context_policy: ContextPolicy = field(default_factory=_default_context_policy)
    workspace: Any = None
    plugins: list[Any] = field(default_factory=list)
    hooks: AgentHooks | None = None
    approval_handler: ApprovalHandler | None = None
    input_guardrails: list[Guardrail] = field(default_factory=list)
    output_guardrails: list[Guardrail] = field(default_factory=list)
    default_tool_retries: int = 0
    default_tool_timeout: float | None = None
    max_tool_output_chars: int | None = 200_000
    tool_result_renderer: Callable[[Any, Any], str] | None = None
    _fragments: tuple[Instructions, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError("an Agent needs a non-empty name", hint='Agent(name="assistant", ...)')
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UserError(
                f"Agent {self.name!r} has duplicate tool names {dupes}", hint="give each tool a unique name"
            )

    # ------------------------------------------------------------------ configuration

    def clone(self, **overrides: Any) -> Agent[Deps]:
        """A copy with some fields replaced (referenced objects such as the policy are shared)."""
        return dataclasses.replace(self, **overrides)

    def instruction(self, fn: Instructions) -> Instructions:
        """Decorator: append an instruction fragment rendered after ``instructions``."""
        self._fragments = (*self._fragments, fn)
        return fn

    def with_instructions(self, fn: Instructions) -> Agent[Deps]:
        """A clone with one more instruction fragment (this agent is unchanged)."""
        return self.clone(_fragments=(*self._fragments, fn))

    async def render_instructions(self, ctx: RunContext[Any]) -> list[str]:
        """The agent's own instruction blocks, rendered (empty ones skipped)."""
        blocks: list[str] = []
        for item in (self.instructions, *self._fragments):
            text = item(ctx) if callable(item) else item
            if inspect.isawaitable(text):
                text = await text
            if text:
                blocks.append(str(text))
        return blocks

    @property
    def handoff_list(self) -> list[Handoff]:
        """``handoffs`` normalised to :class:`Handoff` objects."""
        return [_as_handoff(h) for h in self.handoffs]

    # ------------------------------------------------------------------ shortcuts

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
        context_policy: ContextPolicy | None = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        context: Any = None,
    ) -> RunResult[Any]:
        """Shortcut for ``Runner.run(self, input, ...)`` (same keywords)."""
        done: RunResult[Any] = await entry.runner().run(
            self,
            input,
            deps=deps,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token,
            mailbox=mailbox,
            retry=retry,
            context_policy=context_policy,
            session=session,
            session_id=session_id,
            checkpoint=checkpoint,
            tracer=tracer,
            context=context,
        )
        return done

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
        context_policy: ContextPolicy | None = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        context: Any = None,
    ) -> RunResult[Any]:
        """Shortcut for ``Runner.run_sync(self, input, ...)`` (same keywords)."""
        done: RunResult[Any] = entry.runner().run_sync(
            self,
            input,
            deps=deps,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token,
            mailbox=mailbox,
            retry=retry,
            context_policy=context_policy,
            session=session,
            session_id=session_id,
            checkpoint=checkpoint,
            tracer=tracer,
            context=context,
        )
        return done

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
        context_policy: ContextPolicy | None = None,
        session: Session | None = None,
        session_id: str | None = None,
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
        context: Any = None,
    ) -> RunHandle[Any]:
        """Shortcut for ``Runner.stream(self, input, ...)`` (same keywords)."""
        done: RunHandle[Any] = entry.runner().stream(
            self,
            input,
            deps=deps,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token,
            mailbox=mailbox,
            retry=retry,
            context_policy=context_policy,
            session=session,
            session_id=session_id,
            checkpoint=checkpoint,
            tracer=tracer,
            context=context,
        )
        return done

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        max_turns: int = 50,
        budget: RunBudget | None = None,
        retry: RetryPolicy | None = None,
        context_policy: ContextPolicy | None = None,
    ) -> Tool[Any]:
        """This agent as a tool ``ask_<slug>(input)``: the child sees only that prompt.

        The child inherits deps, cancel token and tracer; its usage folds into the parent;
        it gets its own mailbox and a fresh copy of ``budget`` per invocation. A child budget
        overrun becomes an error result for the parent.
        """
        made: Tool[Any] = entry.agent_tool()(
            self,
            name=name,
            description=description,
            max_turns=max_turns,
            budget=budget,
            retry=retry,
            context_policy=context_policy,
        )
        return made

    def resolve_provider(self) -> Provider:
        """The provider this agent talks to: ``model`` itself, or one built from its model string.

        A provider built here is new and belongs to the caller (close it with ``aclose()``).

        Raises:
            UserError: The agent has no model, or the model string is invalid.
        """
        return resolve_model(self.model, agent_name=self.name)

    async def render_system_prompt(
        self, ctx: RunContext[Any], *, extra: str | Callable[[RunContext[Any]], Any] | None = None
    ) -> str:
        """This agent's instructions rendered for ``ctx``, plus ``extra`` (text or ``(ctx) -> str``).

        Blocks are joined by a blank line. Plugin instructions and the output-format block are
        added by the run on top of this.
        """
        blocks = await self.render_instructions(ctx)
        if extra is not None:
            text = extra(ctx) if callable(extra) else extra
            if inspect.isawaitable(text):
                text = await text
            if text:
                blocks.append(str(text))
        return "\n\n".join(blocks)


def _as_handoff(item: Agent[Any] | Handoff) -> Handoff:
    if isinstance(item, Handoff):
        return item
    if isinstance(item, Agent):
        return Handoff(target=item)
    raise UserError(
        f"handoffs items must be Agent or Handoff, got {type(item).__name__}", hint="wrap targets in Handoff(...)"
    )


def as_agent(value: AgentLike | Agent[Any]) -> Agent[Any]:
    """``value`` as the :class:`Agent` it is at run time.

    ``RunContext.agent``, ``RunResult.final_agent``, ``Handoff.target`` and the event fields are
    typed :class:`AgentLike`; this narrows one of them back to the class, for code that needs
    the static type ``Agent`` itself (``agent: Agent[Any] = as_agent(ctx.agent)``).

    Raises:
        UserError: ``value`` is not an :class:`Agent`.
    """
    if isinstance(value, Agent):
        return value
    raise UserError(
        f"expected an Agent, got {type(value).__name__}",
        hint="handoff targets must be lovia.Agent instances: Handoff(target=Agent(name=...))",
    )


def _is_agent_like(agent: Agent[Any]) -> AgentLike:
    """Never called: the type checker proves here that every ``Agent`` is an ``AgentLike``."""
    return agent
