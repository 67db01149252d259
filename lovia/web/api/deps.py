"""``RouterDeps``: everything the HTTP API's routes share, and the machinery behind them.

One ``RouterDeps`` backs one route table: :func:`lovia.web.api.build_api_router` reads it, and
:func:`lovia.web.app.create_app` builds one and mounts that same router. Its :meth:`RouterDeps.lifespan`
runs the scheduler and the run supervisor; an app mounting the router must enter it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...agent import Agent
from ...exceptions import UserError
from ...providers.base import Provider
from ...reliability import RetryPolicy, RunBudget
from ...session import Session
from ..approvals import ApprovalRegistry
from ..followups import FollowupFn, FollowupRequest, coerce_suggestions, generate_followups
from ..questions import QuestionRegistry
from ..routes_uploads import DEFAULT_MAX_UPLOAD_MB, DEFAULT_UPLOAD_EXTENSIONS
from ..run_deps import RunDepsFn
from ..scheduler import Clock, Scheduler
from ..sse import SessionCreatedData, SessionRetitledData, frame
from ..store import ChatIndex, ChatMeta, PostgresChatStore, ScheduleStore
from ..supervisor import EventHub, RunSupervisor
from ..titles import TITLE_INSTRUCTIONS, generate_title
from ..workspaces import WorkspaceSessions

if TYPE_CHECKING:
    from ...context.base import ContextPolicy
    from ...tracing import Tracer

__all__ = ["DEFAULT_FOLLOWUP_TIMEOUT", "TITLE_INSTRUCTIONS", "RouterDeps"]

DEFAULT_FOLLOWUP_TIMEOUT = 20.0
"""Seconds the follow-up suggester may take before the route answers ``[]``."""


logger = logging.getLogger("lovia.web")


@dataclass(eq=False)
class RouterDeps:
    """What the API routes need: the agents, the store, and the run settings.

    Only ``agents`` and ``store`` are required; the other fields default to what
    ``create_app`` uses. The run supervisor (with its event bus) and the scheduler are made with
    the object and read the fields when they use them. ``titles`` calls a model only when
    ``title_model`` is set (otherwise a chat keeps the title made from its first message).

    Args:
        agents: ``{name: agent}``; the first entry is the default agent.
        store: transcripts, checkpoints and the chat index.
        approvals: where the gated tool calls of live runs wait for ``POST /api/chat/approve``
            (keyed by chat; a stream consumer of your own can wait on it too).
        title: the title ``GET /api/info`` reports (the page shows it).
        max_turns: per-run turn limit.
        workspaces: the per-chat workspace sessions of the served agents (closed on shutdown).
        scheduler_poll: seconds between checks for due schedules.
        questions: the ``ask_human`` question registry (``None``: the question routes answer 501).
        schedules: where schedules live; ``None``: the store's own (``store.schedule_store``, in the
            same SQLite file or PostgreSQL schema, closed with the store).
        clock: the scheduler's time source (default ``time.time``).
        max_upload_bytes: per-file upload limit.
        upload_allowed_ext: extensions uploads may have (``None``: any).
        demo: ``True`` when the only agent is the offline demo model (the page labels it).
        followups: follow-up suggestions for ``POST /api/sessions/{id}/followups``: ``False``
            (off: the route answers ``[]``), ``True`` (the built-in suggester,
            :func:`~lovia.web.followups.generate_followups`), or your own ``async (request) -> [str]``.
        followup_model: the model the built-in suggester asks (``None``: the chat's agent's model).
        followup_timeout: seconds a suggester may take; a slower one gives ``[]``.
        context_policy: the view-shaping posture of every run (``None``: the agent's).
        title_model: the model that titles a new chat after its first run (``None``: no model
            call; the chat keeps the title made from its first message).
        titles: ``False`` turns model titles off.
        budget: limits every run gets a fresh copy of (:meth:`fresh_budget`).
        retry: the retry posture of every run (``None``: the agent's).
        tracer: where every run's spans go.
        max_background_runs: concurrent runs. One more chat from a stream waits in line (see
            ``max_queued_runs``); any other start answers 429 ``too_many_runs`` (and a scheduled
            fire at the cap is recorded as failed and moves on).
        max_queued_runs: places in the line where streamed chats wait for a slot at the cap
            (``None``: four per run of ``max_background_runs``; ``0``: no line, 429 at once).
        approval_timeout: seconds a gated call waits for a decision before it is denied.
        config_runtime: the model-settings runtime (``create_app(config_runtime=...)``), kept for
            the routes that serve it.
        run_deps: builds each run's ``RunContext.deps`` (see :mod:`lovia.web.run_deps`).
        wire_subagents: whether ``create_app`` wired the agents' ``Subagents`` plugins (it calls
            :func:`lovia.web.subagents.wire_subagents`); an app mounting the router itself calls
            that function once.
    """

    agents: dict[str, Agent[Any]]
    store: ChatIndex
    approvals: ApprovalRegistry = field(default_factory=ApprovalRegistry)
    title: str = "lovia"
    context_policy: ContextPolicy | None = None
    title_model: str | Provider | None = None
    titles: bool = True
    followups: bool | FollowupFn = False
    followup_model: str | Provider | None = None
    max_turns: int = 50
    budget: RunBudget | None = None
    retry: RetryPolicy | None = None
    tracer: Tracer | None = None
    max_background_runs: int = 8
    max_queued_runs: int | None = None
    approval_timeout: float | None = None
    scheduler_poll: float = 1.0
    questions: QuestionRegistry | None = None
    workspaces: WorkspaceSessions = field(default_factory=WorkspaceSessions)
    config_runtime: Any = None  # a lovia.web.config.ConfigRuntime: serves /api/config*, swaps the default agent
    run_deps: RunDepsFn | None = None
    schedules: ScheduleStore | None = None
    clock: Clock | None = None
    max_upload_bytes: int = int(DEFAULT_MAX_UPLOAD_MB * (1 << 20))
    upload_allowed_ext: frozenset[str] | None = DEFAULT_UPLOAD_EXTENSIONS
    demo: bool = False
    followup_timeout: float | None = DEFAULT_FOLLOWUP_TIMEOUT
    wire_subagents: bool = True
    _supervisor: RunSupervisor = field(init=False, repr=False)
    _scheduler: Scheduler = field(init=False, repr=False)
    _titling: set[asyncio.Task[None]] = field(init=False, repr=False, default_factory=set)

    def __post_init__(self) -> None:
        if not self.agents or not all(isinstance(a, Agent) for a in self.agents.values()):
            raise UserError(
                "RouterDeps(agents=...) needs a non-empty {name: Agent} mapping",
                hint="e.g. RouterDeps(agents={'bot': agent}, store=ChatStore.in_memory())",
            )
        self.agents = {str(name): agent for name, agent in self.agents.items()}
        if self.max_background_runs < 1:
            raise UserError(
                f"max_background_runs must be at least 1, got {self.max_background_runs}",
                hint="pass the number of runs that may be live at once, e.g. 8",
            )
        if self.max_queued_runs is not None and self.max_queued_runs < 0:
            raise UserError(
                f"max_queued_runs must be 0 or more, got {self.max_queued_runs}",
                hint="pass how many chats may wait for a free slot (0: none wait), or None for the default",
            )
        if isinstance(self.store, PostgresChatStore):  # several processes serve one app: leased runs
            from ..replicas import ReplicaSupervisor

            self._supervisor = ReplicaSupervisor(self)
        else:
            self._supervisor = RunSupervisor(self)
        if self.schedules is None:
            self.schedules = self.store.schedule_store  # the store's own: it closes it
        else:
            self.store.bind_schedules(self.schedules)  # a deleted chat's schedules go with it
        self._scheduler = Scheduler(self, poll_interval=self.scheduler_poll, clock=self.clock)
        from ..scheduling import register_server

        register_server(self)  # Scheduling(store) plugins on this store reach these runs and schedules

    # ------------------------------------------------------------------ what the routes read

    @property
    def supervisor(self) -> RunSupervisor:
        """The run supervisor: live runs, their streams, stop and resume."""
        return self._supervisor

    @property
    def scheduler(self) -> Scheduler:
        """The schedule poller that fires due schedules into their chats."""
        return self._scheduler

    @property
    def session(self) -> Session:
        """The transcript store (``store.session``)."""
        return self.store.session

    @property
    def bus(self) -> EventHub:
        """The process-wide event hub behind ``GET /api/events``."""
        return self._supervisor.hub

    @property
    def default_agent(self) -> str:
        """The name of the default agent (the first one)."""
        return next(iter(self.agents))

    @property
    def configured(self) -> bool:
        """Whether a real model is served (not only the offline demo)."""
        return not self.demo

    def fresh_budget(self) -> RunBudget | None:
        """A new copy of ``budget`` for one run (a budget counts, so runs never share one)."""
        return self.budget.copy() if self.budget is not None else None

    def emit(self, event: str, data: Mapping[str, object]) -> None:
        """Publish one lifecycle event (``event`` with its payload ``data``) to every ``GET /api/events`` subscriber."""
        self.bus.publish(frame(event, data))

    def announce_session(self, meta: ChatMeta) -> None:
        """Tell the ``GET /api/events`` subscribers that chat ``meta`` was made (``session_created``)."""
        data: SessionCreatedData = {
            "session_id": meta.id,
            "agent": meta.agent,
            "title": meta.title,
            "session": meta.to_dict(),
        }
        self.emit("session_created", data)

    def pick(self, name: str | None) -> Agent[Any]:
        """The agent called ``name`` (``None``: the default); a ``UserError`` for an unknown name."""
        return self._supervisor.agent_for(name)

    def name_of(self, agent: Agent[Any]) -> str:
        """The name ``agent`` is served under."""
        for name, served in self.agents.items():
            if served is agent:
                return name
        return agent.name

    async def suggest_followups(self, request: FollowupRequest) -> list[str]:
        """Follow-up questions for ``request`` under the ``followups`` setting; ``[]`` when off.

        Never raises: a suggester that fails, or answers with something other than a list of
        strings, is logged and gives ``[]``.
        """
        if self.followups is False:
            return []
        try:
            return await asyncio.wait_for(self._suggest(request), self.followup_timeout)
        except asyncio.TimeoutError:
            logger.warning(
                "follow-up suggestions for %s took over %ss (ignored)", request.session_id, self.followup_timeout
            )
            return []
        except Exception as exc:  # suggestions are never load-bearing
            logger.warning("follow-up suggestions failed for %s (ignored): %s", request.session_id, exc)
            return []

    async def _suggest(self, request: FollowupRequest) -> list[str]:
        if self.followups is True:
            model = self.followup_model
            if model is None:
                model = self.agents[request.agent].model if request.agent in self.agents else None
            if model is None:
                return []
            return await generate_followups(request, model=model)
        assert self.followups is not False
        return coerce_suggestions(await self.followups(request))

    # ------------------------------------------------------------------ titles

    def schedule_title(self, session_id: str, user_msg: str, output: Any, agent_name: str) -> None:
        """Title a new chat in the background from its first exchange (``titles`` with a ``title_model``).

        A failing title model is logged and leaves the chat's first-message title in place.
        """
        if not self.titles or self.title_model is None:
            return
        task = asyncio.ensure_future(self._retitle(session_id, user_msg, output))
        self._titling.add(task)
        task.add_done_callback(self._titling.discard)

    async def _retitle(self, session_id: str, user_msg: str, output: Any) -> None:
        assert self.title_model is not None
        before = await self.store.get(session_id)
        expected = before.title if before is not None else None  # a rename meanwhile is kept
        try:
            title = await generate_title(user_msg, output, model=self.title_model)
        except Exception as exc:
            logger.warning("titling chat %s failed (kept its first-message title): %s", session_id, exc)
            return
        if not title or await self.store.get(session_id) is None:
            return
        await self.store.set_title_if_unchanged(session_id, title, expected=expected)
        updated = await self.store.get(session_id)
        if updated is not None:
            self.emit("session_updated", {"session": updated.to_dict()})
            self.emit("session_retitled", SessionRetitledData(session_id=session_id, title=updated.title))

    # ------------------------------------------------------------------ lifecycle

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """Run the machinery behind the API while the block (or the app) runs.

        On entry: the question registry, the settling of runs a dead server left ``running``
        (:meth:`~lovia.web.store.ChatStore.sweep_stale_runs`), the schedule poller, and (on
        PostgreSQL) the replica supervisor's takeover of orphaned runs. On exit: live runs are wound
        down to resumable checkpoints and chat workspaces close.
        Usable directly as ``FastAPI(lifespan=deps.lifespan)``.
        """
        if self.questions is not None:
            self.questions.start()
        try:
            await self.store.sweep_stale_runs()
        except Exception:  # a stale record is cosmetic: it must not keep the server from starting
            logger.exception("settling the runs a dead server left running failed")
        self._scheduler.start()
        startup = getattr(self._supervisor, "startup", None)
        if startup is not None:
            await startup()
        try:
            yield
        finally:
            await self._scheduler.stop()
            await self._supervisor.shutdown()
            for task in list(self._titling):
                task.cancel()
            if self.questions is not None:
                await self.questions.aclose()
