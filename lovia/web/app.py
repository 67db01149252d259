"""``create_app``: the FastAPI application (page, chat SSE, sessions API)."""

from __future__ import annotations

from ._deps import require_web

require_web()

import contextlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from collections.abc import AsyncIterator, Callable, Mapping, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.exception_handlers import http_exception_handler  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.middleware.cors import CORSMiddleware  # noqa: E402
from fastapi.responses import JSONResponse, Response  # noqa: E402
from fastapi.staticfiles import StaticFiles  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

from ..agent import Agent  # noqa: E402
from ..context.base import ContextPolicy  # noqa: E402
from ..exceptions import LoviaError, UserError  # noqa: E402
from ..providers.base import Provider  # noqa: E402
from ..reliability import RetryPolicy, RunBudget  # noqa: E402
from ..session import Session  # noqa: E402
from ..tools.human import HumanChannel  # noqa: E402
from ..tracing import Tracer  # noqa: E402
from .agents import default_agents, resolve_agents  # noqa: E402
from .api import RouterDeps, build_api_router  # noqa: E402
from .api.deps import DEFAULT_FOLLOWUP_TIMEOUT  # noqa: E402
from .auth import (  # noqa: E402
    HostOriginGuard,
    HostPolicy,
    generate_token,
    is_loopback,
    mark_authenticated,
    normalize_origin,
    token_dependency,
)
from .db_location import DEFAULT_DB, default_db_path  # noqa: E402
from .errors import error_body, internal_error_response, lovia_error_response, validation_response  # noqa: E402
from .followups import FollowupFn  # noqa: E402
from .params import CleanJsonBodies  # noqa: E402
from .questions import QuestionRegistry, broadcast_question  # noqa: E402
from .routes_uploads import DEFAULT_MAX_UPLOAD_MB, parse_allowed_ext  # noqa: E402
from .run_deps import RunDepsFn  # noqa: E402
from .scheduler import Clock  # noqa: E402
from .serving import log_run_failures, normalize_root_path, server_class  # noqa: E402
from .state import WebState  # noqa: E402
from .store import (  # noqa: E402
    ChatIndex,  # noqa: E402
    ChatStore,  # noqa: E402
    ScheduleStore,
    open_schedule_store,
)
from .ui import ChatUI, build_ui_router  # noqa: E402

__all__ = ["DEFAULT_DB", "WebState", "create_app", "default_db_path", "serve"]


class AppArgumentError(UserError, ValueError):
    """An invalid ``create_app()`` argument; a ``ValueError`` as well, which callers may catch."""


def _checked_token(token: str | None, auth: Any) -> str | None:
    """``token`` stripped of surrounding whitespace; refused with ``auth`` or when blank."""
    if token is not None and auth is not None:
        raise AppArgumentError(
            "create_app() takes token= or auth=, not both", hint="let your auth dependency check the token"
        )
    if token is None:
        return None
    token = token.strip()  # a pasted token carries stray whitespace; the header never does
    if not token:
        raise AppArgumentError(
            "create_app(token=...) needs a non-empty token", hint="pass a secret string, e.g. generate_token()"
        )
    return token


STATIC_DIR = Path(__file__).parent / "static"


