"""The bundled web app (extra ``lovia[web]``): ``create_app``, ``serve``, ``ChatStore``, ``RunSupervisor``.

FastAPI and uvicorn are imported only when the app is built, so ``import lovia.web`` works
without the extra; building the app without it raises a ``UserError`` naming ``pip install 'lovia[web]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .charts import show_chart, validate_chart_option
from .components import ui_result
from .store import ChatMeta, ChatStore
from .supervisor import RunSupervisor
from .tables import show_table

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "ChatMeta",
    "ChatStore",
    "RunSupervisor",
    "create_app",
    "serve",
    "show_chart",
    "show_table",
    "ui_result",
    "validate_chart_option",
]


def create_app(*args: Any, **kwargs: Any) -> FastAPI:
    """Build the ASGI app; see :func:`lovia.web.app.create_app` for the arguments."""
    from .app import create_app as build

    return build(*args, **kwargs)


def serve(*args: Any, **kwargs: Any) -> None:
    """Run the app under uvicorn; see :func:`lovia.web.server.serve` for the arguments."""
    from .server import serve as run

    run(*args, **kwargs)
