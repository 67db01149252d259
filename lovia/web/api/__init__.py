"""The HTTP API as a router of its own: mount it in your FastAPI app, without the page.

```python
deps = RouterDeps(agents={"bot": agent}, store=ChatStore.in_memory())
app = FastAPI(lifespan=deps.lifespan)
app.include_router(build_api_router(deps), prefix="/lovia")
```

The router carries no authentication and no Host / Origin checks: add your own dependency (for
example ``Depends(token_dependency(token))``) and middleware (:class:`~lovia.web.auth.HostOriginGuard`).

Each part is a router of its own too, bound to the same ``deps``, for an app that serves only
some of the API: :func:`~lovia.web.api.agents.build_agents_router`,
:func:`~lovia.web.api.chat.build_chat_router`, :func:`~lovia.web.api.sessions.build_sessions_router`,
:func:`~lovia.web.api.schedules.build_schedules_router`, :func:`~lovia.web.api.workspace.build_workspace_router`,
:func:`~lovia.web.api.events.build_events_router`, :func:`~lovia.web.api.memory.build_memory_router`.
"""

from __future__ import annotations

from .._deps import require_web

require_web()

from fastapi import APIRouter, Depends, Request  # noqa: E402

from ..errors import ApiRoute, WebError  # noqa: E402
from ..ids import CHAT_ID_RULE, chat_id_error  # noqa: E402
from .agents import build_agents_router  # noqa: E402
from .chat import build_chat_router  # noqa: E402
from .deps import RouterDeps  # noqa: E402
from .events import build_events_router  # noqa: E402
from .memory import build_memory_router  # noqa: E402
from .schedules import build_schedules_router  # noqa: E402
from .sessions import build_sessions_router  # noqa: E402
from .workspace import build_workspace_router  # noqa: E402

__all__ = ["RouterDeps", "build_api_router", "chat_id_params"]


async def chat_id_params(request: Request) -> None:
    """Route dependency: a ``session_id`` in the path or the query must follow the chat id rule (else 422).

    Bodies carry theirs as :data:`lovia.web.ids.ChatId` fields, checked by the same rule.
    """
    for where, params in (("path", request.path_params), ("query", request.query_params)):
        value = params.get("session_id")
        problem = chat_id_error(value) if value else None
        if problem is not None:
            raise WebError(
                422,
                "invalid_request",
                f"{problem} ({where} parameter session_id)",
                hint=f"use an id of {CHAT_ID_RULE}",
            )


def build_api_router(deps: RouterDeps) -> APIRouter:
    """Every ``/api/...`` route (info, agents, events, chat, sessions, runs, uploads, schedules,
    questions, todos, follow-ups, memory, the workspace file panel) bound to ``deps``, answering
    errors with the documented body.

    The routes' paths start with ``/api``; ``include_router(router, prefix=...)`` puts them
    under a prefix of yours. Enter ``deps.lifespan`` with the app, or schedules never fire and
    live runs are not wound down on shutdown.
    """
    router = APIRouter(route_class=ApiRoute)
    for part in (
        build_agents_router(deps),
        build_events_router(deps),
        build_chat_router(deps),
        build_sessions_router(deps),
        build_schedules_router(deps),
        build_workspace_router(deps),
        build_memory_router(deps),
    ):
        router.include_router(part, dependencies=[Depends(chat_id_params)])
    if deps.config_runtime is not None:  # the CLI's default agent: its model settings (UI-internal)
        from .config import build_config_router

        router.include_router(build_config_router(deps.config_runtime))
    return router
