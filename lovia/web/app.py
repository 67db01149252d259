"""``create_app``: the FastAPI application (page, chat SSE, sessions API)."""

from __future__ import annotations

from ._deps import require_web

require_web()

import contextlib  # noqa: E402
import os  # noqa: E402
from collections.abc import AsyncIterator, Mapping, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from fastapi import Depends, FastAPI, HTTPException, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import FileResponse, JSONResponse  # noqa: E402
from fastapi.staticfiles import StaticFiles  # noqa: E402

from ..agent import Agent  # noqa: E402
from ..exceptions import LoviaError, UserError  # noqa: E402
from ..tools.human import HumanChannel  # noqa: E402
from .agents import AgentSet, default_agents, resolve_agents  # noqa: E402
from .auth import HostOriginGuard, HostPolicy, token_matches  # noqa: E402
from .events_hub import EventHub  # noqa: E402
from .params import CleanJsonBodies, validation_response  # noqa: E402
from .questions import QuestionRegistry, broadcast_question  # noqa: E402
from .replicas import ReplicaSupervisor  # noqa: E402
from .routes_agentviews import agentviews_router  # noqa: E402
from .routes_chat import chat_router  # noqa: E402
from .routes_info import info_router  # noqa: E402
from .routes_schedules import fire_in_chat, schedules_router  # noqa: E402
from .routes_sessions import sessions_router  # noqa: E402
from .routes_uploads import DEFAULT_MAX_UPLOAD_MB, parse_allowed_ext, uploads_router  # noqa: E402
from .schedule_store import PostgresScheduleStore, ScheduleStore, SQLiteScheduleStore, open_schedule_store  # noqa: E402
from .scheduler import Clock, Scheduler  # noqa: E402
from .state import WebState  # noqa: E402
from .store import ChatStore  # noqa: E402
from .store_pg import PostgresChatStore  # noqa: E402
from .supervisor import RunSupervisor  # noqa: E402

__all__ = ["DEFAULT_DB", "WebState", "create_app"]

DEFAULT_DB = "./.lovia/lovia.db"
STATIC_DIR = Path(__file__).parent / "static"


def _auth_dependency(state: WebState) -> Any:
    async def require_token(request: Request) -> None:
        if state.token is None:
            return
        if not token_matches(state.token, request.headers.get("authorization")):
            raise HTTPException(
                status_code=401,
                detail=(
                    "missing or wrong token: send 'Authorization: Bearer <token>'"
                    " with the token the server printed at startup"
                ),
            )

    return Depends(require_token)


def create_app(
    agents: Agent[Any] | Mapping[str, Agent[Any]] | None = None,
    *,
    store: ChatStore | None = None,
    db_path: str | None = None,
    token: str | None = None,
    title: str = "lovia",
    max_turns: int = 50,
    ui: bool = True,
    allowed_hosts: Sequence[str] = (),
    max_upload_mb: float | None = None,
    upload_allowed_ext: str | Sequence[str] | None = None,
    question_channel: HumanChannel | None = None,
    question_timeout: float | None = 600.0,
    schedules: ScheduleStore | None = None,
    scheduler_poll: float = 1.0,
    clock: Clock | None = None,
) -> FastAPI:
    """Build the ASGI app.

    Args:
        agents: an ``Agent`` or ``{name: agent}`` (the first is the default). ``None``: an
            assistant on ``LOVIA_MODEL``, or the offline demo model when none is configured.
        store: a ready :class:`ChatStore`; otherwise one SQLite file at ``db_path``.
        db_path: the SQLite file (default ``./.lovia/lovia.db``) when ``store`` is not given.
        token: when set, every API route requires ``Authorization: Bearer <token>``.
        title: shown in the page header.
        max_turns: per-run turn limit.
        ui: serve the page at ``/`` (``False``: API only).
        allowed_hosts: ``Host`` names to answer besides loopback and the bound address
            (``.example.com`` for every subdomain, ``*`` for any); see :class:`~lovia.web.auth.HostPolicy`.
        max_upload_mb: per-file upload limit in MiB (default ``LOVIA_MAX_UPLOAD_MB``, else 25).
        upload_allowed_ext: extensions uploads may have, as a list or ``"png, pdf"`` (``"*"``: any;
            default ``LOVIA_UPLOAD_ALLOWED_EXT``, else the built-in list).
        question_channel: the channel the agents' ``ask_human`` tool asks through; its questions
            appear in the page and ``POST /api/chat/answer`` answers them.
        question_timeout: seconds a question waits before it is cancelled (``None``: no limit).
        schedules: where scheduled runs live; by default next to the chats (the ``db_path``
            file, the ``store``'s file, or PostgreSQL for a ``postgresql://`` ``db_path``).
        scheduler_poll: seconds between checks for due schedules.
        clock: the scheduler's time source (default ``time.time``; a ``ManualClock`` in tests).

    Returns:
        A FastAPI application; run it with a single uvicorn worker (runs are process-local).
    """
    agent_set = resolve_agents(agents) if agents is not None else default_agents()
    owned = store is None
    chat_store = store if store is not None else ChatStore.sqlite(db_path or DEFAULT_DB)
    supervisor = _supervisor(chat_store, agent_set, max_turns)
    state = WebState(
        chat_store, supervisor, agent_set, token, title, *_upload_limits(max_upload_mb, upload_allowed_ext)
    )
    if question_channel is not None:
        state.questions = QuestionRegistry(
            question_channel, timeout=question_timeout, on_question=lambda q: broadcast_question(supervisor, q)
        )

    owns_schedules = schedules is None
    state.schedules = schedules if schedules is not None else _default_schedules(chat_store, db_path, owned)
    state.scheduler = Scheduler(
        state.schedules, lambda row: fire_in_chat(state, row), clock=clock, poll_interval=scheduler_poll
    )

    lifespan = _lifespan(state, owns_store=owned, owns_schedules=owns_schedules)
    app = FastAPI(title=title, lifespan=lifespan, docs_url=None, openapi_url=None, redoc_url=None)
    app.state.lovia = state
    app.state.host_policy = HostPolicy(allowed_hosts)  # serve() adds the bound address
    app.add_middleware(CleanJsonBodies)
    app.add_middleware(HostOriginGuard, policy=app.state.host_policy)  # added last: runs first
    auth = _auth_dependency(state)
    _mount_docs(app, auth)  # the schema and Swagger UI need what the API needs

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc)

    @app.exception_handler(LoviaError)
    async def lovia_error(_request: Request, exc: LoviaError) -> JSONResponse:
        return JSONResponse({"detail": exc.message, "hint": exc.hint, "type": type(exc).__name__}, status_code=400)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(info_router(state), dependencies=[auth])
    app.include_router(chat_router(state), dependencies=[auth])
    app.include_router(sessions_router(state), dependencies=[auth])
    app.include_router(schedules_router(state), dependencies=[auth])
    app.include_router(uploads_router(state), dependencies=[auth])
    app.include_router(agentviews_router(state), dependencies=[auth])
    if ui:
        _mount_ui(app)
    return app


