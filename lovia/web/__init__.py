"""The bundled web app (extra ``lovia[web]``): ``create_app``, ``serve``, ``ChatStore``, ``RunSupervisor``.

FastAPI and uvicorn are imported only when the app is built, so ``import lovia.web`` works
without the extra; building the app without it raises a ``UserError`` naming ``pip install 'lovia[web]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI

    from .api.deps import RouterDeps
    from .auth import generate_token, is_loopback, token_dependency
    from .charts import show_chart, validate_chart_option
    from .components import put_ui_data, ui_result
    from .followups import FollowupFn, FollowupRequest, generate_followups
    from .html import show_html
    from .questions import QuestionRegistry
    from .run_deps import RunDepsFn, RunTrigger
    from .scheduling import Scheduling
    from .store import ChatMeta, ChatStore
    from .supervisor import RunSupervisor
    from .tables import show_table
    from .ui import SURFACE_NOTE, ChatUI

# Everything is imported on first use: ``lovia --help`` reads ``lovia.web.command`` without them.
_LAZY = {
    "ChatMeta": ".store",
    "ChatStore": ".store",
    "ChatUI": ".ui",
    "FollowupFn": ".followups",
    "FollowupRequest": ".followups",
    "QuestionRegistry": ".questions",
    "RunDepsFn": ".run_deps",
    "RunSupervisor": ".supervisor",
    "RunTrigger": ".run_deps",
    "SURFACE_NOTE": ".ui",
    "Scheduling": ".scheduling",
    "generate_followups": ".followups",
    "generate_token": ".auth",
    "is_loopback": ".auth",
    "put_ui_data": ".components",
    "show_chart": ".charts",
    "show_html": ".html",
    "show_table": ".tables",
    "token_dependency": ".auth",
    "ui_result": ".components",
    "validate_chart_option": ".charts",
    "RouterDeps": ".api.deps",
    "subagent_deliver": ".subagents",
    "wire_subagents": ".subagents",
}

__all__ = [
    "ChatMeta",
    "ChatStore",
    "ChatUI",
    "FollowupFn",
    "FollowupRequest",
    "QuestionRegistry",
    "RouterDeps",
    "RunDepsFn",
    "RunSupervisor",
    "RunTrigger",
    "SURFACE_NOTE",
    "Scheduling",
    "build_api_router",
    "create_app",
    "generate_followups",
    "generate_token",
    "is_loopback",
    "put_ui_data",
    "serve",
    "show_chart",
    "show_html",
    "show_table",
    "subagent_deliver",
    "token_dependency",
    "ui_result",
    "validate_chart_option",
    "wire_subagents",
]


if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)


def build_api_router(deps: RouterDeps) -> APIRouter:
    """The HTTP API as a router for your own FastAPI app; see :func:`lovia.web.api.build_api_router`."""
    from .api import build_api_router as build

    return build(deps)


def create_app(*args: Any, **kwargs: Any) -> FastAPI:
    """Build the ASGI app; see :func:`lovia.web.app.create_app` for the arguments."""
    from .app import create_app as build

    return build(*args, **kwargs)


def serve(target: Any = None, *, host: str = "127.0.0.1", port: int = 8000, **kwargs: Any) -> None:
    """Run the app under uvicorn; see :func:`lovia.web.app.serve` for the arguments."""
    from .app import serve as run

    run(target, host=host, port=port, **kwargs)
