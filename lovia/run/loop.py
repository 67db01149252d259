"""Internal: ``RunLoop``, the one place that owns a run's mutable state.

The steps, in order (reference section 3):

1. Pre-flight: apply the checkpoint's ``if_run_exists`` policy -> fresh, resume or replay.
   A replay emits ``RunStarted`` + ``RunCompleted`` only, re-appends the session segment
   (idempotent) and never calls the model.
2. Setup: activate the agent (provider, plugins, tools, output contract), render the system
   prompt, load session history, then ``[system] + history + (snapshot | input)``.
3. ``RunStarted``; input guardrails (fresh runs only); on resume, drain dangling tool calls
   under the restored turn number and complete a recorded, unapplied handoff.
4. Turns until a final answer: limits -> ``TurnStarted`` -> mailbox drain (+ save) -> view ->
   model call under the retry policy -> ``MessageCompleted`` (+ save) -> tools (+ save per
   result) or the answer -> ``TurnEnded``; the turn's outcome (:mod:`lovia.run.turn`) says
   what follows: complete, run again, or hand off and run again (+ save).
5. Completion: output guardrails -> checkpoint ``completed`` -> session append -> delete on
   success -> ``RunCompleted``. Failure: terminal save (shielded) -> ``RunFailed`` -> re-raise.

The run's state is a :class:`~lovia.run.state.RunState`; the active agent is an
:class:`~lovia.run.activate.Active` value, replaced only when a handoff is applied.
"""

from __future__ import annotations

import logging
from typing import Any

from .._guard import raise_as_lovia_error
from .._text import clean_entries
from ..agent import Agent
from ..checkpointer import RunSnapshot
from ..events import (
    Event,
    HandoffOccurred,
    RunCompleted,
    RunFailed,
    RunStarted,
    TurnEnded,
    TurnStarted,
    UserMessageInjected,
)
from ..exceptions import MaxTurnsExceeded
from ..guardrails import run_guardrails
from ..handle import EventSink
from ..providers.failover import provider_state, restore_provider_state
from ..result import RunResult
from ..run_context import RunContext
from ..session import new_run_id
from ..tracing import Span, detail_span, link_first_attempt, record_run_end, span_ref
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    entries_to_messages,
    input_to_entries,
    unanswered_tool_calls,
)
from ..workspace._attach import with_workspace
from .activate import Active, activate, system_entry
from .cancel import cancel_scope
from .finish import (
    append_session,
    healed_timing,
    replay_agent,
    revive_output,
    run_result,
    save_completed,
    save_failed,
    unserializable_output,
)
from .options import RunOptions
from .persist import CheckpointWriter, agent_graph, classify, load_history, now, plan_run, resume_agents
from .scope import RunScope
from .state import RunState
from .tool_phase import ToolPhase
from .turn import Final, HandoffTo, RunAgain, TurnOutcome, answer_outcome, model_turn

__all__ = ["RunLoop"]

logger = logging.getLogger("lovia")


