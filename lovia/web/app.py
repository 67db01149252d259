"""``create_app``: the FastAPI application (page, chat SSE, sessions API)."""

from __future__ import annotations

from ._deps import require_web

require_web()

import contextlib  # noqa: E402
import os  # noqa: E402
from collections.abc import AsyncIterator, Mapping, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from fastapi.staticfiles import StaticFiles  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

from ..agent import Agent  # noqa: E402
from ..exceptions import LoviaError, UserError  # noqa: E402
from ..providers.base import Provider  # noqa: E402
from ..tools.human import HumanChannel  # noqa: E402
from .agents import default_agents, resolve_agents  # noqa: E402
from .api import RouterDeps, build_api_router  # noqa: E402
from .auth import HostOriginGuard, HostPolicy, token_dependency  # noqa: E402
from .errors import error_body, internal_error_response, lovia_error_response, validation_response  # noqa: E402
from .followups import FollowupFn  # noqa: E402
from .params import CleanJsonBodies  # noqa: E402
from .questions import QuestionRegistry, broadcast_question  # noqa: E402
from .routes_uploads import DEFAULT_MAX_UPLOAD_MB, parse_allowed_ext  # noqa: E402
from .schedule_store import ScheduleStore, open_schedule_store  # noqa: E402
from .scheduler import Clock  # noqa: E402
from .state import WebState  # noqa: E402
from .store import ChatStore  # noqa: E402
from .ui import ChatUI, build_ui_router  # noqa: E402

__all__ = ["DEFAULT_DB", "WebState", "create_app"]

DEFAULT_DB = "./.lovia/lovia.db"
STATIC_DIR = Path(__file__).parent / "static"


def create_app(
    agents: Agent[Any] | Mapping[str, Agent[Any]] | None = None,
    *,
    store: ChatStore | None = None,
    db_path: str | None = None,
    token: str | None = None,
    title: str = "lovia",
    max_turns: int = 50,
    ui: bool | ChatUI = True,
    allowed_hosts: Sequence[str] = (),
    max_upload_mb: float | None = None,
    upload_allowed_ext: str | Sequence[str] | None = None,
    question_channel: HumanChannel | None = None,
    question_timeout: float | None = 600.0,
    schedules: ScheduleStore | None = None,
    scheduler_poll: float = 1.0,
    clock: Clock | None = None,
    followups: bool | FollowupFn = False,
    followup_model: str | Provider | None = None,
) -> FastAPI:
    """Build the ASGI app: the page, ``/healthz``, ``/api/docs`` and the router of
    :func:`lovia.web.api.build_api_router` (one :class:`~lovia.web.api.RouterDeps`, kept as
    ``app.state.deps``), behind the Host / Origin guard and, with ``token``, the token check.

    Args:
        agents: an ``Agent`` or ``{name: agent}`` (the first is the default). ``None``: an
            assistant on ``LOVIA_MODEL``, or the offline demo model when none is configured.
        store: a ready :class:`ChatStore`; otherwise one SQLite file at ``db_path``.
        db_path: the SQLite file (default ``./.lovia/lovia.db``) when ``store`` is not given.
        token: when set, every API route requires ``Authorization: Bearer <token>`` (otherwise
            401 ``server_token``).
        title: shown in the page header.
        max_turns: per-run turn limit.
        ui: serve the page at ``/`` (``False``: API only; a :class:`~lovia.web.ui.ChatUI` customizes it).
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
        followups: follow-up suggestions (``POST /api/sessions/{id}/followups``): off by default
            (each costs a model call); ``True`` for the built-in suggester, or your own
            ``async (FollowupRequest) -> [str]``.
        followup_model: the model the built-in suggester asks (default: the chat's agent's model).

    Returns:
        A FastAPI application; run it with a single uvicorn worker (runs are process-local).
    """
    agent_set = resolve_agents(agents) if agents is not None else default_agents()
    owned = store is None
    chat_store = store if store is not None else ChatStore.sqlite(db_path or DEFAULT_DB)
    max_bytes, allowed_ext = _upload_limits(max_upload_mb, upload_allowed_ext)
    if schedules is None and owned and db_path is not None:
        schedules = open_schedule_store(db_path)  # a postgresql:// db_path keeps its schedules there
        owns_schedules = True
    else:
        owns_schedules = False
    deps = RouterDeps(
        agents=agent_set.agents,
        store=chat_store,
        title=title,
        max_turns=max_turns,
        scheduler_poll=scheduler_poll,
        schedules=schedules,
        clock=clock,
        max_upload_bytes=max_bytes,
        upload_allowed_ext=allowed_ext,
        demo=agent_set.demo,
        followups=followups,
        followup_model=followup_model,
    )
    if question_channel is not None:
        deps.questions = QuestionRegistry(
            question_channel, timeout=question_timeout, on_question=lambda q: broadcast_question(deps.supervisor, q)
        )

    app = FastAPI(
        title=title,
        lifespan=_lifespan(deps, owns_store=owned, owns_schedules=owns_schedules),
        docs_url=None,
        openapi_url=None,
        redoc_url=None,
    )
    app.state.deps = deps
    app.state.lovia = deps  # the older name; ``serve`` and existing callers read it
    app.state.host_policy = HostPolicy(allowed_hosts)  # serve() adds the bound address
    app.add_middleware(CleanJsonBodies)
    app.add_middleware(HostOriginGuard, policy=app.state.host_policy)  # added last: runs first
    auth = [Depends(token_dependency(token))] if token is not None else []
    _mount_docs(app, auth)  # the schema and Swagger UI need what the API needs
    _error_handlers(app)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(build_api_router(deps), dependencies=auth)
    if ui:
        _mount_ui(app, ui if isinstance(ui, ChatUI) else ChatUI(), title)
    return app