def create_app(
    agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]] | None = None,
    *,
    db_path: str | Path | None = None,
    session: Session | None = None,
    store: ChatIndex | None = None,
    context_policy: ContextPolicy | None = None,
    title_model: str | Provider | None = None,
    titles: bool = True,
    followups: bool | FollowupFn = False,
    followup_model: str | Provider | None = None,
    followup_timeout: float | None = DEFAULT_FOLLOWUP_TIMEOUT,
    title: str = "lovia",
    max_turns: int = 50,
    budget: RunBudget | None = None,
    retry: RetryPolicy | None = None,
    tracer: Tracer | None = None,
    max_background_runs: int = 8,
    max_queued_runs: int | None = None,
    approval_timeout: float | None = None,
    question_channel: HumanChannel | None = None,
    question_timeout: float | None = None,
    scheduler_poll: float = 1.0,
    wire_subagents: bool = True,
    ui: bool | ChatUI = True,
    cors_origins: Sequence[str] | None = None,
    token: str | None = None,
    auth: Callable[..., Any] | None = None,
    lifespan: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | None = None,
    config_runtime: Any = None,
    run_deps: RunDepsFn | None = None,
    allowed_hosts: Sequence[str] = (),
    max_upload_mb: float | None = None,
    upload_allowed_ext: str | Sequence[str] | None = None,
    schedules: ScheduleStore | None = None,
    clock: Clock | None = None,
) -> FastAPI:
    """Build the ASGI app: the page, ``/healthz``, ``/api/docs`` and the router of
    :func:`lovia.web.api.build_api_router` (one :class:`~lovia.web.api.RouterDeps`, kept as
    ``app.state.deps``), behind the Host / Origin guard and, with ``token`` or ``auth``, a check
    on every ``/api`` business route.

    Args:
        agent_or_agents: an ``Agent`` or ``{name: agent}`` (the first is the default). ``None``:
            an assistant on ``LOVIA_MODEL``, or the offline demo model when none is configured.
        db_path: the SQLite file when ``store`` is not given (default ``./.lovia/<agent>.db``, named
            after the default agent; see :func:`default_db_path`).
        session: a transcript store of your own; the checkpoints and the chat index then live
            in the ``db_path`` file. Not together with ``store``.
        store: a ready :class:`ChatStore` (transcripts, checkpoints and the chat index).
        context_policy: the view-shaping posture of every run (``None``: the agent's).
        title_model: the model that titles a new chat after its first run; ``None`` makes no
            model call and keeps the title made from the first message.
        titles: ``False`` turns model titles off.
        followups: follow-up suggestions (``POST /api/sessions/{id}/followups``): off by default
            (each costs a model call); ``True`` for the built-in suggester, or your own
            ``async (FollowupRequest) -> [str]``.
        followup_model: the model the built-in suggester asks (default: the chat's agent's model).
        followup_timeout: seconds a suggester may take before the route answers ``[]``
            (``None``: no limit).
        title: shown in the page header and reported by ``GET /api/info``.
        max_turns: per-run turn limit.
        budget: limits every run gets a fresh copy of.
        retry: the retry posture of every run (``None``: the agent's).
        tracer: records the spans of every served run.
        max_background_runs: runs live at once. A chat started from a stream past it waits in
            line for a slot (its stream sends ``run_waiting``); other starts answer 429 ``too_many_runs``.
        max_queued_runs: places in that line (``None``: four per run of ``max_background_runs``;
            ``0``: no line). With the line full, a chat answers 429 ``too_many_runs`` too.
        approval_timeout: seconds a gated tool call waits for the user before it is denied.
        question_channel: the channel the agents' ``ask_human`` tool asks through; its questions
            appear in the page and ``POST /api/chat/answer`` answers them.
        question_timeout: seconds a question waits before it is cancelled (``None``: no limit).
        scheduler_poll: seconds between checks for due schedules.
        wire_subagents: run the children of the agents' default-mode ``Subagents`` plugins as
            chats of their own, linked to the parent chat (see :mod:`lovia.web.subagents`);
            ``False`` leaves them inside the parent run.
        ui: serve the page at ``/`` (``False``: API only; a :class:`~lovia.web.ui.ChatUI` customizes it).
        cors_origins: browser origins allowed to call the API from another site (CORS without
            credentials); the cross-origin guard lets exactly these through. ``None``: no CORS.
        token: every business API route requires ``Authorization: Bearer <token>`` (otherwise
            401 ``server_token``).
        auth: your own FastAPI dependency guarding the same routes instead of ``token``; it
            refuses a request by raising (``HTTPException(401)``, say).
        lifespan: your own lifespan (as for ``FastAPI(lifespan=...)``); it wraps lovia's, so your
            resources are up before the first run and close after live runs wound down. State
            it yields reaches ``request.state``.
        config_runtime: the model-settings runtime, kept as ``RouterDeps.config_runtime``.
        run_deps: builds each run's ``RunContext.deps`` from a :class:`~lovia.web.run_deps.RunTrigger`.
        allowed_hosts: ``Host`` names to answer besides loopback and the bound address
            (``.example.com`` for every subdomain, ``*`` for any); see :class:`~lovia.web.auth.HostPolicy`.
        max_upload_mb: per-file upload limit in MiB (default ``LOVIA_MAX_UPLOAD_MB``, else 25).
        upload_allowed_ext: extensions uploads may have, as a list or ``"png, pdf"`` (``"*"``: any;
            default ``LOVIA_UPLOAD_ALLOWED_EXT``, else the built-in list).
        schedules: where scheduled runs live; by default next to the chats (the ``db_path``
            file, the ``store``'s file, or PostgreSQL for a ``postgresql://`` ``db_path``).
        clock: the scheduler's time source (default ``time.time``; a ``ManualClock`` in tests).

    Returns:
        A FastAPI application; run it with a single uvicorn worker (runs are process-local).

    Raises:
        UserError: ``store`` with ``session``; :class:`AppArgumentError` (a ``ValueError`` too):
            ``token`` with ``auth``, or a blank ``token``.
    """
    token = _checked_token(token, auth)
    agent_set = resolve_agents(agent_or_agents) if agent_or_agents is not None else default_agents()
    db_file = _db_file(db_path, store, agent_set.default if agent_or_agents is not None else None)
    if store is not None and session is not None:
        raise UserError("create_app() takes store= or session=, not both", hint="a ChatStore carries its own session")
    owned = store is None
    chat_store = store if store is not None else _open_store(db_file, session)
    max_bytes, allowed_ext = _upload_limits(max_upload_mb, upload_allowed_ext)
    if schedules is None and owned and db_file is not None:
        schedules = open_schedule_store(db_file)  # a postgresql:// db_path keeps its schedules there
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
        followup_timeout=followup_timeout,
        context_policy=context_policy,
        title_model=title_model,
        titles=titles,
        budget=budget,
        retry=retry,
        tracer=tracer,
        max_background_runs=max_background_runs,
        max_queued_runs=max_queued_runs,
        approval_timeout=approval_timeout,
        config_runtime=config_runtime,
        run_deps=run_deps,
        wire_subagents=wire_subagents,
    )
    if config_runtime is not None:
        config_runtime.bind(deps)
    if wire_subagents:
        from .subagents import wire_subagents as wire

        wire(deps)
    if question_channel is not None:
        deps.questions = QuestionRegistry(
            question_channel, timeout=question_timeout, on_question=lambda q: broadcast_question(deps.supervisor, q)
        )

    app = FastAPI(
        title=title,
        lifespan=_lifespan(deps, lifespan, owns_store=owned, owns_schedules=owns_schedules),
        docs_url=None,
        openapi_url=None,
        redoc_url=None,
    )
    app.state.deps = deps
    app.state.lovia = deps  # the older name; ``serve`` and existing callers read it
    app.state.guarded = token is not None or auth is not None  # serve() refuses an open non-loopback app
    app.state.server_token = token  # the page opened as /?token=... gets it as a cookie
    app.state.host_policy = HostPolicy(allowed_hosts)  # serve() adds the bound address
    origins = tuple(cors_origins or ())
    app.add_middleware(CleanJsonBodies)
    app.add_middleware(
        HostOriginGuard,
        policy=app.state.host_policy,
        allowed_origins=origins,
        origin_allowed=lambda origin: _cors_allows(app, origin),
    )
    if origins:  # added last: runs first, so a preflight is answered before the guard
        app.add_middleware(CORSMiddleware, allow_origins=list(origins), allow_methods=["*"], allow_headers=["*"])
    guard: list[Any] = []
    if auth is not None:
        # Dependencies run in order: the flag set first is cleared only when auth let the request in.
        guard = [Depends(_entering_auth), Depends(auth), Depends(_passed_auth)]
    elif token is not None:
        guard = [Depends(token_dependency(token))]
    _mount_docs(app, guard)  # the schema and Swagger UI need what the API needs
    _error_handlers(app)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(build_api_router(deps), dependencies=guard)
    if ui:
        _mount_ui(app, ui if isinstance(ui, ChatUI) else ChatUI(), title)
    return app


