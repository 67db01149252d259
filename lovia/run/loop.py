"""Internal: ``RunLoop``, the one place that owns a run's mutable state.

The steps, in order (reference section 3):

1. Pre-flight: apply the checkpoint's ``if_run_exists`` policy -> fresh, resume or replay.
   A replay emits ``RunStarted`` + ``RunCompleted`` only, re-appends the session segment
   (idempotent) and never calls the model.
2. Setup: resolve the active agent (provider, tools, output contract), build the context, render
   the system prompt, load session history, then ``[system] + history + (snapshot | input)``.
3. ``RunStarted``; input guardrails (fresh runs only); on resume, drain dangling tool calls
   under the restored turn number and complete a recorded, unapplied handoff.
4. Turns until a final answer: limits -> ``TurnStarted`` -> mailbox drain (+ save) -> context
   policy view -> model call under the retry policy -> ``MessageCompleted`` (+ save) -> tools
   (+ save per result) or output finalisation/repair -> ``TurnEnded`` -> handoff -> save.
5. Completion: output guardrails -> checkpoint ``completed`` -> session append -> delete on
   success -> ``RunCompleted``. Failure: terminal save (shielded) -> ``RunFailed`` -> re-raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from ..approvals import ApprovalChannel
from ..checkpointer import RunHead, RunSnapshot
from ..context.base import CompactionRequest, ContextPolicy, ContextResult
from ..events import (
    CompactionNotice,
    ContextCompacted,
    Event,
    HandoffOccurred,
    MessageCompleted,
    RunCompleted,
    RunFailed,
    RunStarted,
    TurnEnded,
    TurnStarted,
    UserMessageInjected,
)
from ..exceptions import (
    ContextOverflowError,
    LeaseLostError,
    MaxTurnsExceeded,
    OutputValidationError,
    UserError,
)
from ..guardrails import run_guardrails
from ..messages import ToolCall, Usage
from ..output import OutputSpec, RepairOnce
from ..plugins import PluginInstance
from ..providers.base import Provider
from ..reliability import CancelToken, Mailbox, RetryPolicy
from ..result import RunResult
from ..run_context import RunContext
from ..session import new_run_id
from ..tools import Tool
from ..tracing import NoopTracer, detail_span
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entries_to_messages,
    input_to_entries,
    leading_system_count,
    to_json_safe,
    unanswered_tool_calls,
)
from ..usage import add_model_usage, usage_meta
from .assemble import TurnAssembler
from .cancel import cancel_scope
from .model_call import call_model
from .persist import CheckpointWriter, agent_graph, classify, error_payload, now, plan_run
from .setup import merge_tools, setup_plugins
from .spec import RunSpec
from .tool_phase import ToolPhase, completed_event

if TYPE_CHECKING:
    from ..agent import Agent
    from ..handle import EventSink

__all__ = ["RunLoop"]

logger = logging.getLogger("lovia")


class _Final:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class RunLoop:
    """Drives one run from pre-flight to its terminal event."""

    def __init__(self, spec: RunSpec, sink: EventSink) -> None:
        self.spec = spec
        self.sink = sink
        self.entry_agent: Agent[Any] = spec.agent
        self.agent: Agent[Any] = spec.agent
        self.usage = Usage()
        self.model_usage: dict[str, Usage] = {}  # per "vendor:model", for cost (lovia.usage)
        self.turns = 0
        self.finish_reason: str | None = None
        self.transcript: list[TranscriptEntry] = []
        self.own: list[TranscriptEntry] = []
        self.context_state: dict[str, Any] = {}
        self.context_notice: CompactionNotice | None = None
        self.last_input_tokens: int | None = None
        self.started_calls: list[str] = []
        self.started_at = now()
        self.pending_target: Agent[Any] | None = None
        self.writer: CheckpointWriter | None = None
        self._claimed: CheckpointWriter | None = None  # leased before planning, not yet writing
        self.tracer: Any = spec.tracer or NoopTracer()
        self.approvals = spec.approvals or ApprovalChannel()
        self.budget = spec.budget
        self.retry: RetryPolicy | None = spec.retry if spec.retry is not None else spec.agent.retry
        self.policy: ContextPolicy = spec.context_policy or spec.agent.context_policy
        self.run_id = spec.checkpoint.effective_run_id if spec.checkpoint else new_run_id()
        self.ctx: RunContext[Any] = RunContext(
            context=spec.context,
            agent=spec.agent,
            run_id=self.run_id,
            entries=self.transcript,
            usage=self.usage,
            session_id=spec.session_id,
            budget=spec.budget,
            cancel_token=spec.cancel_token or CancelToken(),
            mailbox=spec.mailbox if spec.mailbox is not None else Mailbox(),
            tracer=self.tracer,
        )
        self.provider: Provider | None = None
        self.tools: dict[str, Tool[Any]] = {}
        self.output: OutputSpec | None = None
        self.native_output = False
        self._owned_providers: dict[str, Provider] = {}
        self.plugins: list[PluginInstance] = []
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._finalized = False
        self._started_emitted = False
        self._turn_mark = 0
        self._in_turn = False
        self.repair_attempts = 0

    # ================================================================== entry point

    async def run(self) -> RunResult[Any]:
        """Run to completion and return the result; on failure emit ``RunFailed`` and re-raise."""
        with self.tracer.span("run", agent=self.entry_agent.name, run_id=self.run_id) as span:
            try:
                result = await self._run()
                span.set_attribute("turns", result.turns)
                span.set_attribute("total_tokens", result.usage.total_tokens)
                return result
            except BaseException as exc:
                span.record_exception(exc)
                await self._fail(exc)
                raise
            finally:
                span.set_attribute("resumed", self.ctx.resumed)
                await self._cleanup()

    async def _run(self) -> RunResult[Any]:
        await self._claim()
        plan = await plan_run(self.spec.checkpoint)
        if plan.mode == "replay":
            assert plan.snapshot is not None
            return await self._replay(plan.snapshot)
        history, carried = await self._load_history()
        if plan.mode == "resume":
            assert plan.snapshot is not None
            self._restore(plan.snapshot)
        else:
            self.context_state = dict(carried)
            self.own.extend(input_to_entries(self.spec.input))
        await self._activate(self.agent)
        self.transcript[:] = [await self._system_entry(), *history, *self.own]
        await self._open_writer(persisted=len(plan.snapshot.entries) if plan.snapshot else 0)
        logger.info("run.start agent=%s run_id=%s mode=%s", self.agent.name, self.run_id, plan.mode)
        await self._emit_started()
        if plan.mode == "fresh":
            guards = [*self.agent.input_guardrails, *(g for p in self.plugins for g in p.input_guardrails)]
            if guards:
                with detail_span(self.tracer, "guardrail", kind="input", count=len(guards)):
                    await run_guardrails(guards, entries_to_messages(self.transcript), self.ctx, kind="input")
            if self.writer is not None:
                await self.writer.save()
        else:
            final = await self._drain_resumed()
            if final is not None:
                return await self._complete(final.value)
        while True:
            with detail_span(self.tracer, "turn", turn=self.turns + 1, agent=self.agent.name):
                final = await self._turn()
            if final is not None:
                return await self._complete(final.value)

    # ================================================================== setup

    async def _load_history(self) -> tuple[list[TranscriptEntry], dict[str, Any]]:
        session, sid = self.spec.session, self.spec.session_id
        if session is None or sid is None:
            return [], {}
        segments = await session.segments(sid)
        history: list[TranscriptEntry] = []
        for seg in segments:
            history.extend(seg.entries)
        carried: dict[str, Any] = {}
        if segments and segments[-1].meta:
            carried = dict(segments[-1].meta.get("context_state") or {})
        return history, carried

    def _restore(self, snap: RunSnapshot) -> None:
        graph = agent_graph(self.entry_agent)
        agent = graph.get(snap.agent_name)
        if agent is None:
            raise UserError(
                f"run {snap.run_id!r} was driven by agent {snap.agent_name!r}, which is not in the handoff graph of {self.entry_agent.name!r}",
                hint=f"restore the agent named {snap.agent_name!r} (renaming an agent breaks resume of its in-flight runs)",
            )
        if snap.pending_handoff is not None:
            target = graph.get(snap.pending_handoff)
            if target is None:
                raise UserError(
                    f"run {snap.run_id!r} recorded a handoff to {snap.pending_handoff!r}, which no longer exists",
                    hint=f"restore the agent named {snap.pending_handoff!r}",
                )
            self.pending_target = target
        self.agent = agent
        self.ctx.agent = agent
        self.ctx.resumed = True
        self.usage.add(snap.usage)
        self.turns = snap.turns
        self.context_state = dict(snap.context_state)
        self.last_input_tokens = snap.last_input_tokens
        self.started_calls = list(snap.started_calls)
        self.repair_attempts = snap.repair_attempts
        self.started_at = snap.started_at
        self.own.extend(snap.entries)

    async def _activate(self, agent: Agent[Any]) -> None:
        """Resolve provider, plugins, tools and output contract for the active agent."""
        if agent.workspace is not None:
            raise UserError(
                f"agent {agent.name!r} sets a workspace, which this version of lovia does not support",
                hint="give the agent file or shell tools of your own and leave workspace=None",
            )
        self.agent = agent
        self.ctx.agent = agent
        self.provider = self._provider_for(agent)
        self.plugins = await self._setup_plugins(agent)
        self.tools = self._tools_for(agent)
        output_type = self.spec.output_type if self.spec.output_type is not None else agent.output_type
        self.output = None if output_type is str else OutputSpec(output_type)
        self.native_output = bool(self.output and self.output.is_object and self.provider.supports_json_schema)

    def _provider_for(self, agent: Agent[Any]) -> Provider:
        model = agent.model
        if model is None:
            raise UserError(
                f"agent {agent.name!r} has no model",
                hint='set Agent(model="openai:gpt-4o-mini") or use lovia.model_from_env() with LOVIA_MODEL',
            )
        if not isinstance(model, str):
            return model
        provider = self._owned_providers.get(model)
        if provider is None:
            from ..providers import provider_from_string  # type: ignore[attr-defined]

            provider = provider_from_string(model)
            self._owned_providers[model] = provider
        return provider

    async def _setup_plugins(self, agent: Agent[Any]) -> list[PluginInstance]:
        instances = await setup_plugins(agent, self.ctx)
        self._closers.extend(instance.aclose for instance in instances)
        return instances

    def _tools_for(self, agent: Agent[Any]) -> dict[str, Tool[Any]]:
        policy_tools = getattr(self.policy, "tools", None)
        return merge_tools(agent, self.plugins, policy_tools() if callable(policy_tools) else [])

    async def _system_entry(self) -> InputEntry:
        blocks = await self.agent.render_instructions(self.ctx)
        if self.spec.extra_instructions:
            blocks.append(self.spec.extra_instructions)
        blocks.extend(p.instructions for p in self.plugins if p.instructions)
        if self.output is not None and not self.native_output:
            blocks.append(self.output.prompt_contract())
        prompt = "\n\n".join(blocks)
        self.ctx.system_prompt = prompt
        return InputEntry(role="system", content=prompt)

    async def _claim(self) -> None:
        # With a lease, take it before reading (or, with "restart", deleting) the snapshot: a
        # caller that gets RunBusy must not have touched the run, and the snapshot we plan from
        # cannot move under us once we hold the lease.
        options = self.spec.checkpoint
        if options is None or options.checkpointer is None or options.lease_ttl is None:
            return
        writer = CheckpointWriter(options, head=self._head, own=self.own, persisted=0)
        await writer.start()
        self._claimed = writer

    async def _open_writer(self, *, persisted: int) -> None:
        options = self.spec.checkpoint
        if options is None or options.checkpointer is None:
            return
        writer, self._claimed = self._claimed, None
        if writer is None:
            writer = CheckpointWriter(options, head=self._head, own=self.own, persisted=persisted)
            await writer.start()
        else:
            writer.rebase(persisted)
        self.writer = writer  # only a started writer: a refused lease must not lead to a save in _fail

    def _head(self) -> RunHead:
        return RunHead(
            agent_name=self.agent.name,
            usage=self.usage.copy(),
            turns=self.turns,
            last_input_tokens=self.last_input_tokens,
            context_state=dict(self.context_state),
            pending_handoff=self.pending_target.name if self.pending_target is not None else None,
            started_calls=list(self.started_calls),
            repair_attempts=self.repair_attempts,
            started_at=self.started_at,
            updated_at=now(),
        )

    # ================================================================== events and state updates

    async def emit(self, event: Event) -> None:
        """Dispatch hooks (same object), then hand the event to the stream."""
        hooks = self.agent.hooks
        if hooks is not None:
            await hooks.dispatch(event, self.ctx)
        for plugin in self.plugins:
            if plugin.hooks is not None:
                await plugin.hooks.dispatch(event, self.ctx)
        await self.sink(event)

    async def _emit_started(self) -> None:
        self._started_emitted = True
        await self.emit(RunStarted(agent=self.agent))

    def append(self, entries: Sequence[TranscriptEntry]) -> None:
        """Add entries to the run (transcript and own entries together)."""
        self.transcript.extend(entries)
        self.own.extend(entries)

    async def save(self) -> None:
        """Checkpoint the run if it has a checkpointer."""
        if self.writer is not None:
            with detail_span(self.tracer, "checkpoint_save", run_id=self.run_id):
                await self.writer.save()

    async def record_result(self, call: ToolCall, entry: ToolResultEntry, *, raw: Any) -> None:
        """Append one tool result, emit ``ToolCallCompleted`` and save."""
        if call.id in self.started_calls:
            self.started_calls.remove(call.id)
        self.append([entry])
        await self.emit(completed_event(call, entry, raw))
        await self.save()

    async def mark_started(self, call_id: str) -> None:
        """Persist that a non-idempotent call is about to run (so a crash is not retried blindly)."""
        self.started_calls.append(call_id)
        await self.save()

    def fire_handoff(self, tool_name: str) -> None:
        """Record the handoff the turn fired; it is applied after the turn's tools."""
        for h in self.agent.handoff_list:
            if h.tool_name == tool_name:
                self.pending_target = h.target
                return

    # ================================================================== resume

    async def _drain_resumed(self) -> _Final | None:
        """Re-execute dangling calls under the restored turn, apply a recorded handoff."""
        dangling = unanswered_tool_calls(self.own)
        if dangling:
            self.ctx.turn = self.turns
            await self.emit(TurnStarted(agent=self.agent, turn=self.turns))
            started = frozenset(self.started_calls)
            async with self._cancellable():
                await ToolPhase(self).run(dangling, resumed=started)
            await self.emit(TurnEnded(agent=self.agent, turn=self.turns))
            await self._apply_handoff()
            await self.save()
            return None
        if self.pending_target is not None:
            await self._apply_handoff()
            await self.save()
            return None
        if self.own and isinstance(self.own[-1], AssistantTextEntry):
            # The crash came after the final answer was saved: finish without a model call.
            self.ctx.turn = self.turns
            return await self._finalize_answer()
        return None

    # ================================================================== one turn

    async def _turn(self) -> _Final | None:
        ctx = self.ctx
        if self.turns >= self.spec.max_turns:
            raise MaxTurnsExceeded(
                f"run {self.run_id!r} reached max_turns={self.spec.max_turns}",
                hint="raise max_turns, or re-issue the same run_id to continue from the checkpoint",
            )
        ctx.cancel_token.check()
        if self.budget is not None:
            self.budget.check(self.usage)
        self._turn_mark = len(self.own)
        self._in_turn = True
        self.turns += 1
        ctx.turn = self.turns
        await self.emit(TurnStarted(agent=self.agent, turn=self.turns))
        await self._drain_mailbox()
        async with self._cancellable():
            entries = await self._model_turn()
            calls = [e for e in entries if isinstance(e, ToolCallEntry)]
            final: _Final | None = None
            if calls:
                await ToolPhase(self).run(calls)
            else:
                final = await self._finalize_answer()
        self._in_turn = False
        await self.emit(TurnEnded(agent=self.agent, turn=self.turns))
        if final is None:
            await self._apply_handoff()
            await self.save()
        return final

    async def _drain_mailbox(self) -> None:
        items = self.ctx.mailbox.drain()
        if not items:
            return
        for content in items:
            self.append([InputEntry(role="user", content=content)])
            await self.emit(UserMessageInjected(content=content, turn=self.turns))
        await self.save()

    async def _model_turn(self) -> list[TranscriptEntry]:
        view = await self._view(overflow=False, reported_window=None)
        try:
            assembled = await self._call_model(view)
        except ContextOverflowError as exc:
            logger.warning("context.overflow run_id=%s window=%s", self.run_id, exc.reported_window)
            result = await self._view_result(overflow=True, reported_window=exc.reported_window)
            if not result.compacted:
                raise
            assembled = await self._call_model(await self._inject(result.entries))
        self.usage.add(assembled.usage)
        add_model_usage(
            self.model_usage, f"{self.provider.name}:{self.provider.model}" if self.provider else None, assembled.usage
        )
        if assembled.usage.input_tokens:
            self.last_input_tokens = assembled.usage.input_tokens
        self.finish_reason = assembled.finish_reason
        entries = assembled.entries(turn=self.turns)
        self.append(entries)
        await self.emit(MessageCompleted(entries=list(entries)))
        await self.save()
        if self.budget is not None:
            self.budget.check(self.usage)
        return entries

    async def _view(self, *, overflow: bool, reported_window: int | None) -> list[TranscriptEntry]:
        view = (await self._view_result(overflow=overflow, reported_window=reported_window)).entries
        return await self._inject(view)

    async def _inject(self, view: list[TranscriptEntry]) -> list[TranscriptEntry]:
        """Append plugins' transient entries to the view tail (never persisted; fail-open)."""
        extra: list[TranscriptEntry] = []
        for plugin in self.plugins:
            for injector in plugin.view_injectors:
                try:
                    out = injector(self.ctx)
                    if inspect.isawaitable(out):
                        out = await out
                except Exception:
                    logger.exception("view injector %r failed (ignored)", injector)
                    continue
                if out:
                    extra.extend(out)
        return [*view, *extra] if extra else view

    async def _view_result(self, *, overflow: bool, reported_window: int | None) -> ContextResult:
        base = self.transcript if self.transcript[0].content else self.transcript[1:]  # type: ignore[union-attr]
        request = CompactionRequest(
            entries=base,
            provider=self.provider,
            model=getattr(self.provider, "model", None),
            tools=list(self.tools.values()),
            last_input_tokens=self.last_input_tokens,
            overflow=overflow,
            reported_window=reported_window,
            scratch=self.context_state,
            session_id=self.spec.session_id,
            run_id=self.run_id,
        )
        result = await self.policy.compact(request)
        head = base[: leading_system_count(base)]
        if head and not leading_system_count(result.entries):
            result.entries = [*head, *result.entries]  # a policy that dropped the system head gets it back
        if result.compacted:
            notice = CompactionNotice(
                reason=result.reason or ("overflow" if overflow else "threshold"),
                reactive=overflow,
                summary=result.summary,
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                detail=list(result.detail),
            )
            self.context_notice = notice
            await self.emit(
                ContextCompacted(
                    session_id=self.spec.session_id,
                    entries_before=len(base),
                    entries_after=len(result.entries),
                    notice=notice,
                )
            )
        return result

    async def _call_model(self, view: list[TranscriptEntry]) -> TurnAssembler:
        assert self.provider is not None
        return await call_model(
            self.provider,
            view,
            tools=list(self.tools.values()) or None,
            response_format=self.output.response_format() if self.output is not None and self.native_output else None,
            settings=self.agent.settings,
            retry=self.retry,
            emit=self.emit,
            tracer=self.tracer,
            turn=self.turns,
        )

    # ================================================================== output

    async def _finalize_answer(self) -> _Final | None:
        """Parse the final answer; arm a repair turn or raise when it does not fit."""
        text = self._last_answer_text()
        if self.output is None:
            if not text:
                logger.warning("run %s ended with an empty answer", self.run_id)
            return _Final(text)
        try:
            return _Final(self.output.parse(text))
        except OutputValidationError as exc:
            strategy = self.agent.output_repair
            if strategy is False:
                raise
            if strategy is True:
                strategy = RepairOnce()
            self.repair_attempts += 1
            prompt = strategy.build_prompt(exc, self.repair_attempts)
            if prompt is None:
                raise
            self.append([InputEntry(role="user", content=prompt)])
            return None

    def _last_answer_text(self) -> str:
        parts: list[str] = []
        for entry in reversed(self.own):
            if isinstance(entry, AssistantTextEntry):
                parts.append(entry.content)
            elif not isinstance(entry, ToolCallEntry) and entry.type != "reasoning":
                break
        return "".join(reversed(parts))

    # ================================================================== handoff

    async def _apply_handoff(self) -> None:
        target = self.pending_target
        if target is None:
            return
        previous = self.agent
        with self.tracer.span("handoff", from_agent=previous.name, to_agent=target.name):
            await self._activate(target)
            self.transcript[0] = await self._system_entry()
            self.pending_target = None
        logger.info("run.handoff from=%s to=%s", previous.name, target.name)
        event = HandoffOccurred(from_agent=previous, to_agent=target)
        if previous.hooks is not None and previous.hooks is not target.hooks:
            await previous.hooks.dispatch(event, self.ctx)
        await self.emit(event)

    # ================================================================== completion

    async def _complete(self, output: Any) -> RunResult[Any]:
        guards = [*self.agent.output_guardrails, *(g for p in self.plugins for g in p.output_guardrails)]
        if guards:
            with detail_span(self.tracer, "guardrail", kind="output", count=len(guards)):
                await run_guardrails(guards, output, self.ctx, kind="output")
        if self.writer is not None:
            await self._finalize_checkpoint(output)
        self._finalized = True
        await self._append_session(self.own, started_at=self.started_at, finished_at=now())
        if self.writer is not None and self.writer.options.delete_on_success:
            await self.writer.delete()
        if self.spec.parent_usage is not None:
            self.spec.parent_usage.add(self.usage)
        result = RunResult(
            output=output,
            entries=list(self.own),
            final_agent=self.agent,
            usage=self.usage.copy(),
            turns=self.turns,
            finish_reason=self.finish_reason,
            run_id=self.run_id,
            session_id=self.spec.session_id,
        )
        logger.info("run.done run_id=%s turns=%d tokens=%d", self.run_id, self.turns, self.usage.total_tokens)
        await self.emit(RunCompleted(result=result))
        return result

    async def _finalize_checkpoint(self, output: Any) -> None:
        assert self.writer is not None
        safe = to_json_safe(output)
        error = None
        if safe is None and output is not None:
            error = {"type": "OutputNotSerializable", "message": f"{type(output).__name__} is not JSON-serializable"}
        with detail_span(self.tracer, "checkpoint_save", run_id=self.run_id, status="completed"):
            await self.writer.save(status="completed", output=safe, error=error)

    async def _append_session(
        self, entries: Sequence[TranscriptEntry], *, started_at: float, finished_at: float
    ) -> None:
        session, sid = self.spec.session, self.spec.session_id
        if session is None or sid is None or not entries:
            return
        meta: dict[str, Any] = {"timing": {"started_at": started_at, "finished_at": finished_at}}
        meta["usage"] = usage_meta(self.usage, self.model_usage)
        if self.context_state:
            meta["context_state"] = dict(self.context_state)
        if self.context_notice is not None:
            meta["context_notice"] = self.context_notice.to_dict()
        await session.append(sid, list(entries), run_id=self.run_id, meta=meta)

    async def _replay(self, snap: RunSnapshot) -> RunResult[Any]:
        graph = agent_graph(self.entry_agent)
        agent = graph.get(snap.agent_name)
        if agent is None:
            logger.warning(
                "replaying run %s: agent %r no longer exists; using entry agent %r",
                snap.run_id,
                snap.agent_name,
                self.entry_agent.name,
            )
            agent = self.entry_agent
        self.agent = agent
        self.ctx.agent = agent
        self.usage.add(snap.usage)
        self.context_state = dict(snap.context_state)
        output = self._revive_output(snap.output, agent)
        # Hooks ran on the original completion: a replay hands its two terminal events to the
        # stream only, never to agent hooks again (a RunCompleted hook must not fire twice).
        self._started_emitted = True
        await self.sink(RunStarted(agent=agent))
        self._finalized = True
        # The seed times a segment "to the append": a healing replay appends now.
        await self._append_session(snap.entries, started_at=snap.started_at, finished_at=now())
        options = self.spec.checkpoint
        if options is not None and options.delete_on_success and options.checkpointer is not None:
            await options.checkpointer.delete(snap.run_id)
        if self.spec.parent_usage is not None:
            self.spec.parent_usage.add(self.usage)
        result = RunResult(
            output=output,
            entries=list(snap.entries),
            final_agent=agent,
            usage=self.usage.copy(),
            turns=snap.turns,
            finish_reason=None,
            run_id=snap.run_id,
            session_id=self.spec.session_id,
            replayed=True,
        )
        await self.sink(RunCompleted(result=result))
        return result

    def _revive_output(self, stored: Any, agent: Agent[Any]) -> Any:
        output_type = self.spec.output_type if self.spec.output_type is not None else agent.output_type
        if output_type is str or stored is None:
            return stored
        try:
            return OutputSpec(output_type).adapter.validate_python(stored)
        except Exception:
            logger.warning(
                "stored output of run %s no longer validates as %r; returning it as stored", self.run_id, output_type
            )
            return stored

    # ================================================================== failure and cleanup

    async def _fail(self, exc: BaseException) -> None:
        status = classify(exc)
        logger.info("run.%s run_id=%s error=%s", status, self.run_id, exc)
        if self.writer is not None and not self._finalized:
            if self._in_turn and len(self.own) == self._turn_mark:
                self.turns -= 1  # the in-flight turn added nothing: do not count it
            try:
                await asyncio.shield(self.writer.save(status=status, error=error_payload(exc)))
            except LeaseLostError:
                logger.warning(
                    "run %s: lease lost, the terminal save was refused (another worker owns the run)", self.run_id
                )
            except BaseException:
                logger.exception("terminal checkpoint save failed for run %s", self.run_id)
        if self.spec.parent_usage is not None and not self._finalized:
            self.spec.parent_usage.add(self.usage)
        if isinstance(exc, Exception):
            await self.emit(RunFailed(error=exc))

    async def _cleanup(self) -> None:
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:
                logger.exception("plugin aclose failed (ignored)")
        if self.writer is not None:
            await self.writer.close()
        if self._claimed is not None:
            await self._claimed.close()
        for provider in self._owned_providers.values():
            provider_close = getattr(provider, "aclose", None)
            if callable(provider_close):
                with contextlib.suppress(Exception):
                    await provider_close()

    def _cancellable(self) -> AbstractAsyncContextManager[None]:
        return cancel_scope(self.ctx.cancel_token)
