"""``RunSupervisor``: chat runs owned by the server, not by the HTTP request that started them.

* A client disconnect is not a cancel: the run keeps going and its result lands in the session.
* One live run per chat; a second stream attaches to it and gets a prologue: a ``snapshot`` of
  the completed turns, then the frames of the turn in flight, then the live tail.
* A user stop finalizes what the run completed (dangling tool calls dropped) into the session
  and deletes the checkpoint.
* A graceful shutdown cancels cooperatively and keeps the checkpoint; the chat's
  ``active_run_id`` lets the next process resume it (``if_run_exists="resume_only"``, input ``[]``)
  when a client reconnects. A crash (SIGKILL) leaves the same state behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..agent import Agent
from ..checkpointer import CheckpointOptions, RunHead, RunSnapshot
from ..exceptions import LoviaError, UserError
from ..handle import RunHandle
from ..messages import Usage
from ..parts import ContentPart
from ..reliability import Mailbox, RetryPolicy, RunBudget
from ..runner import Runner
from ..session import Segment, new_run_id
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
    drop_dangling_tool_calls,
    to_json_safe,
)
from .components import bind_ui_data
from .events_hub import EventHub
from .run_deps import RunDepsFn, RunTrigger, build_run_deps
from .run_errors import run_error_code
from .serialization import segment_timing, snapshot_views
from .sse import Frame, event_to_frame
from .store import ChatStore, RunRow
from .workspaces import WorkspaceSessions

if TYPE_CHECKING:
    from ..context.base import ContextPolicy
    from ..tracing import Tracer

__all__ = ["LiveRun", "RunSettings", "RunSupervisor", "Subscription", "TooManyRuns", "error_payload"]

logger = logging.getLogger("lovia.web")
_CLOSE: Frame | None = None


def error_payload(error: BaseException) -> dict[str, Any]:
    """What the page shows about a failed run: the error's type, message, ``code``
    (:func:`~lovia.web.run_errors.run_error_code`), hint, and a provider error's HTTP status and
    whether retrying may help."""
    payload: dict[str, Any] = {"type": type(error).__name__, "message": str(getattr(error, "message", None) or error)}
    hint = getattr(error, "hint", None)
    if hint:
        payload["hint"] = hint
    payload["code"] = run_error_code(error)
    status = getattr(error, "status_code", None)
    if status is not None:
        payload["status"] = status  # the page's name for it
        payload["status_code"] = status
    retryable = getattr(error, "retryable", None)
    if isinstance(retryable, bool):
        payload["retryable"] = retryable
    return payload


class TooManyRuns(LoviaError):
    """The server is at its concurrent-run cap (``max_background_runs``); the API answers 429."""


@dataclass(slots=True)
class RunSettings:
    """What every served run gets besides its input (``create_app``'s run options).

    Attributes:
        max_background_runs: how many runs may be live at once; starting one more raises
            :class:`TooManyRuns`.
        budget: limits copied fresh for every run (``None``: unlimited).
        retry: the retry posture of every run (``None``: the agent's).
        context_policy: the view-shaping posture of every run (``None``: the agent's).
        tracer: where every run's spans go.
        approval_timeout: seconds a gated call waits for a decision before it is denied
            (``None``: it waits as long as the run lives).
        run_deps: builds the deps of a run nobody requested here (a replica taking a run over);
            the routes call it themselves for the runs they start.
    """

    max_background_runs: int = 8
    budget: RunBudget | None = None
    retry: RetryPolicy | None = None
    context_policy: ContextPolicy | None = None
    tracer: Tracer | None = None
    approval_timeout: float | None = None
    run_deps: RunDepsFn | None = None

    def fresh_budget(self) -> RunBudget | None:
        """A new budget with the configured limits (a budget counts, so no two runs share one)."""
        return self.budget.copy() if self.budget is not None else None


@dataclass(eq=False)
class LiveRun:
    """One run in flight, with what a late subscriber needs to catch up."""

    session_id: str
    run_id: str
    agent: Agent[Any]
    mailbox: Mailbox
    entries: list[TranscriptEntry]
    """The run's own entries so far (input, completed messages, tool results)."""
    turn_mark: int
    """``len(entries)`` when the turn in flight started: the snapshot boundary."""
    handle: RunHandle[Any] | None = None
    buffer: list[Frame] = field(default_factory=list)
    """Frames of the turn in flight (replayed to subscribers after the snapshot)."""
    subscribers: set[asyncio.Queue[Frame | None]] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    stop_requested: bool = False
    shutting_down: bool = False
    resumed: bool = False
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    status: str = "running"
    """How it ended: completed, cancelled, failed or interrupted (``running`` while live)."""
    partial: list[str] = field(default_factory=list)
    """Text streamed in the turn in flight and not yet part of a completed message."""
    source: str = "user"
    """Why the run started: ``user`` or ``schedule:<id>``."""
    deps: Any = None
    """The run's ``RunContext.deps`` (what ``run_deps`` built)."""
    client_context: dict[str, Any] = field(default_factory=dict)
    """The page's context the run started with (a message joining the run leaves it as is)."""
    started_at: float = field(default_factory=time.time)
    turns: int = 0
    """Turns started so far."""
    awaiting: set[str] = field(default_factory=set)
    """Ids of the gated calls waiting for a decision (the run is ``blocked_on_approval``)."""

    def info(self) -> dict[str, Any]:
        """The run as ``GET /api/runs`` lists it."""
        return {
            "session_id": self.session_id,
            "run_id": self.run_id,
            "agent": self.agent.name,
            "status": "blocked_on_approval" if self.awaiting else "running",
            "turns": self.turns,
            "source": self.source,
            "started_at": self.started_at,
        }

    await_approvals: bool = True
    """Gated calls wait for ``POST /api/chat/approve``; ``False``: the agent's handler, else deny."""
    output: Any = None
    """The final answer (JSON-safe) once the run completed."""
    usage: dict[str, Any] | None = None
    """Token usage once the run ended."""
    error: dict[str, Any] | None = None
    """What went wrong, once the run failed (:func:`error_payload`)."""
    title_message: str | None = None
    """The first message of a chat this run opened (titled after the run completes)."""
    result: Any = None
    """The run's result once it completed (what a subagent's parent gets back)."""

    def broadcast(self, frame: Frame, *, buffer: bool = True) -> None:
        """Send a frame to every subscriber (and keep it for late ones)."""
        if buffer:
            self.buffer.append(frame)
        for queue in self.subscribers:
            queue.put_nowait(frame)


@dataclass(slots=True)
class Subscription:
    """A stream's view of a chat: the prologue frames and, when a run is live, its queue."""

    prologue: list[Frame]
    queue: asyncio.Queue[Frame | None] | None
    live: LiveRun | None

    def close(self) -> None:
        """Stop receiving frames (the run goes on)."""
        if self.live is not None and self.queue is not None:
            self.live.subscribers.discard(self.queue)


class RunSupervisor:
    """Starts, tracks, resumes and stops the chat runs of one server process.

    Args:
        store: the chat store.
        agents: the agents by name.
        default_agent: the name used when a request names none.
        max_turns: per-run turn limit.
        hub: where ``run_started`` / ``run_finished`` notifications go (``GET /api/events``).
        settings: the cap and the options every run gets (:class:`RunSettings`).
    """

    def __init__(
        self,
        store: ChatStore,
        agents: dict[str, Agent[Any]],
        *,
        default_agent: str,
        max_turns: int = 50,
        hub: EventHub | None = None,
        settings: RunSettings | None = None,
    ) -> None:
        self.store = store
        self.agents = agents
        self.default_agent = default_agent
        self.max_turns = max_turns
        self.hub = hub or EventHub()
        self.settings = settings or RunSettings()
        self.on_completed: Callable[[LiveRun], None] | None = None
        """Called with each run that completed (``RouterDeps`` titles new chats from it)."""
        self._live: dict[str, LiveRun] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closing = False
        self.workspaces = WorkspaceSessions()  # one workspace session per chat

    # ------------------------------------------------------------------ queries

    def live(self, session_id: str) -> LiveRun | None:
        """The run in flight for a chat, if any."""
        return self._live.get(session_id)

    @property
    def live_runs(self) -> list[LiveRun]:
        """Every run in flight."""
        return list(self._live.values())

    @property
    def closing(self) -> bool:
        """True once shutdown began (new runs are refused)."""
        return self._closing

    @property
    def max_background_runs(self) -> int:
        """The concurrent-run cap."""
        return self.settings.max_background_runs

    def check_capacity(self) -> None:
        """Raise :class:`TooManyRuns` when one more run would pass ``max_background_runs``."""
        cap = self.settings.max_background_runs
        if len(self._live) >= cap:
            raise TooManyRuns(
                f"the server is at its limit of {cap} concurrent runs",
                hint="retry once a run finishes (GET /api/runs lists them),"
                " or raise create_app(max_background_runs=...)",
            )

    def lock(self, session_id: str) -> asyncio.Lock:
        """The per-chat lock that serialises start / resume / rewind decisions."""
        return self._locks.setdefault(session_id, asyncio.Lock())

    def agent_for(self, name: str | None) -> Agent[Any]:
        """Resolve an agent name (``None``: the default)."""
        agent = self.agents.get(name or self.default_agent)
        if agent is None:
            raise UserError(f"unknown agent {name!r}", hint=f"use one of {', '.join(sorted(self.agents))}")
        return agent

    # ------------------------------------------------------------------ start / resume

    def start(
        self,
        session_id: str,
        message: str | list[ContentPart],
        *,
        agent: str | None = None,
        source: str = "user",
        deps: Any = None,
        client_context: dict[str, Any] | None = None,
        await_approvals: bool = True,
        title_message: str | None = None,
        runner: Agent[Any] | None = None,
        mailbox: Mailbox | None = None,
    ) -> LiveRun:
        """Start a new run of the chat on ``message`` (the caller checked nothing is live).

        ``deps`` becomes the run's ``RunContext.deps``; with ``await_approvals=False`` (a
        blocking turn: no client to ask) gated calls go to the agent's handler, else are denied.
        ``runner`` runs an agent that is not one of ``agents`` (a subagent's child), and
        ``mailbox`` is the steering queue to use (a parent's ``send_to_subagent`` writes to it).
        Raises :class:`TooManyRuns` at the concurrent-run cap.
        """
        chosen = runner if runner is not None else self.agent_for(agent)
        run_id = new_run_id()
        entry = InputEntry(role="user", content=message)
        live = LiveRun(
            session_id,
            run_id,
            chosen,
            mailbox or Mailbox(),
            [entry],
            1,
            source=source,
            deps=deps,
            client_context=dict(client_context or {}),
            await_approvals=await_approvals,
            title_message=title_message,
        )
        options = CheckpointOptions(self.store.checkpointer, run_id, delete_on_success=True)
        self._launch(live, message if isinstance(message, str) else [entry], options)  # parts go in as an entry
        return live

    def resume_agent(self, name: str | None) -> Agent[Any]:
        """The agent a resume of a run started by ``name`` uses (the default when it is gone)."""
        try:
            return self.agent_for(name)
        except UserError:
            return self.agent_for(None)

    async def takeover_deps(self, session_id: str, agent: str | None) -> Any:
        """The deps of a resume nobody requested: ``run_deps`` with no request and the run's stored client context."""
        context = await self.store.get_active_context(session_id) or {}
        trigger = RunTrigger(
            session_id=session_id,
            agent=self.resume_agent(agent),
            source="user",
            client_context=context,
            resumed=True,
        )
        return await build_run_deps(self.settings.run_deps, trigger)

    async def resume(
        self,
        session_id: str,
        run_id: str,
        *,
        agent: str | None = None,
        deps: Any = None,
        client_context: dict[str, Any] | None = None,
    ) -> LiveRun | None:
        """Continue the chat's interrupted run from its checkpoint; ``None`` when nothing is stored.

        The resumed run keeps the client context it started with (``client_context``, else the
        one the store kept beside its run id).
        """
        snapshot = await self.store.checkpointer.load(run_id)
        if snapshot is None:
            await self.store.clear_active_run_id(session_id, expected=run_id)
            return None
        if client_context is None:
            client_context = await self.store.get_active_context(session_id)
        chosen = self.resume_agent(agent)
        entries = list(snapshot.entries)
        live = LiveRun(
            session_id,
            run_id,
            chosen,
            Mailbox(),
            entries,
            len(entries),
            resumed=True,
            deps=deps,
            client_context=dict(client_context or {}),
        )
        options = CheckpointOptions(
            self.store.checkpointer, run_id, if_run_exists="resume_only", delete_on_success=True
        )
        self._launch(live, [], options)
        logger.info("resuming run %s of chat %s from its checkpoint (%d entries)", run_id, session_id, len(entries))
        return live

    def _launch(self, live: LiveRun, message: Any, options: CheckpointOptions) -> None:
        if self._closing:
            raise UserError("the server is shutting down", hint="retry after it restarts")
        self.check_capacity()
        settings = self.settings
        live.handle = Runner.stream(
            self.workspaces.bind_now(live.session_id, live.agent),
            message,
            deps=live.deps,
            session=self.store.session,
            session_id=live.session_id,
            checkpoint=options,
            mailbox=live.mailbox,
            max_turns=self.max_turns,
            budget=settings.fresh_budget(),
            retry=settings.retry,
            context_policy=settings.context_policy,
            tracer=settings.tracer,
        )
        if live.await_approvals:
            _ = live.handle.approvals  # opt in: gated calls wait for /api/chat/approve
        self._live[live.session_id] = live
        live.task = asyncio.ensure_future(self._drive(live))

    # ------------------------------------------------------------------ subscribe

    async def subscribe(self, session_id: str) -> Subscription:
        """The prologue (``snapshot`` + in-flight frames) and a queue for the live tail."""
        for _ in range(3):
            history = await self.store.session.segments(session_id)
            live = self._live.get(session_id)
            if live is None:
                return Subscription([self._snapshot(session_id, history, [], "idle")], None, None)
            if live.finished.is_set():
                await live.finished.wait()
                continue
            prologue = [self._snapshot(session_id, history, live.entries[: live.turn_mark], "running", live)]
            prologue.extend(live.buffer)
            queue: asyncio.Queue[Frame | None] = asyncio.Queue()
            live.subscribers.add(queue)
            return Subscription(prologue, queue, live)
        history = await self.store.session.segments(session_id)
        return Subscription([self._snapshot(session_id, history, [], "idle")], None, None)

    def _snapshot(
        self,
        session_id: str,
        history: list[Segment],
        pending: list[TranscriptEntry],
        status: str,
        live: LiveRun | None = None,
    ) -> Frame:
        messages, transcript = snapshot_views(history, pending)
        data: dict[str, Any] = {
            "session_id": session_id,
            "status": status,
            "entries": messages,
            "transcript": transcript,
        }
        if live is not None:
            data["run_id"] = live.run_id
            data["resumed"] = live.resumed
        return Frame("snapshot", data)

    # ------------------------------------------------------------------ driving

    async def _drive(self, live: LiveRun) -> None:
        assert live.handle is not None
        bind_ui_data(self.store, live.session_id)  # this task's context: the run's tools inherit it
        try:
            context = live.client_context or None  # kept for a resume after a restart
            await self.store.set_active_run_id(live.session_id, live.run_id, context=context)
            await self.store.start_run(
                RunRow(
                    id=live.run_id,
                    session_id=live.session_id,
                    agent=live.agent.name,
                    source=live.source,
                    status="running",
                    error=None,
                    started_at=time.time(),
                    finished_at=None,
                    usage=None,
                )
            )
            self.hub.publish(
                "run_started",
                {"session_id": live.session_id, "run_id": live.run_id, "agent": live.agent.name, "source": live.source},
            )
            async for event in live.handle:
                if isinstance(event, ev.RunCompleted):
                    await self._completed(live, event.result)
                elif isinstance(event, ev.RunFailed):
                    await self._failed(live, event.error)
                else:
                    self._on_event(live, event)
        except Exception as exc:  # a store failure around the run: report it, never hang the streams
            logger.exception("chat run %s failed outside the run loop", live.run_id)
            if live.status == "running":
                live.status, live.error = "failed", error_payload(exc)
            live.broadcast(Frame("error", {"type": type(exc).__name__, "message": str(exc)}))
        finally:
            self._live.pop(live.session_id, None)
            live.finished.set()
            for queue in live.subscribers:
                queue.put_nowait(_CLOSE)
            self.hub.publish(
                "run_finished",
                {"session_id": live.session_id, "run_id": live.run_id, "status": live.status, "source": live.source},
            )

    def _on_event(self, live: LiveRun, event: ev.Event) -> None:
        if isinstance(event, ev.TextDelta):
            live.partial.append(event.delta)
        elif isinstance(event, (ev.OutputDiscarded, ev.TurnStarted, ev.MessageCompleted)):
            live.partial.clear()
        if isinstance(event, ev.ApprovalRequired):
            live.awaiting.add(event.call.id)
        elif isinstance(event, (ev.ToolCallStarted, ev.ToolCallCompleted)):
            live.awaiting.discard(event.call.id)
        if isinstance(event, ev.TurnStarted):
            live.turn_mark = len(live.entries)
            live.buffer.clear()
            live.turns += 1
            live.awaiting.clear()
        elif isinstance(event, ev.MessageCompleted):
            live.entries.extend(event.entries)
        elif isinstance(event, ev.UserMessageInjected):
            live.entries.append(InputEntry(role="user", content=event.content))
        elif isinstance(event, ev.ToolCallCompleted):
            live.entries.append(ToolResultEntry(event.call.id, event.output, raw=event.result, is_error=event.is_error))
        elif isinstance(event, ev.ApprovalRequired):
            self._deny_later(live, event.call.id)
        frame = event_to_frame(event)
        if frame is not None:
            live.broadcast(frame)

    def _deny_later(self, live: LiveRun, call_id: str) -> None:
        """Under ``approval_timeout``, deny the gated call if nobody decided it in time."""
        timeout = self.settings.approval_timeout
        if timeout is None or not live.await_approvals or live.handle is None:
            return
        channel = live.handle.approvals

        def expire() -> None:
            if channel.resolve(call_id, False):
                logger.info("approval of call %s in chat %s timed out: denied", call_id, live.session_id)

        asyncio.get_running_loop().call_later(timeout, expire)

    async def _completed(self, live: LiveRun, result: Any) -> None:
        usage = result.usage.to_dict()
        live.status = "completed"
        live.output, live.usage = to_json_safe(result.output), usage
        live.result = result
        await self.store.clear_active_run_id(live.session_id, expected=live.run_id)
        await self.store.finish_run(live.run_id, status="completed", usage=usage)
        await self.store.update(live.session_id)
        await self._closing_frames(live)
        live.broadcast(Frame("done", {"output": live.output, "usage": usage, "run_id": live.run_id}))
        if self.on_completed is not None:
            try:
                self.on_completed(live)
            except Exception:  # a hook never fails the run
                logger.exception("the completion hook of run %s failed", live.run_id)

    async def _closing_frames(self, live: LiveRun) -> None:
        """``refs`` and ``timing`` of the segment the run just stored, sent just before ``done``, so
        a live chat can rewind or fork at its new messages and show the answer's duration without
        a reload. Nothing is sent when the segment cannot be read (the reload names them)."""
        try:
            segments = await self.store.session.segments(live.session_id)
        except Exception:
            logger.debug("could not read chat %s for its refs", live.session_id, exc_info=True)
            return
        segment = next((s for s in reversed(segments) if s.run_id == live.run_id), None)
        if segment is None:
            return
        users = sum(1 for e in segment.entries if isinstance(e, InputEntry) and e.role == "user")
        live.broadcast(Frame("refs", {"refs": [f"{live.run_id}:{n}" for n in range(users)]}))
        timing = segment_timing(segment.meta)
        if timing is not None:
            live.broadcast(Frame("timing", {"finished_at": timing[1], "duration": round(timing[1] - timing[0], 3)}))

    async def _failed(self, live: LiveRun, error: BaseException) -> None:
        if live.shutting_down:
            live.status = "interrupted"
            await self.store.record_run(live.run_id, live.session_id, status="interrupted")
            message = "the server is shutting down; the run resumes from its checkpoint when you reconnect"
            live.broadcast(Frame("error", {"type": "ServerShutdown", "message": message, "resumable": True}))
            return
        stopped = live.stop_requested
        live.status = "cancelled" if stopped else "failed"
        payload = None if stopped else error_payload(error)
        if payload is not None:
            logger.warning(
                "chat run %s of chat %s failed: %s: %s",
                live.run_id,
                live.session_id,
                payload["type"],
                payload["message"],
            )
        live.error = payload
        usage = await self.finalize_partial(
            live.session_id,
            live.run_id,
            fallback=live.entries,
            partial_text="".join(live.partial),
            error=payload,
            agent_name=live.agent.name,
        )
        live.usage = usage.to_dict()
        reason = None if payload is None else f"{payload['type']}: {payload['message']}"
        await self.store.finish_run(live.run_id, status=live.status, error=reason, usage=live.usage)
        await self.store.update(live.session_id)
        if payload is None:
            await self._closing_frames(live)
            live.broadcast(
                Frame("done", {"output": None, "usage": usage.to_dict(), "run_id": live.run_id, "stopped": True})
            )
        else:
            live.broadcast(Frame("error", {**payload, "run_id": live.run_id}))

    async def finalize_partial(
        self,
        session_id: str,
        run_id: str,
        *,
        fallback: list[TranscriptEntry] | None = None,
        partial_text: str = "",
        error: dict[str, Any] | None = None,
        agent_name: str = "",
    ) -> Usage:
        """Record an abandoned run's work in the session as a finished, tool-consistent segment.

        ``partial_text`` (the answer streamed so far in the turn in flight) is kept as the last
        entry. The segment is marked ``stopped``, or ``failed`` with ``error``. A stopped run's
        checkpoint is deleted; a failed run's stays (status ``failed``, with its error) so
        ``lovia runs ls`` shows it.
        """
        snapshot = await self.store.checkpointer.load(run_id)
        entries = list(snapshot.entries) if snapshot is not None else list(fallback or [])
        kept = drop_dangling_tool_calls(entries)
        if partial_text.strip():
            kept.append(AssistantTextEntry(partial_text))
        meta: dict[str, Any] = {"stopped": True} if error is None else {"failed": True, "error": error}
        if kept:
            await self.store.session.append(session_id, kept, run_id=run_id, meta=meta)
        if error is None:
            await self.store.checkpointer.delete(run_id)
        else:
            await self._keep_failed(run_id, snapshot, kept, error, agent_name)
        await self.store.clear_active_run_id(session_id, expected=run_id)
        return snapshot.usage if snapshot is not None else Usage()

    async def _keep_failed(
        self,
        run_id: str,
        snapshot: RunSnapshot | None,
        entries: list[TranscriptEntry],
        error: dict[str, Any],
        agent_name: str,
    ) -> None:
        """Leave the failed run in the checkpointer as ``failed`` with its error (``lovia runs ls`` shows it).

        The session already holds its work, so it is marked failed, not resumable.
        """
        if snapshot is None:
            head = RunHead(agent_name=agent_name or self.default_agent, status="failed", error=error)
            await self.store.checkpointer.append(run_id, entries, head)
            return
        head = snapshot.head
        head.status, head.error, head.updated_at = "failed", error, time.time()
        await self.store.checkpointer.append(run_id, [], head)

    # ------------------------------------------------------------------ control

    async def stop(self, session_id: str, *, timeout: float = 10.0) -> bool:
        """Stop the chat's live run and wait until its completed turns are in the session."""
        live = self._live.get(session_id)
        if live is None or live.handle is None:
            return False
        live.stop_requested = True
        live.handle.cancel("stopped by the user")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(live.finished.wait(), timeout)
        return True

    async def _close_models(self) -> None:
        """Close the agents' provider clients (their keep-alive connections belong to this loop)."""
        for agent in self.agents.values():
            close = getattr(agent.model, "aclose", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    await close()

    async def shutdown(self, *, timeout: float = 10.0) -> None:
        """Cancel every live run cooperatively, keeping checkpoints for a resume after restart."""
        self._closing = True
        runs = list(self._live.values())
        for live in runs:
            live.shutting_down = True
            if live.handle is not None:
                live.handle.cancel("server shutting down")
        if runs:
            await asyncio.wait([asyncio.ensure_future(r.finished.wait()) for r in runs], timeout=timeout)
        await self._close_models()
        self.hub.close()  # end the /api/events streams too: they must not hold the shutdown up
        await self.workspaces.aclose()
