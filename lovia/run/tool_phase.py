"""Internal: one turn's tool calls — serial preflight, concurrent execution, barriers.

Preflight runs in request order (cancel and budget checks, lookup, handoff dedupe, argument
validation, approval). Ready calls start at once and run concurrently; a barrier
(``parallel=False`` or a handoff) waits for running calls, then runs alone. Results are recorded
in completion order, each followed by a checkpoint save. Ordinary tool exceptions become error
results; cancellation, own-budget stops and store failures cancel running siblings and end the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..agent import Agent, as_agent
from ..approvals import ApprovalChannel
from ..events import ApprovalRequired, Event, ToolCallCompleted, ToolCallFailed, ToolCallStarted
from ..exceptions import BudgetExceeded, InvalidToolArguments, RunCancelled, ToolError
from ..messages import ToolCall
from ..reliability import RunBudget
from ..tools import RERUN, Tool, parse_arguments, render_tool_result, run_tool, truncate_tool_output
from ..tracing import Tracer, record_tool_io
from ..transcript import ToolCallEntry, ToolResultEntry
from .activate import Active
from .state import RunState

__all__ = ["OUTCOME_UNKNOWN", "ToolPhase"]

logger = logging.getLogger("lovia")

RAW_KEEP_LIMIT = 16_000
"""A result whose rendered text is longer than this keeps ``raw=None`` even when not truncated."""

OUTCOME_UNKNOWN = (
    "Tool error: outcome unknown. This call was interrupted by a crash before its result was stored, "
    "and the tool is not idempotent, so it was not run again. Check whether the action took effect "
    "before retrying it."
)


@dataclass(slots=True)
class _Ready:
    call: ToolCall
    tool: Tool[Any]
    args: dict[str, Any]


class ToolPhase:
    """Runs the tool calls of one turn for the active agent, recording results in the run state.

    ``emit`` hands an event to hooks and the stream; ``save`` checkpoints the state. Each result
    is appended, announced (``ToolCallCompleted``) and saved before the next one is recorded.
    """

    def __init__(
        self,
        active: Active,
        state: RunState,
        *,
        approvals: ApprovalChannel,
        budget: RunBudget | None,
        tracer: Tracer,
        emit: Callable[[Event], Awaitable[None]],
        save: Callable[[], Awaitable[None]],
    ) -> None:
        self.active = active
        self.state = state
        self.approvals = approvals
        self.budget = budget
        self.tracer = tracer
        self.emit = emit
        self.save = save
        self.handoff_fired = False

    async def run(self, calls: list[ToolCallEntry], *, resumed: frozenset[str] = frozenset()) -> Agent[Any] | None:
        """Execute ``calls`` and return the handoff target one of them fired (``None``: no handoff).

        ``resumed`` holds ids of non-idempotent calls that had started before a crash.
        """
        running: set[asyncio.Task[None]] = set()
        try:
            for entry in calls:
                call = ToolCall(id=entry.call_id, name=entry.name, arguments=entry.arguments)
                try:
                    ready = await self._preflight(call, interrupted=call.id in resumed)
                except BudgetExceeded:
                    await self._wait(running)  # in-flight calls finish and persist first
                    raise
                if ready is None:
                    continue
                if ready.tool.parallel and not ready.tool.is_handoff:
                    running.add(asyncio.ensure_future(self._execute(ready)))
                    continue
                await self._wait(running)
                running.clear()
                await self._execute(ready)
            await self._wait(running)
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        return self.state.pending_target

    @staticmethod
    async def _wait(tasks: set[asyncio.Task[None]]) -> None:
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                for other in pending:
                    other.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                raise task.exception()  # type: ignore[misc]
        tasks.clear()

    # ------------------------------------------------------------------ preflight

    async def _preflight(self, call: ToolCall, *, interrupted: bool) -> _Ready | None:
        self.state.ctx.cancel_token.check()
        if self.budget is not None:
            self.budget.count_tool_call(self.state.usage)
        tools = self.active.tools
        tool = tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            await self._reject(call, f"Tool error: unknown tool {call.name!r}. Available tools: {known}.")
            return None
        if tool.is_handoff and self.handoff_fired:
            await self._reject(call, "Tool error: only one handoff per turn; this transfer was ignored.")
            return None
        try:
            args = parse_arguments(call.arguments)
            if "_raw" in args and len(args) == 1 and isinstance(args["_raw"], str):
                parse_arguments(args["_raw"])  # re-raise the original JSON error for the model
            tool.validate(args)
        except InvalidToolArguments as exc:
            await self._reject(call, f"Invalid arguments for tool {call.name!r}: {exc.message}", error=exc)
            return None
        if tool.needs_approval:
            try:
                approved = await self._approved(call, tool, args)
            except (RunCancelled, asyncio.CancelledError):
                raise
            except Exception as exc:  # a predicate or handler that raises is a denial, not a crash
                logger.warning("approval for %s failed; denying: %s", call.name, exc)
                message = f"Tool error: the call to {call.name!r} was not approved (the approval check failed)."
                await self._reject(call, message, error=exc)
                return None
            if not approved:
                await self._reject(call, f"Tool error: the call to {call.name!r} was not approved.")
                return None
        if tool.is_handoff:
            self.handoff_fired = True
        if interrupted and not tool.idempotent:
            return await self._reconcile(call, tool, args)
        return _Ready(call, tool, args)

    async def _reject(self, call: ToolCall, message: str, *, error: BaseException | None = None) -> None:
        if error is not None:
            await self.emit(ToolCallFailed(error=error, call=call))
        await self._record(call, ToolResultEntry(call_id=call.id, output=message, is_error=True), raw=message)

    async def _approved(self, call: ToolCall, tool: Tool[Any], args: dict[str, Any]) -> bool:
        """Whether the call may run; an exception from the predicate or the handler propagates."""
        ctx = self.state.ctx
        gated = tool.needs_approval
        if callable(gated):
            verdict = gated(args, ctx)
            gated = await verdict if inspect.isawaitable(verdict) else verdict
        if not gated:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.approvals.register(call, future)
        try:
            await self.emit(ApprovalRequired(call=call, _decision=future))
            if future.done():
                return future.result()
            handler = self.active.agent.approval_handler
            if handler is not None:
                decision = handler(call, ctx)
                if inspect.isawaitable(decision):
                    decision = await decision
                if decision in (True, "allow", "approve"):
                    return True
                if decision != "ask":
                    return False
            if self.approvals.opted_in:  # someone watches handle.approvals: wait for them
                return await future
            return False  # "ask" with nobody to ask (or no handler at all): fail closed
        finally:
            if not future.done():
                future.cancel()

    async def _reconcile(self, call: ToolCall, tool: Tool[Any], args: dict[str, Any]) -> _Ready | None:
        """A non-idempotent call that started before a crash: never blindly re-run it."""
        ctx = self.state.ctx.for_call(call.id)
        if tool.reconcile is None:
            await self._record(call, ToolResultEntry(call_id=call.id, output=OUTCOME_UNKNOWN, is_error=True), raw=None)
            return None
        try:
            verdict = tool.reconcile(args, ctx)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            await self._finish_error(call, exc)
            return None
        if verdict is RERUN:
            return _Ready(call, tool, args)
        await self._finish_ok(call, tool, verdict, ctx)
        return None

    # ------------------------------------------------------------------ execution

    async def _execute(self, ready: _Ready) -> None:
        call, tool, agent = ready.call, ready.tool, self.active.agent
        ctx = self.state.ctx.for_call(call.id)
        if not tool.idempotent:
            self.state.call_started(call.id)
            await self.save()  # persisted before it runs, so a crash is not retried blindly
        logger.debug("tool.start %s call_id=%s", call.name, call.id)
        await self.emit(ToolCallStarted(call=call))
        retries = tool.retries if tool.retries is not None else agent.default_tool_retries
        timeout = tool.timeout if tool.timeout is not None else agent.default_tool_timeout
        failures: list[BaseException] = []
        with self.tracer.span("tool_call", name=call.name, call_id=call.id) as span:
            try:
                raw = await run_tool(
                    tool, ready.args, ctx, retries=retries, timeout=timeout, on_attempt_failed=failures.append
                )
                record_tool_io(span, call.arguments, raw)
            except (RunCancelled, asyncio.CancelledError):
                raise
            except BudgetExceeded:
                raise
            except Exception as exc:
                span.record_exception(exc)
                for failure in failures[:-1]:
                    await self.emit(ToolCallFailed(error=failure, call=call))
                await self._finish_error(call, exc)
                return
        for failure in failures:
            await self.emit(ToolCallFailed(error=failure, call=call))
        if tool.is_handoff:
            self._fire_handoff(call.name)  # before the result save, so the checkpoint records it
        await self._finish_ok(call, tool, raw, ctx)

    def _fire_handoff(self, tool_name: str) -> None:
        for h in self.active.agent.handoff_list:
            if h.tool_name == tool_name:
                self.state.fire_handoff(as_agent(h.target))
                return

    async def _finish_ok(self, call: ToolCall, tool: Tool[Any], raw: Any, ctx: Any) -> None:
        agent = self.active.agent
        renderer = tool.result_renderer or agent.tool_result_renderer
        try:
            output, parts = render_tool_result(raw, ctx, renderer=renderer)
        except Exception as exc:
            await self._finish_error(call, exc)
            return
        cap = tool.max_output_chars if tool.max_output_chars is not None else agent.max_tool_output_chars
        truncated = truncate_tool_output(output, cap)
        # A big result is not kept twice (as text and raw value) in the transcript and checkpoints.
        keep_raw = raw if truncated is output and len(output) <= RAW_KEEP_LIMIT else None
        entry = ToolResultEntry(call_id=call.id, output=truncated, raw=keep_raw, parts=parts)
        await self._record(call, entry, raw=raw)

    async def _finish_error(self, call: ToolCall, exc: BaseException) -> None:
        logger.info("tool.error %s call_id=%s error=%s", call.name, call.id, exc)
        await self.emit(ToolCallFailed(error=exc, call=call))
        if isinstance(exc, ToolError):
            message = f"Tool error: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")
        else:
            message = f"Tool error: {type(exc).__name__}: {exc}"
        await self._record(call, ToolResultEntry(call_id=call.id, output=message, is_error=True), raw=None)

    async def _record(self, call: ToolCall, entry: ToolResultEntry, *, raw: Any) -> None:
        """Append one tool result, emit ``ToolCallCompleted`` and save."""
        self.state.call_finished(call.id)
        (entry,) = self.state.append([entry])  # the event shows what is stored (text policy applied)
        await self.emit(completed_event(call, entry, raw))
        await self.save()


def completed_event(call: ToolCall, entry: ToolResultEntry, raw: Any) -> ToolCallCompleted:
    """The terminal event of one call."""
    return ToolCallCompleted(call=call, result=raw, is_error=entry.is_error, output=entry.output)
