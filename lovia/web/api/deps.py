"""``RouterDeps``: everything the HTTP API's routes share, and the machinery behind them.

One ``RouterDeps`` backs one route table: :func:`lovia.web.api.build_api_router` reads it, and
:func:`lovia.web.app.create_app` builds one and mounts that same router. Its :meth:`RouterDeps.lifespan`
runs the scheduler and the run supervisor; an app mounting the router must enter it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...agent import Agent
from ...exceptions import UserError
from ...providers.base import Provider
from ...session import Session
from ..events_hub import EventHub
from ..followups import FollowupFn, FollowupRequest, coerce_suggestions, generate_followups
from ..questions import QuestionRegistry
from ..routes_uploads import DEFAULT_MAX_UPLOAD_MB, DEFAULT_UPLOAD_EXTENSIONS
from ..schedule_store import PostgresScheduleStore, ScheduleStore, SQLiteScheduleStore
from ..scheduler import Clock, Scheduler
from ..store import ChatStore
from ..store_pg import PostgresChatStore
from ..supervisor import RunSupervisor
from ..workspaces import WorkspaceSessions

__all__ = ["RouterDeps"]

logger = logging.getLogger("lovia.web")


@dataclass(eq=False)
class RouterDeps:
    """What the API routes need: the agents, the store, and the run settings.

    Only ``agents`` and ``store`` are required; the other fields default to what
    ``create_app`` uses. The run supervisor, the event bus and the scheduler are built from the
    fields when the object is made, so set the fields in the constructor, not afterwards.

    Not supported yet (other documented ``RouterDeps`` fields with no counterpart here):
    ``approvals`` (approvals are answered through the live run itself), ``context_policy``,
    ``title_model`` / ``titles`` (a chat is titled from its first message), ``budget``, ``retry``,
    ``tracer``, ``max_background_runs``, ``approval_timeout`` and ``run_deps``.
    ``workspaces`` is a read-only property (the supervisor's per-chat workspace sessions), not a
    field.

    Args:
        agents: ``{name: agent}``; the first entry is the default agent.
        store: transcripts, checkpoints and the chat index.
        title: the title ``GET /api/info`` reports (the page shows it).
        max_turns: per-run turn limit.
        scheduler_poll: seconds between checks for due schedules.
        questions: the ``ask_human`` question registry (``None``: the question routes answer 501).
        schedules: where schedules live; ``None`` opens one beside ``store`` (the same SQLite file
            or PostgreSQL schema), which :meth:`lifespan` then closes.
        clock: the scheduler's time source (default ``time.time``).
        max_upload_bytes: per-file upload limit.
        upload_allowed_ext: extensions uploads may have (``None``: any).
        demo: ``True`` when the only agent is the offline demo model (the page labels it).
        followups: follow-up suggestions for ``POST /api/sessions/{id}/followups``: ``False``
            (off: the route answers ``[]``), ``True`` (the built-in suggester,
            :func:`~lovia.web.followups.generate_followups`), or your own ``async (request) -> [str]``.
        followup_model: the model the built-in suggester asks (``None``: the chat's agent's model).
    """

    agents: Mapping[str, Agent[Any]]
    store: ChatStore
    title: str = "lovia"
    max_turns: int = 50
    scheduler_poll: float = 1.0
    questions: QuestionRegistry | None = None
    schedules: ScheduleStore | None = None
    clock: Clock | None = None
    max_upload_bytes: int = int(DEFAULT_MAX_UPLOAD_MB * (1 << 20))
    upload_allowed_ext: frozenset[str] | None = DEFAULT_UPLOAD_EXTENSIONS
    demo: bool = False
    followups: bool | FollowupFn = False
    followup_model: str | Provider | None = None
    config_runtime: Any = None  # a lovia.web.config.ConfigRuntime: serves /api/config*, swaps the default agent
    _supervisor: RunSupervisor = field(init=False, repr=False)
    _scheduler: Scheduler = field(init=False, repr=False)
    _owns_schedules: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        if not self.agents or not all(isinstance(a, Agent) for a in self.agents.values()):
            raise UserError(
                "RouterDeps(agents=...) needs a non-empty {name: Agent} mapping",
                hint="e.g. RouterDeps(agents={'bot': agent}, store=ChatStore.in_memory())",
            )
        self.agents = {str(name): agent for name, agent in self.agents.items()}
        options: dict[str, Any] = {"default_agent": self.default_agent, "max_turns": self.max_turns, "hub": EventHub()}
        if isinstance(self.store, PostgresChatStore):  # several processes serve one app: leased runs
            from ..replicas import ReplicaSupervisor

            self._supervisor = ReplicaSupervisor(self.store, dict(self.agents), **options)
        else:
            self._supervisor = RunSupervisor(self.store, dict(self.agents), **options)
        if self.schedules is None:
            self.schedules = _schedules_beside(self.store)
            self._owns_schedules = True
        from ..routes_schedules import fire_in_chat

        self._scheduler = Scheduler(
            self.schedules, lambda row: fire_in_chat(self, row), clock=self.clock, poll_interval=self.scheduler_poll
        )
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
    def workspaces(self) -> WorkspaceSessions:
        """The per-chat workspace sessions of the served agents."""
        return self._supervisor.workspaces

    @property
    def default_agent(self) -> str:
        """The name of the default agent (the first one)."""
        return next(iter(self.agents))

    @property
    def configured(self) -> bool:
        """Whether a real model is served (not only the offline demo)."""
        return not self.demo

    def emit(self, event: str, data: Mapping[str, object]) -> None:
        """Publish one lifecycle event to every ``GET /api/events`` subscriber."""
        self.bus.publish(event, dict(data))

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
            if self.followups is True:
                model = self.followup_model
                if model is None:
                    model = self.agents[request.agent].model if request.agent in self.agents else None
                if model is None:
                    return []
                return await generate_followups(request, model=model)
            return coerce_suggestions(await self.followups(request))
        except Exception as exc:  # suggestions are never load-bearing
            logger.warning("follow-up suggestions failed for %s (ignored): %s", request.session_id, exc)
            return []

    # ------------------------------------------------------------------ lifecycle

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """Run the machinery behind the API while the block (or the app) runs.

        On entry: the question registry, the schedule poller, and (on PostgreSQL) the replica
        supervisor's takeover of orphaned runs. On exit: live runs are wound down to resumable
        checkpoints and chat workspaces close; a schedule store this object opened is closed.
        Usable directly as ``FastAPI(lifespan=deps.lifespan)``.
        """
        if self.questions is not None:
            self.questions.start()
        self._scheduler.start()
        startup = getattr(self._supervisor, "startup", None)
        if startup is not None:
            await startup()
        try:
            yield
        finally:
            await self._scheduler.stop()
            if self._owns_schedules and self.schedules is not None:
                await self.schedules.close()
            await self._supervisor.shutdown()
            if self.questions is not None:
                await self.questions.aclose()


def _schedules_beside(store: ChatStore) -> ScheduleStore:
    """The schedule store in the chats' own database (PostgreSQL schema or SQLite file)."""
    if isinstance(store, PostgresChatStore):
        return PostgresScheduleStore(store.dsn, schema=store.schema)
    return SQLiteScheduleStore(store.path)