_AUTH_PENDING = "lovia_auth_pending"
"""Request-state flag: the ``auth=`` dependency has not let this request in (yet)."""


async def _entering_auth(request: Request) -> None:
    setattr(request.state, _AUTH_PENDING, True)


async def _passed_auth(request: Request) -> None:
    setattr(request.state, _AUTH_PENDING, False)
    mark_authenticated(request)


def _cors_allows(app: FastAPI, origin: str) -> bool:
    """Whether a ``CORSMiddleware`` added to the app allows ``origin``.

    An app that lets another site in with its own (credentialed) CORS middleware, as the docs show
    for ``auth=``, has decided that site may call it; the cross-site check then lets it through too.
    """
    wanted = normalize_origin(origin)
    for entry in app.user_middleware:
        if not (isinstance(entry.cls, type) and issubclass(entry.cls, CORSMiddleware)):
            continue
        given: Any = entry.kwargs.get("allow_origins") or ()
        allowed = [str(o) for o in given]
        if "*" in allowed or wanted in {normalize_origin(o) for o in allowed}:
            return True
        pattern = entry.kwargs.get("allow_origin_regex")
        if isinstance(pattern, str) and re.fullmatch(pattern, origin.strip()):
            return True
    return False


def _db_file(db_path: str | Path | None, store: ChatIndex | None, agent: str | None) -> str | None:
    """The SQLite file ``create_app`` opens: ``db_path``, else the agent's default file (``None``:
    a ``store`` was given, or the default assistant, whose store opens ``DEFAULT_DB``)."""
    if db_path is not None:
        return os.fspath(db_path)
    if store is not None or agent is None:
        return None
    return default_db_path(agent)


