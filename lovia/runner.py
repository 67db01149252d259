"""``Runner``: the stateless facade. One call is one run; the loop lives in :mod:`lovia.run.loop`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .exceptions import BudgetExceeded, InvalidToolArguments, ToolError, UserError
from .handle import EventSink, RunHandle
from .handoff import generated_tool_name
from .result import RunResult
from .run import entry
from .run.input import RunInput
from .run.loop import RunLoop
from .run.options import RunOptions, pick_deps
from .run_context import RunContext
from .tools import Tool

if TYPE_CHECKING:
    from .agent import Agent, AgentLike
    from .checkpointer import CheckpointOptions
    from .context.base import ContextPolicy
    from .reliability import CancelToken, Mailbox, RetryPolicy, RunBudget
    from .session import Session
    from .tracing import Tracer

__all__ = ["RunHandle", "RunResult", "Runner"]


class Runner:
    """Run agents: ``await Runner.run(...)``, ``Runner.run_sync(...)``, ``Runner.stream(...)``."""

    @staticmethod
    async def run(
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
        context: Any = None,
    ) -> RunResult[Any]:
        """Run ``agent`` on ``input`` to completion and return the result.

        Args:
            agent: the entry agent. A value typed ``AgentLike`` (``result.final_agent``,
                ``ctx.agent``, a handoff target) is accepted: it is an ``Agent`` at run time.
            input: a string (one user message) or a list of messages; ``[]`` with ``resume_only``.
            deps: your dependencies object, available to tools as ``ctx.deps``; not checkpointed.
            output_type: run-wide output type (binds every agent reached by handoff).
            extra_instructions: per-run system addendum, re-applied after each handoff.
            max_turns: model turns before ``MaxTurnsExceeded``.
            budget: a fresh ``RunBudget`` for this run.
            cancel_token: cancel from outside; created when omitted.
            mailbox: steering messages drained at each turn start; created when omitted.
            retry: retry posture for the whole run (default: the entry agent's).
            context_policy: view-shaping posture for the whole run (default: the entry agent's).
            session: history store; needs ``session_id``.
            session_id: the conversation key.
            checkpoint: ``CheckpointOptions`` for crash recovery and idempotent re-issue.
            tracer: a ``Tracer`` for spans.
            context: deprecated spelling of ``deps`` (warns).
        """
        options = RunOptions.build(
            agent,
            input,
            deps=pick_deps(deps, context),
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
        )
        return await start(options).result()

    @staticmethod
    def run_sync(
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
        context: Any = None,
    ) -> RunResult[Any]:
        """``Runner.run`` in a fresh event loop (not allowed inside a running loop); same keywords."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            options = RunOptions.build(
                agent,
                input,
                deps=pick_deps(deps, context),
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
            )
            return asyncio.run(_result(options))
        raise UserError(
            "Runner.run_sync was called inside a running event loop",
            hint="use `await Runner.run(...)` in async code",
        )

    @staticmethod
    def stream(
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
        context: Any = None,
    ) -> RunHandle[Any]:
        """Start a run and return its handle: iterate events, ``await`` the result, ``cancel()``.

        Takes the same keywords as :meth:`run`. The run starts when the handle is first iterated
        or awaited.
        """
        options = RunOptions.build(
            agent,
            input,
            deps=pick_deps(deps, context),
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
        )
        return start(options)


def agent_tool(
    agent: Agent[Any],
    *,
    name: str | None = None,
    description: str | None = None,
    max_turns: int = 50,
    budget: RunBudget | None = None,
    retry: RetryPolicy | None = None,
    context_policy: ContextPolicy | None = None,
) -> Tool[Any]:
    """``agent`` as a tool ``ask_<slug>(input)`` whose each call is a child run (see ``Agent.as_tool``)."""

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        prompt = args.get("input")
        if not isinstance(prompt, str) or not prompt:
            raise InvalidToolArguments("'input' must be a non-empty string", hint="pass the question as input")
        try:
            options = RunOptions.build(
                agent,
                prompt,
                deps=ctx.context,
                max_turns=max_turns,
                budget=budget.copy() if budget else None,
                cancel_token=ctx.cancel_token,
                retry=retry,
                context_policy=context_policy,
                tracer=ctx.tracer,
                parent_usage=ctx.usage,
            )
            result = await start(options).result()
        except BudgetExceeded as exc:
            raise ToolError(
                f"sub-agent {agent.name!r} ran out of budget: {exc.message}", hint="narrow the question"
            ) from exc
        return result.output

    return Tool(
        name=name or generated_tool_name("ask_", agent.name),
        description=description or f"Ask the agent {agent.name!r}. It sees only the input you give it.",
        parameters={
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The full request for the agent."}},
            "required": ["input"],
        },
        invoke=invoke,
    )


async def _result(options: RunOptions) -> RunResult[Any]:
    return await start(options).result()


def start(options: RunOptions) -> RunHandle[Any]:
    """Wrap validated options in a handle (internal; ``agent.as_tool`` uses it for child runs)."""

    async def drive(sink: EventSink) -> RunResult[Any]:
        return await RunLoop(options, sink).run()

    return RunHandle(drive, cancel_token=options.cancel_token, approvals=options.approvals)


entry.install(Runner, agent_tool)