_STATUS_CODES = {401: "server_token", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
"""The error code of an ``HTTPException`` raised with a plain-text detail, by status."""


def _error_handlers(app: FastAPI) -> None:
    """Errors raised outside the API routes get the same body as the routes' own."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.detail, dict) and "code" in exc.detail:
            body: dict[str, Any] = {"detail": exc.detail}
        else:  # Starlette's own: an unknown path, a wrong method
            fallback = "internal" if exc.status_code >= 500 else "invalid_request"
            code = _STATUS_CODES.get(exc.status_code, fallback)
            hint = "GET /api/docs lists the routes" if exc.status_code in (404, 405) else None
            body = error_body(code, str(exc.detail), hint)
        return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc)

    @app.exception_handler(LoviaError)
    async def lovia_error(request: Request, exc: LoviaError) -> JSONResponse:
        return lovia_error_response(exc, request)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        return internal_error_response(exc, request)


def _lifespan(deps: RouterDeps, *, owns_store: bool, owns_schedules: bool) -> Any:
    """The API machinery (:meth:`RouterDeps.lifespan`), then what the app itself opened."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            async with deps.lifespan():
                yield
        finally:
            if owns_schedules and deps.schedules is not None:
                await deps.schedules.close()
            if owns_store:
                await deps.store.close()

    return lifespan


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


def _mount_docs(app: FastAPI, auth: list[Any]) -> None:
    from fastapi.openapi.docs import get_swagger_ui_html

    @app.get("/api/openapi.json", include_in_schema=False, dependencies=auth)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/api/docs", include_in_schema=False, dependencies=auth)
    async def docs(request: Request) -> Any:
        root = request.scope.get("root_path", "")  # behind a proxy's path prefix, or mounted
        return get_swagger_ui_html(openapi_url=f"{root}/api/openapi.json", title=f"{app.title} API")


def _mount_ui(app: FastAPI, ui: ChatUI, title: str) -> None:
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(build_ui_router(ui, title=title))