def _open_store(db_file: str | None, session: Session | None) -> ChatStore:
    """The app's own store: one SQLite file, or your ``session`` with checkpoints and index in that file."""
    path = db_file or DEFAULT_DB
    if session is None:
        return ChatStore.sqlite(path)
    from ..stores import SQLiteCheckpointer

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return ChatStore(session, checkpointer=SQLiteCheckpointer(path, wal=True), meta_path=path, wal=True)


def serve(
    target: Any = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    echo: Callable[[str], None] | None = None,
    allowed_hosts: Sequence[str] = (),
    root_path: str = "",
    log_level: str = "info",
    db_path: str | None = None,
    store: ChatIndex | None = None,
    token: str | None = None,
    title: str = "lovia",
    max_turns: int = 50,
    followups: bool = False,
    config_runtime: Any = None,
    max_background_runs: int = 8,
    max_queued_runs: int | None = None,
    **uvicorn_kwargs: Any,
) -> None:
    """Serve the chat app until interrupted (Ctrl+C / SIGTERM: live runs keep their checkpoints).

    Args:
        target: an app from :func:`~lovia.web.app.create_app`, or an ``Agent`` / ``{name: agent}``
            to build one with the defaults (``None``: ``LOVIA_MODEL`` or the offline demo).
        host: bind address. Beyond loopback the API is never anonymous: an app built here gets a
            generated token (printed with a ready link), and a ``create_app`` app built with
            neither ``token`` nor ``auth`` is refused.
        port: TCP port.
        echo: where to print the startup lines (default: stdout).
        allowed_hosts: more ``Host`` names to answer (``--allowed-host``); loopback names and
            ``host`` itself always work, any other name is refused (DNS-rebinding defence).
        root_path: the path prefix a reverse proxy serves the app under (``"/lovia"``) and strips
            before forwarding; the page's asset and API URLs then carry it. The server itself
            still answers at its root.
        log_level: uvicorn log level.
        db_path: when building the app: the SQLite file (default ``./.lovia/<agent>.db``).
        store: when building the app: a ready :class:`ChatStore` instead of ``db_path``.
        token: when building the app: the API token (generated for a non-loopback ``host``).
        title: when building the app: the page title.
        max_turns: when building the app: the per-run turn limit.
        followups: when building the app: follow-up suggestions with the built-in suggester.
        config_runtime: when building the app: the CLI's :class:`~lovia.web.config.ConfigRuntime`.
        max_background_runs: when building the app: runs live at once (``lovia web --max-runs``).
        max_queued_runs: when building the app: chats that may wait for a slot (``--run-queue``).
        **uvicorn_kwargs: passed to ``uvicorn.Config`` (``ssl_certfile``, ``timeout_keep_alive``...).

    Raises:
        UserError: build options given with a ready app, more than one worker, or an unguarded
            ``create_app`` app on a non-loopback ``host``.
    """
    say = echo or (lambda line: print(line, file=sys.stdout, flush=True))
    root_path = normalize_root_path(root_path)
    if uvicorn_kwargs.pop("workers", 1) not in (1, None):
        raise UserError("serve() runs one worker", hint="live runs are process-local: drop workers=")
    if isinstance(target, FastAPI):
        app = target
        given = {"db_path": db_path, "store": store, "token": token}
        extra = [name for name, value in given.items() if value is not None]
        limits = max_background_runs != 8 or max_queued_runs is not None
        if extra or title != "lovia" or max_turns != 50 or followups or config_runtime is not None or limits:
            raise UserError(
                "serve() got app options together with a ready app",
                hint="pass them to create_app(...) instead",
            )
        deps = getattr(app.state, "deps", None)
        if deps is not None and not is_loopback(host) and not getattr(app.state, "guarded", False):
            raise UserError(
                f"refusing to serve an app without token= or auth= on {host}, a non-loopback address",
                hint="build it with create_app(..., token=...) or auth=..., or bind host='127.0.0.1'",
            )
    else:
        if token is None and not is_loopback(host):
            token = generate_token()
            say(f"lovia web: {host} is not a loopback address, so API calls need this token: {token}")
        app = create_app(
            target,
            store=store,
            db_path=db_path,
            token=token,
            title=title,
            max_turns=max_turns,
            followups=followups,
            config_runtime=config_runtime,
            max_background_runs=max_background_runs,
            max_queued_runs=max_queued_runs,
        )
    policy = getattr(app.state, "host_policy", None)
    if policy is not None:
        policy.bind_to(host, allowed_hosts)
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    link = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    state = getattr(app.state, "lovia", None)
    if state is not None and state.demo:
        where = "open Settings → Models in the page" if config_runtime is not None else "set LOVIA_MODEL"
        say(f"lovia web: no model configured ({where}); the page offers the offline demo model")
    if root_path:
        say(f"lovia web: serving for a proxy at {root_path}/ (it strips the prefix); this server answers at {link}")
    else:
        say(f"lovia web: open {link}")
    log_run_failures()
    import uvicorn

    options: dict[str, Any] = {"timeout_graceful_shutdown": 15, **uvicorn_kwargs}
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1, root_path=root_path, **options)
    server_class()(config).run()


