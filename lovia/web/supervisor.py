"""``RunSupervisor``: chat runs owned by the server, not by the HTTP request that started them.

* A client disconnect is not a cancel: the run keeps going and its result lands in the session.
* One live run per chat (a :class:`RunController`); a second stream attaches to it and gets a
  prologue: a ``snapshot`` of the completed turns, then the frames of the turn in flight, then the
  live tail (:func:`forward`).
* A user stop finalizes what the run completed (dangling tool calls dropped) into the session
  and deletes the checkpoint; a discarding stop (the chat is being deleted) keeps nothing.
* At most ``max_background_runs`` runs are live; a page's chat past that waits in a bounded line
  (:mod:`lovia.web.run_queue`, ``max_queued_runs`` places) and starts when a run ends.
* A graceful shutdown cancels cooperatively and keeps the checkpoint; the chat's
  ``active_run_id`` lets the next process resume it (``if_run_exists="resume_only"``, input ``[]``)
  when a client reconnects. A crash (SIGKILL) leaves the same state behind.

:class:`EventHub` is the process-wide notification stream behind ``GET /api/events``
(``run_started``, ``run_finished``, ``session_created``, ...). It keeps no history: a client that
(re)connects reloads the lists first, then applies what arrives. A subscriber that stops reading
is dropped once its queue is full, so a stuck tab never holds memory or slows a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .. import events as ev
from .._owners import OWNER, owner_alive
from ..agent import Agent
from ..checkpointer import CheckpointOptions, RunHead, RunSnapshot
from ..exceptions import LoviaError, UserError
from ..handle import RunHandle
from ..messages import Message, Usage
from ..reliability import Mailbox
from ..runner import Runner
from ..session import new_run_id
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
    drop_dangling_tool_calls,
    messages_to_entries,
    to_json_safe,
)
from ..types import JsonObject
from .carry_over import carry_over
from .components import bind_ui_data
from .run_deps import RunTrigger, build_run_deps
from .run_queue import WaitingLine, default_queue_size
from .serialization import Runs, segment_timing, segments_runs, snapshot_views
from .sse import (
    KEEPALIVE_FRAME,
    DoneData,
    ErrorData,
    LegTiming,
    RunFinishedData,
    RunStartedData,
    SnapshotData,
    UserTurnRefs,
    encode_frame,
    error_data,
    event_to_sse,
    frame,
    next_or_keepalive,
    usage_dict,
)
from .store import RunRow

if TYPE_CHECKING:
    from ..context.base import ContextPolicy
    from ..reliability import RetryPolicy, RunBudget
    from ..tracing import Tracer
    from .approvals import ApprovalRegistry
    from .run_deps import RunDepsFn
    from .store import ChatIndex as ChatStore
    from .workspaces import WorkspaceSessions

__all__ = [
    "ChatFrames",
    "EventHub",
    "RunController",
    "RunSupervisor",
    "TooManyRuns",
    "forward",
    "run_source_log_filter",
]

logger = logging.getLogger("lovia.web")

SseFrame = dict[str, str]
"""A frame as :func:`lovia.web.sse.frame` makes it."""


class SupervisorDeps(Protocol):
    """What the supervisor reads of :class:`lovia.web.api.RouterDeps` (a protocol: no import back
    into the API package, which imports this module)."""

    store: ChatStore
    agents: dict[str, Agent[Any]]
    approvals: ApprovalRegistry
    max_turns: int
    max_background_runs: int
    max_queued_runs: int | None
    retry: RetryPolicy | None
    context_policy: ContextPolicy | None
    tracer: Tracer | None
    approval_timeout: float | None
    run_deps: RunDepsFn | None
    workspaces: WorkspaceSessions

    @property
    def default_agent(self) -> str: ...

    def fresh_budget(self) -> RunBudget | None: ...

    def name_of(self, agent: Agent[Any]) -> str: ...

    def schedule_title(self, session_id: str, user_msg: str, output: Any, agent_name: str) -> None: ...


class TooManyRuns(LoviaError):
    """The server is at its concurrent-run cap (``max_background_runs``) and, for a start that
    may wait, its waiting line is full too; the API answers 429."""


# --------------------------------------------------------------------------- logging


@dataclass(frozen=True, slots=True)
class _RunTag:
    session_id: str
    run_id: str
    source: str


_CURRENT_RUN: contextvars.ContextVar[_RunTag | None] = contextvars.ContextVar("lovia_web_run", default=None)


class _RunSourceFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        tag = _CURRENT_RUN.get()
        record.run_source = tag.source if tag is not None else ""
        record.run_session_id = tag.session_id if tag is not None else ""
        record.run_id = tag.run_id if tag is not None else ""
        # "[schedule:sched_1] " for a run a user did not start; nothing otherwise.
        record.run_tag = f"[{tag.source}] " if tag is not None and tag.source != "user" else ""
        return True


def run_source_log_filter() -> logging.Filter:
    """A logging filter that tags each record logged while a supervised run works with that run.

    It never drops a record; it sets ``run_source`` (``user``, ``schedule:<id>``, ...),
    ``run_session_id`` and ``run_id`` (empty outside a run) and ``run_tag`` (``"[<source>] "``
    for a run nobody typed, else empty), for a format such as
    ``"%(levelname)s %(run_tag)s%(message)s"``. ``serve`` puts one on its own log handler.
    """
    return _RunSourceFilter()


# --------------------------------------------------------------------------- subscriptions


class _Subscription:
    """A queue of frames from a hub or a run, ended by ``None`` (the source closed or dropped it)."""

    def __init__(self, owner: set[_Subscription] | None, maxsize: int = 0) -> None:
        self.queue: asyncio.Queue[SseFrame | None] = asyncio.Queue(maxsize)
        self._owner = owner
        self.ended = False
        if owner is not None:
            owner.add(self)

    def put(self, item: SseFrame) -> bool:
        """Queue one frame; ``False`` (and the subscription ends) when the reader fell behind."""
        if self.ended:
            return False
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.end()
            return False
        return True

    def end(self) -> None:
        """Close the stream: the reader gets what is queued, then the end (room is made for it)."""
        if self.ended:
            return
        self.ended = True
        if self._owner is not None:
            self._owner.discard(self)
        while self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(None)

    def close(self) -> None:
        """Stop receiving (the source goes on)."""
        if self._owner is not None:
            self._owner.discard(self)

    async def frames(self, *, keepalive: bool = True) -> AsyncIterator[SseFrame]:
        """The frames as they come, until the end; a keep-alive frame after each quiet spell."""
        async for batch in self.batches(keepalive=keepalive):
            for item in batch:
                yield item

    async def batches(self, *, keepalive: bool = True) -> AsyncIterator[list[SseFrame]]:
        """The frames in batches, until the end: all that is queued, or (when nothing is) the
        next to come; ``[keep-alive frame]`` after each quiet spell."""
        queue = self.queue
        while True:
            waited: SseFrame | None | bool = False  # False: frames were queued, nothing to wait for
            if queue.empty():
                waited = await next_or_keepalive(queue) if keepalive else await queue.get()
            if waited is KEEPALIVE_FRAME:
                yield [dict(KEEPALIVE_FRAME)]
                continue
            batch: list[SseFrame] = []
            ended = waited is None
            if isinstance(waited, dict):
                batch.append(waited)
            while not ended and not queue.empty():
                item = queue.get_nowait()
                if item is None:
                    ended = True
                else:
                    batch.append(item)
            if batch:
                yield batch
            if ended:
                return


@dataclass(slots=True)
class _Attachment:
    """A stream's view of a chat: the prologue frames, then (with a live run) its subscription."""

    prologue: list[SseFrame]
    subscription: _Subscription | None
    controller: RunController | None = None

    def close(self) -> None:
        """Stop receiving frames (the run goes on)."""
        if self.subscription is not None:
            self.subscription.close()


