"""``Runner``: the stateless facade. One call is one run; the loop lives in :mod:`lovia.run.loop`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalChannel
from .exceptions import UserError
from .handle import EventSink, RunHandle
from .reliability import CancelToken, Mailbox
from .run.loop import RunLoop
from .run.spec import RunInput, RunSpec

if TYPE_CHECKING:
    from .agent import Agent
    from .checkpointer import CheckpointOptions
    from .context.base import ContextPolicy
    from .reliability import RetryPolicy, RunBudget
    from .result import RunResult
    from .session import Session

__all__ = ["Runner"]


class Runner:
    """Run agents: ``await Runner.run(...)``, ``Runner.run_sync(...)``, ``Runner.stream(...)``."""

    @staticmethod
    async def run(
        agent: Agent[Any],
        input: RunInput,
        *,
        context: Any = None,
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
        tracer: Any = None,
    ) -> RunResult[Any]:
        """Run ``agent`` on ``input`` to completion and return the result.

        Args:
            agent: the entry agent.
            input: a string (one user message) or a list of messages; ``[]`` with ``resume_only``.
            context: your deps object, available as ``ctx.deps``; not checkpointed.
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
        """
        # The parameters are exactly RunSpec's fields: pass them on as they came.
        return await start(RunSpec(**locals())).result()

    @staticmethod
    def run_sync(
        agent: Agent[Any],
        input: RunInput,
        *,
        context: Any = None,
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
        tracer: Any = None,
    ) -> RunResult[Any]:
        """``Runner.run`` in a fresh event loop (not allowed inside a running loop); same keywords."""
        kwargs = dict(locals())  # exactly Runner.run's parameters
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(Runner.run(**kwargs))
        raise UserError(
            "Runner.run_sync was called inside a running event loop",
            hint="use `await Runner.run(...)` in async code",
        )

    @staticmethod
    def stream(
        agent: Agent[Any],
        input: RunInput,
        *,
        context: Any = None,
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
        tracer: Any = None,
    ) -> RunHandle[Any]:
        """Start a run and return its handle: iterate events, ``await`` the result, ``cancel()``.

        Takes the same keywords as :meth:`run`. The run starts when the handle is first iterated
        or awaited.
        """
        return start(RunSpec(**locals()))  # the parameters are exactly RunSpec's fields


def start(spec: RunSpec) -> RunHandle[Any]:
    """Wrap a validated spec in a handle (internal; ``agent.as_tool`` uses it for child runs)."""
    spec.cancel_token = spec.cancel_token or CancelToken()
    spec.approvals = spec.approvals or ApprovalChannel()

    async def drive(sink: EventSink) -> RunResult[Any]:
        return await RunLoop(spec, sink).run()

    return RunHandle(drive, cancel_token=spec.cancel_token, approvals=spec.approvals)
