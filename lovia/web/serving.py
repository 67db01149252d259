"""Running the app under uvicorn: the server class whose shutdown winds live runs down first,
the root-path check, and the server's own log lines. :func:`lovia.web.app.serve` uses them."""

from __future__ import annotations

import logging
import socket
import sys
from typing import Any

from ..exceptions import UserError

__all__ = ["log_run_failures", "normalize_root_path", "server_class"]


def normalize_root_path(value: str | None) -> str:
    """``"/lovia"`` from ``"lovia"``, ``"/lovia/"`` or ``"/lovia"``; ``""`` for none (or ``"/"``).

    Raises:
        UserError: a URL or a path with a query, fragment or whitespace.
    """
    text = (value or "").strip()
    if not text or text == "/":
        return ""
    if "://" in text or any(c in text for c in "?# \t"):
        raise UserError(
            f"root path {value!r} is not a plain URL path",
            hint="pass the prefix the proxy serves the app under, e.g. --root-path /lovia",
        )
    return "/" + text.strip("/")


def server_class() -> Any:
    """The ``uvicorn.Server`` subclass ``serve`` runs (imported late: uvicorn is an extra)."""
    import uvicorn

    class LoviaServer(uvicorn.Server):
        """Cancels live runs (keeping their checkpoints) before uvicorn waits for connections to close."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            state = getattr(self.config.loaded_app, "state", None) or getattr(
                getattr(self.config, "app", None), "state", None
            )
            lovia_state = getattr(state, "lovia", None)
            if lovia_state is not None:
                await lovia_state.supervisor.shutdown()
            await super().shutdown(sockets)

    return LoviaServer


def log_run_failures() -> None:
    """The server prints the web app's own warnings (one line per failed run) to stderr.

    Library use stays silent (the ``lovia`` logger has only a ``NullHandler``); ``serve`` is the
    server, so it says what went wrong. A handler the application configured is kept.
    """
    web_logger = logging.getLogger("lovia.web")
    if web_logger.handlers:
        return
    from .supervisor import run_source_log_filter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(run_source_log_filter())  # "[schedule:<id>] " on the lines of runs nobody typed
    handler.setFormatter(logging.Formatter("lovia web: %(levelname)s %(run_tag)s%(message)s"))
    web_logger.addHandler(handler)
    if web_logger.level == logging.NOTSET:
        web_logger.setLevel(logging.INFO)