async def forward(source: _Attachment | _Subscription, *, sid: str, emit_session: bool) -> AsyncIterator[SseFrame]:
    """The frames a chat stream sends for ``source``, as :func:`lovia.web.sse.frame` dicts.

    With ``emit_session`` a ``session`` frame naming chat ``sid`` comes first; then an attachment's
    prologue, then the live frames until the run ends, with ``{"comment": "keep-alive"}`` frames
    while nothing happens. Closing the iterator (a client gone) only unsubscribes: the run goes on.
    (:class:`ChatFrames` is the same stream, which a response can also write in batches.)
    """
    subscription = source.subscription if isinstance(source, _Attachment) else source
    try:
        for item in _head(source, sid, emit_session):
            yield item
        if subscription is not None:
            async for item in subscription.frames():
                yield item
    finally:
        source.close()


def _head(source: _Attachment | _Subscription, sid: str, emit_session: bool) -> list[SseFrame]:
    """The frames a chat stream starts with: ``session`` (with ``emit_session``), then the prologue."""
    head = [frame("session", {"session_id": sid})] if emit_session else []
    if isinstance(source, _Attachment):
        head.extend(source.prologue)
    return head


class ChatFrames:
    """The stream of :func:`forward`: iterated, its frames; through :meth:`chunks`, their bytes,
    several frames to a chunk (:func:`lovia.web.sse.event_stream` writes it that way)."""

    def __init__(self, source: _Attachment | _Subscription, *, sid: str, emit_session: bool) -> None:
        self.source = source
        self.sid = sid
        self.emit_session = emit_session

    def __aiter__(self) -> AsyncIterator[SseFrame]:
        return forward(self.source, sid=self.sid, emit_session=self.emit_session)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The stream as SSE bytes: the ``session`` frame and the prologue in one chunk, then one
        chunk per batch of live frames (those queued while the previous chunk was written)."""
        source = self.source
        subscription = source.subscription if isinstance(source, _Attachment) else source
        try:
            head = _head(source, self.sid, self.emit_session)
            if head:
                yield b"".join(map(encode_frame, head))
            if subscription is not None:
                async for batch in subscription.batches():
                    yield b"".join(map(encode_frame, batch))
        finally:
            source.close()


class EventHub:
    """Fan-out of small notification frames to every open ``GET /api/events`` stream.

    Args:
        queue_maxsize: frames one subscriber may have unread; past that it is dropped (its
            stream ends, and the page reloads the lists when it reconnects).
    """

    def __init__(self, *, queue_maxsize: int = 512) -> None:
        self._subs: set[_Subscription] = set()
        self._maxsize = queue_maxsize
        self._seq = 0
        self._closed = False

    @property
    def seq(self) -> int:
        """How many frames were published so far (the number of the last one)."""
        return self._seq

    @property
    def subscribers(self) -> int:
        """How many streams are open."""
        return len(self._subs)

    def publish(self, ev: Any) -> int:
        """Send one frame (a :func:`~lovia.web.sse.frame` dict) to every subscriber; returns its number.

        A subscriber whose queue is full is dropped rather than waited for.
        """
        self._seq += 1
        for sub in list(self._subs):
            sub.put(ev)
        return self._seq

    def subscribe(self) -> _Subscription:
        """A new subscription; after :meth:`close` it is already ended."""
        sub = _Subscription(self._subs, self._maxsize)
        if self._closed:
            sub.end()
        return sub

    def close(self) -> None:
        """End every stream (server shutdown)."""
        self._closed = True
        for sub in list(self._subs):
            sub.end()


# --------------------------------------------------------------------------- one run


class RunController:
    """One supervised run of a chat, from its start until it ended, and what its streams need.

    The supervisor makes these (:meth:`RunSupervisor.start`, :meth:`RunSupervisor.start_resume`);
    a route reaches the chat's live one with :meth:`RunSupervisor.get`. It keeps the run's own
    entries so far and the frames of the turn in flight, so a late stream can catch up.

    Args:
        deps: the server's :class:`~lovia.web.api.RouterDeps`.
        supervisor: the supervisor driving it.
        session_id: the chat.
        agent: the agent that runs.
        first_input: what the run starts on (``[]`` for a resume).
        first_checkpoint: where it checkpoints (its ``run_id`` is the run's id; ``None``: none kept).
        seed_entries: the run's entries before its first turn (its input, or a checkpoint's entries).
        is_new: the run opened the chat (it is titled after the run, from ``title_message``).
        title_message: the first message, to title a new chat from.
        source: why the run started: ``user``, ``schedule:<id>``, ``subagent:<chat>``, ...
        mailbox: the steering queue (a parent's ``send_to_subagent`` writes to a child's).
        client: the page's client context the run started with.
        run_deps: the run's ``RunContext.deps``.
        await_approvals: gated calls wait for ``POST /api/chat/approve``; ``False`` (a blocking
            turn, no client to ask): the agent's approval handler decides, else they are denied.
        chat_created_at: when the chat was made (the snapshot's time for untimed messages).
    """

    def __init__(
        self,
        *,
        deps: SupervisorDeps,
        supervisor: RunSupervisor,
        session_id: str,
        agent: Agent[Any],
        first_input: str | list[Message] | list[TranscriptEntry],
        first_checkpoint: CheckpointOptions | None,
        seed_entries: list[TranscriptEntry],
        is_new: bool,
        title_message: str | None,
        source: str,
        mailbox: Mailbox | None = None,
        client: JsonObject | None = None,
        run_deps: Any = None,
        await_approvals: bool = True,
        chat_created_at: float | None = None,
    ) -> None:
        self.deps = deps
        self.supervisor = supervisor
        self.session_id = session_id
        self.agent = agent
        self.first_input = first_input
        self.first_checkpoint = first_checkpoint
        run_id = first_checkpoint.run_id if first_checkpoint is not None else None
        self.run_id: str = run_id or new_run_id()
        self.entries: list[TranscriptEntry] = list(seed_entries)
        """The run's own entries so far (input, completed messages, tool results)."""
        self.turn_mark = len(self.entries)
        """``len(entries)`` when the turn in flight started: the snapshot boundary."""
        self.is_new = is_new
        self.title_message = title_message
        self.source = source
        self.mailbox = mailbox or Mailbox()
        self.client_context: JsonObject = dict(client or {})
        """The page's context the run started with (a message joining the run leaves it as is)."""
        self.run_deps = run_deps
        self.await_approvals = await_approvals
        self.chat_created_at = chat_created_at
        self.resumed = first_checkpoint is not None and first_checkpoint.if_run_exists == "resume_only"
        self.handle: RunHandle[Any] | None = None
        self.task: asyncio.Task[None] | None = None
        self.buffer: list[SseFrame] = []
        """Frames of the turn in flight (replayed to late subscribers after the snapshot)."""
        self.subscribers: set[_Subscription] = set()
        self.finished = asyncio.Event()
        self.status = "running"
        """How it ended: completed, cancelled, failed or interrupted (``running`` while live)."""
        self.waiting = False
        """In the supervisor's waiting line: no slot yet, nothing runs (``handle`` is ``None``)."""
        self.stop_requested = False
        self.shutting_down = False
        self.discard = False
        """A stop that keeps nothing of the run (its chat is being deleted)."""
        self.partial: list[str] = []
        """Text streamed in the turn in flight and not yet part of a completed message."""
        self.started_at = time.time()
        self.turns = 0
        self.awaiting: set[str] = set()
        """Ids of the gated calls waiting for a decision (the run is ``blocked_on_approval``)."""
        self.approval_waits: dict[str, asyncio.Task[bool]] = {}
        self.output: Any = None
        """The final answer (JSON-safe) once the run completed."""
        self.usage: dict[str, int] | None = None
        self.error: ErrorData | None = None
        """What went wrong, once the run failed."""
        self.result: Any = None
        """The run's result once it completed (what a subagent's parent gets back)."""

    # ------------------------------------------------------------------ reading it

    def info(self) -> dict[str, Any]:
        """The run as ``GET /api/runs`` lists it."""
        return {
            "session_id": self.session_id,
            "run_id": self.run_id,
            "agent": self.agent.name,
            "status": "waiting" if self.waiting else "blocked_on_approval" if self.awaiting else "running",
            "turns": self.turns,
            "source": self.source,
            "started_at": self.started_at,
        }

    def broadcast(self, item: SseFrame, *, buffer: bool = True) -> None:
        """Send a frame to every subscriber (and keep it for late ones)."""
        if buffer:
            self.buffer.append(item)
        for sub in list(self.subscribers):
            sub.put(item)

    def subscribe_live(self) -> _Subscription:
        """The run's frames from now on (already ended when the run is over)."""
        sub = _Subscription(self.subscribers)
        if self.finished.is_set():
            sub.end()
        return sub

    def _snapshot(self, runs: Runs, *, with_history: bool) -> SseFrame:
        pending = self.entries[: self.turn_mark]
        messages, transcript = snapshot_views(runs if with_history else [], pending, created_at=self.chat_created_at)
        data: SnapshotData = {
            "session_id": self.session_id,
            "status": "running",
            "entries": messages,
            "transcript": transcript,
            "run_id": self.run_id,
            "resumed": self.resumed,
        }
        return frame("snapshot", data)

    def attach(self, *, with_snapshot: bool) -> _Attachment:
        """The frames of the turn in flight and the live tail; ``with_snapshot``: led by a
        ``snapshot`` of the run's own completed turns."""
        prologue = [self._snapshot([], with_history=False)] if with_snapshot else []
        return _Attachment([*prologue, *self.buffer], self.subscribe_live(), self)

    def subscribe_resume(self, runs: Runs) -> _Attachment:
        """A re-attach: a ``snapshot`` of the chat's finished ``runs`` plus this run's completed
        turns, the frames of the turn in flight, then the live tail."""
        return _Attachment([self._snapshot(runs, with_history=True), *self.buffer], self.subscribe_live(), self)

    # ------------------------------------------------------------------ acting on it

    def inject(self, message: str) -> int:
        """Queue a steering message for the run's next turn; returns its token (for :meth:`uninject`)."""
        return self.mailbox.push(message)

    def uninject(self, token: int) -> bool:
        """Take back a queued message the run has not read yet; ``False`` when it is too late."""
        return self.mailbox.remove(token)

    def cancel_run(self, *, user: bool) -> None:
        """Cancel the run: ``user=True`` is a stop (completed turns kept, checkpoint dropped);
        ``user=False`` a shutdown (the checkpoint is kept for a resume)."""
        if user:
            self.stop_requested = True
        else:
            self.shutting_down = True
        if self.handle is not None:
            self.handle.cancel("stopped by the user" if user else "server shutting down")


# --------------------------------------------------------------------------- the supervisor


class RunSupervisor:
    """Starts, tracks, resumes and stops the chat runs of one server process.

    Everything it needs comes from ``deps`` (:class:`~lovia.web.api.RouterDeps`), read when
    used: its store, agents (a model switch replaces one in place), run settings, approvals and
    workspace sessions. ``RouterDeps`` makes one; an app does not build its own.
    """

    def __init__(self, deps: SupervisorDeps) -> None:
        self.deps = deps
        self.hub = EventHub()
        """Where ``run_started`` / ``run_finished`` and the other notifications go (``GET /api/events``)."""
        self._live: dict[str, RunController] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closing = False
        self._resuming: asyncio.Task[int] | None = None
        self._in_hook: dict[str, int] = {}  # chats whose run start waits on create_app(run_deps=...)
        self._stopped_in_hook: set[str] = set()
        self._waiting: WaitingLine[RunController] = WaitingLine()
        self._dropping: set[asyncio.Task[None]] = set()  # waiting runs being taken out of the line

    # ------------------------------------------------------------------ what it reads

    @property
    def store(self) -> ChatStore:
        """The chat store (``deps.store``)."""
        return self.deps.store

    @property
    def agents(self) -> dict[str, Agent[Any]]:
        """The served agents by name (``deps.agents``)."""
        return self.deps.agents

    @property
    def default_agent(self) -> str:
        """The name used when a request names no agent."""
        return self.deps.default_agent

    @property
    def workspaces(self) -> WorkspaceSessions:
        """The per-chat workspace sessions (``deps.workspaces``)."""
        return self.deps.workspaces

    @property
    def max_background_runs(self) -> int:
        """The concurrent-run cap."""
        return self.deps.max_background_runs

    @property
    def max_queued_runs(self) -> int:
        """Places in the waiting line (``deps.max_queued_runs``; unset: four per slot of the cap)."""
        size = self.deps.max_queued_runs
        return default_queue_size(self.max_background_runs) if size is None else size

    # ------------------------------------------------------------------ queries

    def get(self, session_id: str) -> RunController | None:
        """The run in flight for a chat, if any."""
        return self._live.get(session_id)

    @property
    def live_runs(self) -> list[RunController]:
        """Every run in flight, and every one waiting for a slot (``waiting``)."""
        return list(self._live.values())

    @property
    def running(self) -> int:
        """How many runs hold a slot (the ones waiting for one are not counted)."""
        return sum(1 for live in self._live.values() if not live.waiting)

    @property
    def queued(self) -> int:
        """How many runs wait for a slot."""
        return len(self._waiting)

    @property
    def closing(self) -> bool:
        """True once shutdown began (new runs are refused)."""
        return self._closing

    def check_capacity(self, *, queue: bool = False) -> None:
        """Raise :class:`TooManyRuns` when one more run would pass ``max_background_runs``;
        with ``queue``, only when the waiting line is full as well."""
        if self.running < self.max_background_runs or (queue and self._waiting.has_room(self.max_queued_runs)):
            return
        raise self._too_many(queue=queue)

    def _too_many(self, *, queue: bool) -> TooManyRuns:
        line = f" and its {self.max_queued_runs} waiting places are taken" if queue else ""
        return TooManyRuns(
            f"the server is at its limit of {self.max_background_runs} concurrent runs{line}",
            hint="retry once a run finishes (GET /api/runs lists them), or raise the limit:"
            " lovia web --max-runs N (LOVIA_MAX_RUNS), create_app(max_background_runs=...)",
        )

    def lock(self, session_id: str) -> asyncio.Lock:
        """The per-chat lock that serialises start / resume / rewind decisions."""
        return self._locks.setdefault(session_id, asyncio.Lock())

    @contextlib.contextmanager
    def in_hook(self, session_id: str) -> Iterator[None]:
        """Mark the chat's run start as waiting on its ``run_deps`` hook (see :meth:`stop_in_hook`)."""
        self._in_hook[session_id] = self._in_hook.get(session_id, 0) + 1
        try:
            yield
        finally:
            left = self._in_hook[session_id] - 1
            if left:
                self._in_hook[session_id] = left
            else:
                del self._in_hook[session_id]

    def stop_in_hook(self, session_id: str) -> bool:
        """Stop a run that has not started yet because its hook still runs; ``False`` when none waits."""
        if session_id not in self._in_hook:
            return False
        self._stopped_in_hook.add(session_id)
        return True

    def stopped_in_hook(self, session_id: str) -> bool:
        """Whether a stop came for the chat while its run's hook ran (asking clears it)."""
        if session_id in self._stopped_in_hook:
            self._stopped_in_hook.discard(session_id)
            return True
        return False

    def agent_for(self, name: str | None) -> Agent[Any]:
        """Resolve an agent name (``None``: the default)."""
        agent = self.agents.get(name or self.default_agent)
        if agent is None:
            raise UserError(f"unknown agent {name!r}", hint=f"use one of {', '.join(sorted(self.agents))}")
        return agent

    def resume_agent(self, name: str | None) -> Agent[Any]:
        """The agent a resume of a run started by ``name`` uses (the default when it is gone)."""
        try:
            return self.agent_for(name)
        except UserError:
            return self.agent_for(None)

    # ------------------------------------------------------------------ start / resume

    async def start(
        self,
        *,
        session_id: str,
        agent: Agent[Any],
        input: str | list[Message],
        is_new: bool,
        title_message: str | None,
        autostart: bool = False,
        source: str = "user",
        mailbox: Mailbox | None = None,
        client: JsonObject | None = None,
        run_deps: Any = None,
        await_approvals: bool = True,
        chat_created_at: float | None = None,
        queue: bool = False,
    ) -> RunController:
        """Start a new run of chat ``session_id`` on ``input`` with ``agent``.

        ``input`` is the message: a string, or messages (``[user([TextPart(...), ImagePart(...)])]``).
        ``is_new`` with a ``title_message``: the chat is titled after the run (``RouterDeps.titles``).
        ``autostart``: the server starts the run on its own (a schedule fire, a subagent's
        report); when the chat already has a live run, the input joins it as a steering
        message and that run is returned. Without it a live run is an error. ``run_deps``
        becomes the run's ``RunContext.deps``; ``client`` is the client context it started with.
        ``queue``: at the cap the run waits in the line (``waiting``) and starts when a slot frees.

        Raises:
            TooManyRuns: at the concurrent-run cap (with ``queue``: and the line is full).
            UserError: the server is shutting down, or (without ``autostart``) a run is live.
        """
        current = self._live.get(session_id)
        if current is not None:
            if autostart:
                current.inject(input if isinstance(input, str) else "\n".join(m.text for m in input))
                return current
            raise UserError("a run is already live in this chat", hint="stop it first, or join it")
        seed: list[TranscriptEntry]
        first: str | list[TranscriptEntry]
        if isinstance(input, str):
            seed, first = [InputEntry(role="user", content=input)], input
        else:  # messages go in as entries (content parts survive that way)
            seed = messages_to_entries(input)
            first = list(seed)
        checkpoint = CheckpointOptions(self.store.checkpointer, new_run_id(), delete_on_success=True)
        controller = RunController(
            deps=self.deps,
            supervisor=self,
            session_id=session_id,
            agent=agent,
            first_input=first,
            first_checkpoint=checkpoint,
            seed_entries=seed,
            is_new=is_new,
            title_message=title_message,
            source=source,
            mailbox=mailbox,
            client=client,
            run_deps=run_deps,
            await_approvals=await_approvals,
            chat_created_at=chat_created_at,
        )
        if queue and not self._closing and self.running >= self.max_background_runs:
            self._enqueue(controller)
        else:
            self._launch(controller)
        return controller

    async def start_resume(
        self,
        *,
        session_id: str,
        agent: Agent[Any],
        snapshot: RunSnapshot,
        client: JsonObject | None = None,
        run_deps: Any = None,
    ) -> RunController:
        """Continue an interrupted run from its checkpoint ``snapshot`` (finished tool calls are not run again).

        Raises:
            TooManyRuns: at the concurrent-run cap.
            UserError: the server is shutting down.
        """
        checkpoint = CheckpointOptions(
            self.store.checkpointer, snapshot.run_id, if_run_exists="resume_only", delete_on_success=True
        )
        controller = RunController(
            deps=self.deps,
            supervisor=self,
            session_id=session_id,
            agent=agent,
            first_input=[],
            first_checkpoint=checkpoint,
            seed_entries=list(snapshot.entries),
            is_new=False,
            title_message=None,
            source="user",
            client=client,
            run_deps=run_deps,
        )
        self._launch(controller)
        logger.info(
            "resuming run %s of chat %s from its checkpoint (%d entries)",
            snapshot.run_id,
            session_id,
            len(snapshot.entries),
        )
        return controller

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
        return await build_run_deps(self.deps.run_deps, trigger)

    async def resume(
        self,
        session_id: str,
        run_id: str,
        *,
        agent: str | None = None,
        deps: Any = None,
        client_context: JsonObject | None = None,
    ) -> RunController | None:
        """Load the chat's interrupted run ``run_id`` and :meth:`start_resume` it; ``None`` when
        nothing is stored (the chat's pointer to it is then cleared).

        The resumed run keeps the client context it started with (``client_context``, else the
        one the store kept beside its run id); ``agent`` is the name it ran under.
        """
        snapshot = await self.store.checkpointer.load(run_id)
        if snapshot is None:
            await self.store.clear_active_run_id(session_id, expected=run_id)
            return None
        if client_context is None:
            client_context = await self.store.get_active_context(session_id)
        return await self.start_resume(
            session_id=session_id,
            agent=self.resume_agent(agent),
            snapshot=snapshot,
            client=client_context,
            run_deps=deps,
        )

    def _launch(self, live: RunController) -> None:
        if self._closing:
            raise UserError("the server is shutting down", hint="retry after it restarts")
        self.check_capacity()
        deps = self.deps
        live.handle = Runner.stream(
            self.workspaces.bind_now(live.session_id, live.agent),
            live.first_input,
            deps=live.run_deps,
            session=self.store.session,
            session_id=live.session_id,
            checkpoint=live.first_checkpoint,
            mailbox=live.mailbox,
            max_turns=deps.max_turns,
            budget=deps.fresh_budget(),
            retry=deps.retry,
            context_policy=deps.context_policy,
            tracer=deps.tracer,
        )
        if live.await_approvals:
            _ = live.handle.approvals  # opt in: gated calls wait for a decision (deps.approvals)
        live.waiting = False
        self._live[live.session_id] = live
        live.task = asyncio.ensure_future(self._drive(live))

    # ------------------------------------------------------------------ the waiting line

    def _enqueue(self, live: RunController) -> None:
        """Put ``live`` at the end of the waiting line; its streams get ``run_waiting``."""
        live.waiting = True
        place = self._waiting.join(live, limit=self.max_queued_runs)
        if place is None:
            raise self._too_many(queue=True)
        self._live[live.session_id] = live
        logger.info("run %s of chat %s waits for a free slot (place %d)", live.run_id, live.session_id, place)

    def _start_waiting(self) -> None:
        """Give the free slots to the head of the line, in order."""
        while not self._closing and self.running < self.max_background_runs:
            live = self._waiting.next()
            if live is None:
                break
            live.started_at = time.time()
            try:
                self._launch(live)
            except Exception as exc:
                logger.exception("run %s of chat %s could not leave the waiting line", live.run_id, live.session_id)
                self._drop(live, error=error_data(ev.RunFailed(error=exc)), failed=True)

    def _drop(self, live: RunController, *, error: ErrorData | None = None, failed: bool = False) -> None:
        """Take a waiting run out of the line for good: a stop (no ``error``), a shutdown (its
        ``error`` frame), a start that failed (``failed``: the chat keeps it as failed)."""
        self._waiting.leave(live)
        live.stop_requested = True
        task = asyncio.ensure_future(self._settle_dropped(live, error, failed=failed))
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)

    async def _settle_dropped(self, live: RunController, error: ErrorData | None, *, failed: bool) -> None:
        """End a run that never ran: its message stays in the chat (marked stopped, or failed;
        nothing for a discarding stop); its streams get ``done`` (stopped) or ``error``."""
        live.status = "failed" if failed else "cancelled" if error is None else "interrupted"
        live.error = error if failed else None
        usage = Usage()
        try:
            if not live.discard:
                failure = dict(error) if failed and error is not None else None
                usage = await self.finalize_partial(live.session_id, live.run_id, fallback=live.entries, error=failure)
                await self.store.update(live.session_id)
        except Exception:
            logger.exception("could not keep the message of waiting run %s", live.run_id)
        live.usage = usage_dict(usage)
        if error is None:
            done: DoneData = {"output": None, "usage": live.usage, "run_id": live.run_id, "stopped": True}
            live.broadcast(frame("done", done))
        else:
            live.broadcast(frame("error", {**error, "run_id": live.run_id}))
        self._close_run(live)

    # ------------------------------------------------------------------ subscribe

    async def subscribe(self, session_id: str) -> _Attachment:
        """A stream's view of the chat: the run's :meth:`RunController.subscribe_resume`, or an
        ``idle`` snapshot of the stored chat when no run is live."""
        for _ in range(3):
            runs = segments_runs(await self.store.session.segments(session_id))
            live = self._live.get(session_id)
            if live is None:
                return _Attachment([self._idle_snapshot(session_id, runs)], None)
            if live.finished.is_set():
                await live.finished.wait()
                continue
            return live.subscribe_resume(runs)
        runs = segments_runs(await self.store.session.segments(session_id))
        return _Attachment([self._idle_snapshot(session_id, runs)], None)

    @staticmethod
    def _idle_snapshot(session_id: str, runs: Runs) -> SseFrame:
        messages, transcript = snapshot_views(runs, [])
        data: SnapshotData = {"session_id": session_id, "status": "idle", "entries": messages, "transcript": transcript}
        return frame("snapshot", data)

    # ------------------------------------------------------------------ driving

    async def _drive(self, live: RunController) -> None:
        assert live.handle is not None
        bind_ui_data(self.store, live.session_id)  # this task's context: the run's tools inherit it
        _CURRENT_RUN.set(_RunTag(live.session_id, live.run_id, live.source))
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
            started: RunStartedData = {
                "session_id": live.session_id,
                "run_id": live.run_id,
                "agent": live.agent.name,
                "source": live.source,
            }
            self.hub.publish(frame("run_started", started))
            async for event in self._events(live):  # encode_stream, without a generator in between
                sse = event_to_sse(event)
                if sse is not None:
                    live.broadcast(sse)
        except Exception as exc:  # a store failure around the run: report it, never hang the streams
            logger.exception("chat run %s failed outside the run loop", live.run_id)
            if live.status == "running":
                live.status, live.error = "failed", error_data(ev.RunFailed(error=exc))
            live.broadcast(frame("error", {"type": type(exc).__name__, "message": str(exc)}))
        finally:
            self._close_run(live)
            carry_over(self, live)  # messages that joined too late start the chat's next run

    def _close_run(self, live: RunController) -> None:
        """The run is over: free its slot (the next waiting run takes it), end its streams, tell the hub."""
        if self._live.get(live.session_id) is live:
            del self._live[live.session_id]
        self._start_waiting()
        for wait in list(live.approval_waits.values()):
            wait.cancel()  # a decision nobody made: denied
        live.finished.set()
        for sub in list(live.subscribers):
            sub.end()
        finished: RunFinishedData = {
            "session_id": live.session_id,
            "run_id": live.run_id,
            "status": live.status,
            "error": _reason(live.error),
            "source": live.source,
        }
        self.hub.publish(frame("run_finished", finished))

    async def _events(self, live: RunController) -> AsyncIterator[ev.Event]:
        """The run's events after the bookkeeping each needs; its end is settled here, not passed on."""
        assert live.handle is not None
        async for event in live.handle:
            if isinstance(event, ev.RunCompleted):
                await self._completed(live, event.result)
            elif isinstance(event, ev.RunFailed):
                await self._failed(live, event)
            else:
                self._on_event(live, event)
                yield event

    def _on_event(self, live: RunController, event: ev.Event) -> None:
        if isinstance(event, ev.TextDelta):
            live.partial.append(event.delta)
        elif isinstance(event, (ev.OutputDiscarded, ev.TurnStarted, ev.MessageCompleted)):
            live.partial.clear()
        if isinstance(event, ev.ApprovalRequired):
            live.awaiting.add(event.call.id)
        elif isinstance(event, (ev.ToolCallStarted, ev.ToolCallCompleted)):
            live.awaiting.discard(event.call.id)
            wait = live.approval_waits.pop(event.call.id, None)
            if wait is not None:
                wait.cancel()  # decided otherwise (the agent's handler): nothing waits any more
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
            self._await_decision(live, event)

    def _await_decision(self, live: RunController, event: ev.ApprovalRequired) -> None:
        """Let ``deps.approvals`` decide the gated call (``POST /api/chat/approve``), and under
        ``approval_timeout`` deny it when nobody decided in time."""
        if not live.await_approvals:
            return
        approvals = self.deps.approvals
        call_id = event.call.id
        wait = asyncio.ensure_future(approvals.await_decision(live.session_id, event))
        live.approval_waits[call_id] = wait
        wait.add_done_callback(lambda _t: live.approval_waits.pop(call_id, None))
        timeout = self.deps.approval_timeout
        if timeout is None:
            return

        async def expire() -> None:
            if await approvals.resolve(live.session_id, call_id, False):
                logger.info("approval of call %s in chat %s timed out: denied", call_id, live.session_id)

        asyncio.get_running_loop().call_later(timeout, lambda: asyncio.ensure_future(expire()))

    async def _completed(self, live: RunController, result: Any) -> None:
        usage = usage_dict(result.usage, last_input_tokens=result.last_input_tokens)
        live.status = "completed"
        live.output, live.usage = to_json_safe(result.output), usage
        live.result = result
        await self.store.clear_active_run_id(live.session_id, expected=live.run_id)
        await self.store.finish_run(live.run_id, status="completed", usage=usage)
        await self.store.update(live.session_id)
        await self._closing_frames(live)
        done: DoneData = {"output": live.output, "usage": usage, "run_id": live.run_id}
        live.broadcast(frame("done", done))
        if live.is_new and live.title_message:
            try:
                self.deps.schedule_title(
                    live.session_id, live.title_message, live.output, self.deps.name_of(live.agent)
                )
            except Exception:  # titling never fails the run
                logger.exception("titling the chat of run %s failed", live.run_id)

    async def _closing_frames(self, live: RunController) -> None:
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
        for closing in (UserTurnRefs([f"{live.run_id}:{n}" for n in range(users)]), _leg_timing(segment.meta)):
            sse = event_to_sse(closing) if closing is not None else None
            if sse is not None:
                live.broadcast(sse)

    async def _failed(self, live: RunController, event: ev.RunFailed) -> None:
        if live.shutting_down:
            live.status = "interrupted"
            await self.store.record_run(live.run_id, live.session_id, status="interrupted")
            message = "the server is shutting down; the run resumes from its checkpoint when you reconnect"
            live.broadcast(frame("error", {"type": "ServerShutdown", "message": message, "resumable": True}))
            return
        stopped = live.stop_requested
        live.status = "cancelled" if stopped else "failed"
        payload = None if stopped else error_data(event)
        if payload is not None:
            logger.warning(
                "chat run %s of chat %s failed: %s: %s",
                live.run_id,
                live.session_id,
                payload["type"],
                payload["message"],
            )
        live.error = payload
        if live.discard:
            usage = await self._discard(live)
        else:
            usage = await self.finalize_partial(
                live.session_id,
                live.run_id,
                fallback=live.entries,
                partial_text="".join(live.partial),
                error=dict(payload) if payload is not None else None,
                agent_name=live.agent.name,
            )
        live.usage = usage_dict(usage)
        await self.store.finish_run(live.run_id, status=live.status, error=_reason(payload), usage=live.usage)
        if not live.discard:
            await self.store.update(live.session_id)
        if payload is None:
            if not live.discard:
                await self._closing_frames(live)
            done: DoneData = {"output": None, "usage": live.usage, "run_id": live.run_id, "stopped": True}
            live.broadcast(frame("done", done))
        else:
            live.broadcast(frame("error", {**payload, "run_id": live.run_id}))

    async def _discard(self, live: RunController) -> Usage:
        """A discarding stop: nothing of the run reaches the session, and its checkpoint goes."""
        snapshot = await self.store.checkpointer.load(live.run_id)
        await self.store.checkpointer.delete(live.run_id)
        await self.store.clear_active_run_id(live.session_id, expected=live.run_id)
        return snapshot.usage if snapshot is not None else Usage()

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

    def cancel(self, session_id: str, *, discard: bool = False) -> bool:
        """Stop the chat's live run; ``False`` when none is live. It returns at once: :meth:`drain` waits.

        A stop keeps the turns the run completed (and the text of the turn in flight) in the
        chat and drops the checkpoint. With ``discard`` nothing of the run is kept: not in the
        chat, not in the checkpointer (for a chat about to be deleted).
        """
        live = self._live.get(session_id)
        if live is not None and live.waiting:  # never started: it leaves the line
            live.discard = live.discard or discard
            if not live.stop_requested:
                self._drop(live)
            return True
        if live is None or live.handle is None:
            return False
        live.discard = live.discard or discard
        live.cancel_run(user=True)
        return True

    async def drain(self, session_id: str | None = None, *, timeout: float = 60.0) -> bool:
        """Wait until the chat's run (``None``: every live run) has ended and settled.

        Returns ``True`` once nothing is left running, ``False`` when ``timeout`` seconds passed first.
        Runs started while it waits are waited for too.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if session_id is None:
                runs = list(self._live.values())
            else:
                one = self._live.get(session_id)
                runs = [one] if one is not None else []
            if not runs:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            waits = [asyncio.ensure_future(r.finished.wait()) for r in runs]
            _done, pending = await asyncio.wait(waits, timeout=left)
            for wait in pending:
                wait.cancel()

    async def stop(self, session_id: str, *, timeout: float = 10.0, discard: bool = False) -> bool:
        """:meth:`cancel` the chat's run and :meth:`drain` it; ``False`` when none was live."""
        if not self.cancel(session_id, discard=discard):
            return False
        await self.drain(session_id, timeout=timeout)
        return True

    async def _close_models(self) -> None:
        """Close the agents' provider clients (their keep-alive connections belong to this loop)."""
        for agent in self.agents.values():
            close = getattr(agent.model, "aclose", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    await close()

    async def startup(self) -> None:
        """Resume, in the background, the runs an earlier server on this store left interrupted.

        A server that stopped (Ctrl+C, SIGTERM) or died (SIGKILL) leaves its chats' runs
        ``interrupted`` (the store's start-up sweep settles a dead owner's ``running`` ones): they
        go on now, without waiting for a page to open their chat. Started in the background so the
        server answers at once; a page that opens such a chat meanwhile joins the resumed run.
        """
        self._resuming = asyncio.create_task(self.resume_interrupted(), name="lovia-resume-interrupted")

    async def resume_interrupted(self) -> int:
        """Resume every chat whose run is interrupted and not live anywhere; how many were resumed.

        A run recorded ``running`` by another live server on the same store is left to it; one
        recorded ``running`` by this process but not live here was orphaned by an earlier app.
        Stops early at the run cap (the rest resume when their chat is opened) and skips a chat
        whose ``run_deps`` refuses a resume nobody requested.
        """
        resumed = 0
        for session_id in await self.store.ids():
            run_id = await self.store.get_active_run_id(session_id)
            if run_id is None or self._closing:
                continue
            record = (await self.store.runs(session_id)).get(run_id)
            if record is not None and _live_elsewhere(record.status, record.owner):
                continue
            meta = await self.store.get(session_id)
            agent = meta.agent if meta is not None else None
            try:
                deps = await self.takeover_deps(session_id, agent)
            except Exception as exc:  # run_deps refused: the run stays resumable for a reconnect
                logger.warning("not resuming run %s of chat %s at start: run_deps refused: %s", run_id, session_id, exc)
                continue
            async with self.lock(session_id):
                if self.get(session_id) is not None or self._closing:
                    continue  # a page's reconnect resumed it meanwhile
                try:
                    self.check_capacity()
                except TooManyRuns:
                    logger.info("run cap reached: the other interrupted runs resume when their chat is opened")
                    return resumed
                if await self.resume(session_id, run_id, agent=agent, deps=deps) is not None:
                    resumed += 1
                    logger.info("resumed run %s of chat %s, interrupted when the server stopped", run_id, session_id)
        return resumed

    async def shutdown(self, *, grace: float = 10.0) -> None:
        """Cancel every live run cooperatively, keeping checkpoints for a resume after restart.

        Waits up to ``grace`` seconds for the runs to wind down, then closes the agents' model
        clients, the ``/api/events`` streams and the chat workspaces.
        """
        self._closing = True
        if self._resuming is not None and not self._resuming.done():
            self._resuming.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._resuming
        for waiting in self._waiting.clear():
            self._drop(waiting, error=_SHUTDOWN_BEFORE_START)
        for live in list(self._live.values()):
            live.cancel_run(user=False)
        await self.drain(timeout=grace)
        await self._close_models()
        self.hub.close()  # end the /api/events streams too: they must not hold the shutdown up
        await self.workspaces.aclose()


_SHUTDOWN_BEFORE_START: ErrorData = {
    "type": "ServerShutdown",
    "message": "the server shut down before the run got a free slot; it did not run",
    "code": "cancelled",
    "hint": "send the message again once the server is back",
    "resumable": False,
}


def _live_elsewhere(status: str, owner: str | None) -> bool:
    """Whether a run's record says another process still drives it (``None`` from another host: assume so)."""
    if status != "running" or owner is None or owner == OWNER:
        return False
    return owner_alive(owner) is not False


def _reason(error: Mapping[str, Any] | None) -> str | None:
    """``"Type: message"`` of a failure, as run records keep it."""
    return None if error is None else f"{error['type']}: {error['message']}"


def _leg_timing(meta: dict[str, Any] | None) -> LegTiming | None:
    timing = segment_timing(meta)
    if timing is None:
        return None
    return LegTiming(finished_at=timing[1], duration=round(timing[1] - timing[0], 3))
