"""``serve``: run the web app under uvicorn (single worker), with a graceful shutdown that keeps checkpoints."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import UserError
from ._deps import require_web
from .auth import generate_token, is_loopback
from .store import ChatStore

__all__ = ["normalize_root_path", "serve"]


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


def _server_class() -> Any:
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


def _log_run_failures() -> None:
    """The server prints the web app's own warnings (one line per failed run) to stderr.

    Library use stays silent (the ``lovia`` logger has only a ``NullHandler``); ``serve`` is the
    server, so it says what went wrong. A handler the application configured is kept.
    """
    web_logger = logging.getLogger("lovia.web")
    if web_logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("lovia web: %(levelname)s %(message)s"))
    web_logger.addHandler(handler)
    if web_logger.level == logging.NOTSET:
        web_logger.setLevel(logging.INFO)


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
    store: ChatStore | None = None,
    token: str | None = None,
    title: str = "lovia",
    max_turns: int = 50,
    followups: bool = False,
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
        db_path: when building the app: the SQLite file (default ``./.lovia/lovia.db``).
        store: when building the app: a ready :class:`ChatStore` instead of ``db_path``.
        token: when building the app: the API token (generated for a non-loopback ``host``).
        title: when building the app: the page title.
        max_turns: when building the app: the per-run turn limit.
        followups: when building the app: follow-up suggestions with the built-in suggester.
        **uvicorn_kwargs: passed to ``uvicorn.Config`` (``ssl_certfile``, ``timeout_keep_alive``...).

    Raises:
        UserError: build options given with a ready app, more than one worker, or an unguarded
            ``create_app`` app on a non-loopback ``host``.
    """
    require_web()
    from fastapi import FastAPI

    from .app import create_app

    say = echo or (lambda line: print(line, file=sys.stdout, flush=True))
    root_path = normalize_root_path(root_path)
    if uvicorn_kwargs.pop("workers", 1) not in (1, None):
        raise UserError("serve() runs one worker", hint="live runs are process-local: drop workers=")
    if isinstance(target, FastAPI):
        app = target
        given = {"db_path": db_path, "store": store, "token": token}
        extra = [name for name, value in given.items() if value is not None]
        if extra or title != "lovia" or max_turns != 50 or followups:
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
            target, store=store, db_path=db_path, token=token, title=title, max_turns=max_turns, followups=followups
        )
    policy = getattr(app.state, "host_policy", None)
    if policy is not None:
        policy.bind_to(host, allowed_hosts)
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    link = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    state = getattr(app.state, "lovia", None)
    if state is not None and state.demo:
        say("lovia web: no model configured (set LOVIA_MODEL); the page offers the offline demo model")
    if root_path:
        say(f"lovia web: serving for a proxy at {root_path}/ (it strips the prefix); this server answers at {link}")
    else:
        say(f"lovia web: open {link}")
    _log_run_failures()
    import uvicorn

    options: dict[str, Any] = {"timeout_graceful_shutdown": 15, **uvicorn_kwargs}
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1, root_path=root_path, **options)
    _server_class()(config).run()
