"""``Runner``: the stateless facade. One call is one run; the loop lives in :mod:`lovia.run.loop`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .exceptions import UserError
from .handle import EventSink, RunHandle
from .result import RunResult
from .run.input import RunInput
from .run.loop import RunLoop
from .run.options import RunOptions, pick_deps

if TYPE_CHECKING:
    from .agent import Agent
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
        agent: Agent[Any],
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
            agent: the entry agent.
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
        agent: Agent[Any],
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
        agent: Agent[Any],
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


async def _result(options: RunOptions) -> RunResult[Any]:
    return await start(options).result()


def start(options: RunOptions) -> RunHandle[Any]:
    """Wrap validated options in a handle (internal; ``agent.as_tool`` uses it for child runs)."""

    async def drive(sink: EventSink) -> RunResult[Any]:
        return await RunLoop(options, sink).run()

    return RunHandle(drive, cancel_token=options.cancel_token, approvals=options.approvals)