class RunLoop:
    """Drives one run from pre-flight to its terminal event."""

    def __init__(self, options: RunOptions, sink: EventSink) -> None:
        self.options = options
        self.sink = sink
        self.entry_agent: Agent[Any] = options.agent
        run_id = options.checkpoint.effective_run_id if options.checkpoint else new_run_id()
        ctx: RunContext[Any] = RunContext(
            context=options.deps,
            agent=options.agent,
            run_id=run_id,
            session_id=options.session_id,
            budget=options.budget,
            cancel_token=options.cancel_token,
            mailbox=options.mailbox,
            tracer=options.tracer,
        )
        self.state = RunState.new(run_id, options.agent, ctx, started_at=now())
        self.scope = RunScope()
        self.active: Active | None = None
        self._actives: dict[int, Active] = {}  # each agent is activated (plugins set up) once per run
        self.writer: CheckpointWriter | None = None
        self._claimed: CheckpointWriter | None = None  # leased before planning, not yet writing
        self._finalized = False
        self._passthrough: BaseException | None = None  # an error that leaves the run unwrapped
        self._turn_mark = 0
        self._in_turn = False

    # ================================================================== entry point

    async def run(self) -> RunResult[Any]:
        """Run to completion and return the result; on failure emit ``RunFailed`` and re-raise."""
        state = self.state
        with self.options.tracer.span("run", agent=self.entry_agent.name, run_id=state.run_id) as span:
            try:
                result = await self._run(span)
                record_run_end(
                    span, turns=result.turns, total_tokens=result.usage.total_tokens, resumed=state.ctx.resumed
                )
                return result
            except BaseException as exc:
                span.set_attribute("resumed", state.ctx.resumed)
                span.record_exception(exc)
                await self._fail(exc)
                if exc is self._passthrough:
                    raise
                raise_as_lovia_error(exc)  # anything else escaping is still a LoviaError with a hint
            finally:
                await self._cleanup()

    async def _run(self, span: Span) -> RunResult[Any]:
        options, state = self.options, self.state
        await self._claim()
        plan = await plan_run(options.checkpoint)
        if plan.mode == "replay":
            assert plan.snapshot is not None
            return await self._replay(plan.snapshot)
        history, carried = await load_history(options.session, options.session_id)
        if plan.mode == "resume":
            assert plan.snapshot is not None
            state.restore(plan.snapshot, *resume_agents(self.entry_agent, plan.snapshot))
        else:
            state.head.context_state = dict(carried)
            state.entries.extend(clean_entries(input_to_entries(options.input)))
        if state.head.trace is None:
            state.head.trace = span_ref(span)  # the first traced attempt
        else:
            link_first_attempt(span, state.head.trace)
        active = await self._activate(state.agent)
        if plan.mode == "resume":
            restore_provider_state(active.provider, state.head.provider_state)
        state.transcript[:] = [await system_entry(active, state.ctx, options.extra_instructions), *history]
        state.transcript.extend(state.entries)
        await self._open_writer(persisted=len(plan.snapshot.entries) if plan.snapshot else 0)
        logger.info("run.start agent=%s run_id=%s mode=%s", state.agent.name, state.run_id, plan.mode)
        await self.emit(RunStarted(agent=state.agent))
        if plan.mode == "fresh":
            await self._input_guardrails(active)
            await self.save()
        else:
            outcome = await self._continue_resumed(active)
            if isinstance(outcome, Final):
                return await self._complete(outcome.value)
        while True:
            with detail_span(options.tracer, "turn", turn=state.turns + 1, agent=state.agent.name):
                outcome = await self._turn()
                if isinstance(outcome, HandoffTo):
                    await self._apply_handoff()
                if not isinstance(outcome, Final):
                    await self.save()
            if isinstance(outcome, Final):
                return await self._complete(outcome.value)

    # ================================================================== setup

    async def _activate(self, agent: Agent[Any]) -> Active:
        """Make ``agent`` the active one; its plugins are set up on its first activation only."""
        self.state.switch_to(agent)
        active = self._actives.get(id(agent))
        if active is None:
            active = await activate(agent, self.options, self.scope, self.state.ctx)
            active = await with_workspace(active, self.state.ctx, self.scope.closers)
            self._actives[id(agent)] = active
        self.active = active
        return active

    async def _input_guardrails(self, active: Active) -> None:
        guards = [*active.agent.input_guardrails, *(g for p in active.plugins for g in p.input_guardrails)]
        if guards:
            with detail_span(self.options.tracer, "guardrail", kind="input", count=len(guards)):
                messages = entries_to_messages(self.state.transcript)
                await run_guardrails(guards, messages, self.state.ctx, kind="input")

    async def _claim(self) -> None:
        # With a lease, take it before reading (or, with "restart", deleting) the snapshot: a
        # caller that gets RunBusy must not have touched the run, and the snapshot we plan from
        # cannot move under us once we hold the lease.
        options = self.options.checkpoint
        if options is None or options.checkpointer is None or options.lease_ttl is None:
            return
        writer = CheckpointWriter(options)
        await writer.start()
        self._claimed = writer

    async def _open_writer(self, *, persisted: int) -> None:
        options = self.options.checkpoint
        if options is None or options.checkpointer is None:
            return
        writer, self._claimed = self._claimed, None
        if writer is None:
            writer = CheckpointWriter(options, persisted=persisted)
            await writer.start()
        else:
            writer.rebase(persisted)
        self.writer = writer  # only a started writer: a refused lease must not lead to a save in _fail

    # ================================================================== events and saves

    async def emit(self, event: Event) -> None:
        """Dispatch hooks (same object), then hand the event to the stream."""
        ctx = self.state.ctx
        hooks = self.state.agent.hooks
        if hooks is not None:
            await hooks.dispatch(event, ctx)
        for plugin in self.active.plugins if self.active is not None else ():
            if plugin.hooks is not None:
                await plugin.hooks.dispatch(event, ctx)
        await self.sink(event)

    def _deltas_wanted(self, active: Active) -> bool:
        """Whether anyone sees text and reasoning deltas: a hook, or a reader of the stream."""
        from ..handle import _drop  # the sink of a run nobody iterates

        if self.sink is not _drop or self.state.agent.hooks is not None:
            return True
        return any(plugin.hooks is not None for plugin in active.plugins)

    async def save(self) -> None:
        """Checkpoint the run if it has a checkpointer."""
        if self.writer is not None:
            if self.active is not None:
                self.state.head.provider_state = provider_state(self.active.provider)
            with detail_span(self.options.tracer, "checkpoint_save", run_id=self.state.run_id):
                await self.writer.save(self.state)

    def _tool_phase(self, active: Active) -> ToolPhase:
        options = self.options
        return ToolPhase(
            active,
            self.state,
            approvals=options.approvals,
            budget=options.budget,
            tracer=options.tracer,
            emit=self.emit,
            save=self.save,
        )

    # ================================================================== turns

    async def _continue_resumed(self, active: Active) -> TurnOutcome:
        """Re-execute dangling calls under the restored turn, apply a recorded handoff."""
        state = self.state
        dangling = unanswered_tool_calls(state.entries)
        if dangling:
            state.ctx.turn = state.turns
            await self.emit(TurnStarted(agent=state.agent, turn=state.turns))
            async with cancel_scope(state.ctx.cancel_token):
                await self._tool_phase(active).run(dangling, resumed=frozenset(state.head.started_calls))
            await self.emit(TurnEnded(agent=state.agent, turn=state.turns))
        elif state.pending_target is None and state.entries and isinstance(state.entries[-1], AssistantTextEntry):
            # The crash came after the final answer was saved: finish without a model call.
            state.ctx.turn = state.turns
            return answer_outcome(state, active)
        if dangling or state.pending_target is not None:
            await self._apply_handoff()
            await self.save()
        return RunAgain()

    async def _turn(self) -> TurnOutcome:
        options, state = self.options, self.state
        if state.turns >= options.max_turns:
            raise MaxTurnsExceeded(
                f"run {state.run_id!r} reached max_turns={options.max_turns}",
                hint="raise max_turns, or re-issue the same run_id to continue from the checkpoint",
            )
        state.ctx.cancel_token.check()
        if options.budget is not None:
            options.budget.check(state.usage)
        self._turn_mark = len(state.entries)
        self._in_turn = True
        state.begin_turn()
        await self.emit(TurnStarted(agent=state.agent, turn=state.turns))
        await self._drain_mailbox()
        assert self.active is not None
        active = self.active
        async with cancel_scope(state.ctx.cancel_token):
            entries = await model_turn(
                state, active, options, self.emit, self.save, stream_deltas=self._deltas_wanted(active)
            )
            calls = [e for e in entries if isinstance(e, ToolCallEntry)]
            outcome: TurnOutcome
            if calls:
                target = await self._tool_phase(active).run(calls)
                outcome = HandoffTo(target) if target is not None else RunAgain()
            else:
                outcome = answer_outcome(state, active)
        self._in_turn = False
        await self.emit(TurnEnded(agent=state.agent, turn=state.turns))
        return outcome

    async def _drain_mailbox(self) -> None:
        items = self.state.ctx.mailbox.drain()
        if not items:
            return
        for content in items:
            self.state.append([InputEntry(role="user", content=content)])
            await self.emit(UserMessageInjected(content=content, turn=self.state.turns))
        await self.save()

    async def _apply_handoff(self) -> None:
        state = self.state
        if state.pending_target is None:
            return
        previous, target = state.agent, state.pending_target
        previous_active = self.active
        with self.options.tracer.span("handoff", from_agent=previous.name, to_agent=target.name):
            try:
                active = await self._activate(target)
                system = await system_entry(active, state.ctx, self.options.extra_instructions)
            except BaseException:
                # The target could not take over: the handing-off agent stays in charge, with the
                # handoff still pending, so the checkpoint and RunFailed say so and a resume retries it.
                state.switch_to(previous)
                self.active = previous_active
                raise
            state.transcript[0] = system
            state.take_handoff()
        logger.info("run.handoff from=%s to=%s", previous.name, target.name)
        event = HandoffOccurred(from_agent=previous, to_agent=target)
        if previous.hooks is not None and previous.hooks is not target.hooks:
            await previous.hooks.dispatch(event, state.ctx)
        await self.emit(event)

    # ================================================================== completion

    async def _complete(self, output: Any) -> RunResult[Any]:
        options, state, active = self.options, self.state, self.active
        assert active is not None
        guards = [*active.agent.output_guardrails, *(g for p in active.plugins for g in p.output_guardrails)]
        if guards:
            with detail_span(options.tracer, "guardrail", kind="output", count=len(guards)):
                await run_guardrails(guards, output, state.ctx, kind="output")
        if self.writer is not None:
            await save_completed(self.writer, state, output, options)
        self._finalized = True
        await append_session(options, state, state.entries, timing=(state.head.started_at, now()))
        if self.writer is not None and self.writer.options.delete_on_success:
            await self.writer.delete()
        if options.parent_usage is not None:
            options.parent_usage.add(state.usage)
        result = run_result(state, options, output, entries=state.entries, turns=state.turns)
        logger.info("run.done run_id=%s turns=%d tokens=%d", state.run_id, state.turns, state.usage.total_tokens)
        await self.emit(RunCompleted(result=result))
        return result

    async def _replay(self, snap: RunSnapshot) -> RunResult[Any]:
        import pydantic

        options, state = self.options, self.state
        agent = replay_agent(agent_graph(self.entry_agent), snap, self.entry_agent)
        state.switch_to(agent)
        state.usage.add(snap.head.usage)
        state.head.model_usage = {model: usage.copy() for model, usage in snap.head.model_usage.items()}
        state.head.context_state = dict(snap.head.context_state)
        state.head.last_input_tokens = snap.head.last_input_tokens
        try:
            output = revive_output(snap.head.output, agent, options, state.run_id)
        except pydantic.ValidationError as exc:
            self._passthrough = exc  # raised as is (what callers catch); the snapshot stays
            raise
        # Hooks ran on the original completion: a replay hands its two terminal events to the
        # stream only, never to agent hooks again (a RunCompleted hook must not fire twice).
        await self.sink(RunStarted(agent=agent))
        self._finalized = True
        # A healing replay (the crash came between the terminal save and the session append) times
        # the segment as the run itself did, from its first start to its terminal save.
        await append_session(options, state, snap.entries, timing=healed_timing(snap.head))
        checkpoint = options.checkpoint
        if checkpoint is not None and checkpoint.delete_on_success and checkpoint.checkpointer is not None:
            await checkpoint.checkpointer.delete(snap.run_id)
        unstored = unserializable_output(snap)
        if unstored is not None:  # the session and the snapshot are settled; there is no output to give
            raise unstored
        if options.parent_usage is not None:
            options.parent_usage.add(state.usage)
        result = run_result(state, options, output, entries=snap.entries, turns=snap.head.turns, replayed=True)
        await self.sink(RunCompleted(result=result))
        return result

    # ================================================================== failure and cleanup

    async def _fail(self, exc: BaseException) -> None:
        state = self.state
        logger.info("run.%s run_id=%s error=%s", classify(exc), state.run_id, exc)
        if self.writer is not None and not self._finalized:
            if self._in_turn and len(state.entries) == self._turn_mark:
                state.head.turns -= 1  # the in-flight turn added nothing: do not count it
            await save_failed(self.writer, state, exc)
        if self.options.parent_usage is not None and not self._finalized:
            self.options.parent_usage.add(state.usage)
        if isinstance(exc, Exception):
            await self.emit(RunFailed(error=exc))

    async def _cleanup(self) -> None:
        for writer in (self.writer, self._claimed):
            if writer is not None:
                await writer.close()
        await self.scope.aclose()