def _supervisor(chat_store: ChatStore, agent_set: AgentSet, max_turns: int) -> RunSupervisor:
    """The run supervisor; on PostgreSQL several processes serve one app, so runs are leased,
    relayed and taken over (:class:`ReplicaSupervisor`)."""
    options: dict[str, Any] = {"default_agent": agent_set.default, "max_turns": max_turns, "hub": EventHub()}
    if isinstance(chat_store, PostgresChatStore):
        return ReplicaSupervisor(chat_store, agent_set.agents, **options)
    return RunSupervisor(chat_store, agent_set.agents, **options)


def _lifespan(state: WebState, *, owns_store: bool, owns_schedules: bool) -> Any:
    """Start the question registry, the scheduler and the supervisor; stop them in reverse."""
    supervisor = state.supervisor

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if state.questions is not None:
            state.questions.start()
        assert state.scheduler is not None and state.schedules is not None
        state.scheduler.start()
        startup = getattr(supervisor, "startup", None)
        if startup is not None:
            await startup()
        try:
            yield
        finally:
            await state.scheduler.stop()
            if owns_schedules:
                await state.schedules.close()
            await supervisor.shutdown()
            if state.questions is not None:
                await state.questions.aclose()
            if owns_store:
                await state.store.close()

    return lifespan


def _default_schedules(chat_store: ChatStore, db_path: str | None, owned: bool) -> ScheduleStore:
    """The schedule store next to the chats: the same database (PostgreSQL URL or SQLite file)."""
    if isinstance(chat_store, PostgresChatStore):
        return PostgresScheduleStore(chat_store.dsn, schema=chat_store.schema)
    if owned:
        return open_schedule_store(db_path or DEFAULT_DB)
    return SQLiteScheduleStore(chat_store.path)


def _upload_limits(mb: float | None, ext: str | Sequence[str] | None) -> tuple[int, frozenset[str] | None]:
    """``(max bytes, allowed extensions)`` from the arguments, else the environment, else the defaults."""
    if mb is None:
        raw = os.environ.get("LOVIA_MAX_UPLOAD_MB", "").strip()
        try:
            mb = float(raw) if raw else DEFAULT_MAX_UPLOAD_MB
        except ValueError:
            raise UserError(
                f"LOVIA_MAX_UPLOAD_MB={raw!r} is not a number", hint="set it to a size in MiB, e.g. 25"
            ) from None
    if mb <= 0:
        raise UserError(f"max_upload_mb must be positive, got {mb}", hint="pass a size in MiB, e.g. 25")
    if ext is None:
        ext = os.environ.get("LOVIA_UPLOAD_ALLOWED_EXT") or None
    return int(mb * (1 << 20)), parse_allowed_ext(ext)


def _mount_docs(app: FastAPI, auth: Any) -> None:
    from fastapi.openapi.docs import get_swagger_ui_html

    @app.get("/api/openapi.json", include_in_schema=False, dependencies=[auth])
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/api/docs", include_in_schema=False, dependencies=[auth])
    async def docs() -> Any:
        return get_swagger_ui_html(openapi_url="/api/openapi.json", title=f"{app.title} API")


def _mount_ui(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})