_STATUS_CODES = {401: "server_token", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
"""The error code of an ``HTTPException`` raised with a plain-text detail, by status."""


def _error_handlers(app: FastAPI) -> None:
    """Errors raised outside the API routes get the same body as the routes' own."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if getattr(request.state, _AUTH_PENDING, False):
            return await http_exception_handler(request, exc)  # your auth= dependency's own answer
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


def _lifespan(deps: RouterDeps, user: Any, *, owns_store: bool, owns_schedules: bool) -> Any:
    """The user's lifespan around the API machinery (:meth:`RouterDeps.lifespan`), then what
    the app itself opened; the user's state (what it yields) becomes the app's."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
        if user is None:
            async with ours(app):
                yield None
            return
        async with user(app) as state, ours(app):
            yield state

    @contextlib.asynccontextmanager
    async def ours(_app: FastAPI) -> AsyncIterator[None]:
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


def _mount_docs(app: FastAPI, guard: list[Any]) -> None:
    from fastapi.openapi.docs import get_swagger_ui_html

    @app.get("/api/openapi.json", include_in_schema=False, dependencies=guard)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/api/docs", include_in_schema=False, dependencies=guard)
    async def docs(request: Request) -> Any:
        root = request.scope.get("root_path", "")  # behind a proxy's path prefix, or mounted
        return get_swagger_ui_html(openapi_url=f"{root}/api/openapi.json", title=f"{app.title} API")


def _mount_ui(app: FastAPI, ui: ChatUI, title: str) -> None:
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(build_ui_router(ui, title=title))
