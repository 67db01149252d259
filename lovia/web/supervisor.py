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
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..agent import Agent
from ..checkpointer import CheckpointOptions, RunHead, RunSnapshot
from ..exceptions import UserError
from ..handle import RunHandle
from ..messages import Usage
from ..parts import ContentPart
from ..reliability import Mailbox
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
from .serialization import segment_timing, snapshot_views
from .sse import Frame, event_to_frame
from .store import ChatStore
from .workspaces import WorkspaceSessions

__all__ = ["LiveRun", "RunSupervisor", "Subscription", "error_payload"]

logger = logging.getLogger("lovia.web")
_CLOSE: Frame | None = None


def error_payload(error: BaseException) -> dict[str, Any]:
    """What the page shows about a failed run: the error's type, message and hint."""
    payload: dict[str, Any] = {"type": type(error).__name__, "message": str(getattr(error, "message", None) or error)}
    hint = getattr(error, "hint", None)
    if hint:
        payload["hint"] = hint
    status = getattr(error, "status_code", None)
    if status is not None:
        payload["status"] = status
    return payload


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
    """

    def __init__(
        self,
        store: ChatStore,
        agents: dict[str, Agent[Any]],
        *,
        default_agent: str,
        max_turns: int = 50,
        hub: EventHub | None = None,
    ) -> None:
        self.store = store
        self.agents = agents
        self.default_agent = default_agent
        self.max_turns = max_turns
        self.hub = hub or EventHub()
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

    def start(self, session_id: str, message: str | list[ContentPart], *, agent: str | None = None) -> LiveRun:
        """Start a new run of the chat on ``message`` (the caller checked nothing is live)."""
        chosen = self.agent_for(agent)
        run_id = new_run_id()
        entry = InputEntry(role="user", content=message)
        live = LiveRun(session_id, run_id, chosen, Mailbox(), [entry], 1)
        options = CheckpointOptions(self.store.checkpointer, run_id, delete_on_success=True)
        self._launch(live, message if isinstance(message, str) else [entry], options)  # parts go in as an entry
        return live

    async def resume(self, session_id: str, run_id: str, *, agent: str | None = None) -> LiveRun | None:
        """Continue the chat's interrupted run from its checkpoint; ``None`` when nothing is stored."""
        snapshot = await self.store.checkpointer.load(run_id)
        if snapshot is None:
            await self.store.set_active_run(session_id, None)
            return None
        try:
            chosen = self.agent_for(agent)
        except UserError:
            chosen = self.agent_for(None)
        entries = list(snapshot.entries)
        live = LiveRun(session_id, run_id, chosen, Mailbox(), entries, len(entries), resumed=True)
        options = CheckpointOptions(
            self.store.checkpointer, run_id, if_run_exists="resume_only", delete_on_success=True
        )
        self._launch(live, [], options)
        logger.info("resuming run %s of chat %s from its checkpoint (%d entries)", run_id, session_id, len(entries))
        return live

    def _launch(self, live: LiveRun, message: Any, options: CheckpointOptions) -> None:
        if self._closing:
            raise UserError("the server is shutting down", hint="retry after it restarts")
        live.handle = Runner.stream(
            self.workspaces.bind_now(live.session_id, live.agent),
            message,
            session=self.store.session,
            session_id=live.session_id,
            checkpoint=options,
            mailbox=live.mailbox,
            max_turns=self.max_turns,
        )
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
            await self.store.set_active_run(live.session_id, live.run_id)
            await self.store.record_run(live.run_id, live.session_id, status="running")
            self.hub.publish(
                "run_started", {"session_id": live.session_id, "run_id": live.run_id, "agent": live.agent.name}
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
            live.broadcast(Frame("error", {"type": type(exc).__name__, "message": str(exc)}))
        finally:
            self._live.pop(live.session_id, None)
            live.finished.set()
            for queue in live.subscribers:
                queue.put_nowait(_CLOSE)
            self.hub.publish(
                "run_finished", {"session_id": live.session_id, "run_id": live.run_id, "status": live.status}
            )

    def _on_event(self, live: LiveRun, event: ev.Event) -> None:
        if isinstance(event, ev.TextDelta):
            live.partial.append(event.delta)
        elif isinstance(event, (ev.OutputDiscarded, ev.TurnStarted, ev.MessageCompleted)):
            live.partial.clear()
        if isinstance(event, ev.TurnStarted):
            live.turn_mark = len(live.entries)
            live.buffer.clear()
        elif isinstance(event, ev.MessageCompleted):
            live.entries.extend(event.entries)
        elif isinstance(event, ev.UserMessageInjected):
            live.entries.append(InputEntry(role="user", content=event.content))
        elif isinstance(event, ev.ToolCallCompleted):
            live.entries.append(ToolResultEntry(event.call.id, event.output, raw=event.result, is_error=event.is_error))
        frame = event_to_frame(event)
        if frame is not None:
            live.broadcast(frame)

    async def _completed(self, live: LiveRun, result: Any) -> None:
        usage = result.usage.to_dict()
        live.status = "completed"
        await self.store.set_active_run(live.session_id, None)
        await self.store.record_run(live.run_id, live.session_id, status="completed", usage=usage, finished=True)
        await self.store.update(live.session_id)
        await self._closing_frames(live)
        live.broadcast(Frame("done", {"output": to_json_safe(result.output), "usage": usage, "run_id": live.run_id}))

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
        usage = await self.finalize_partial(
            live.session_id,
            live.run_id,
            fallback=live.entries,
            partial_text="".join(live.partial),
            error=payload,
            agent_name=live.agent.name,
        )
        await self.store.record_run(
            live.run_id, live.session_id, status=live.status, usage=usage.to_dict(), finished=True
        )
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
        await self.store.set_active_run(session_id, None)
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
