"""``serve``: run the web app under uvicorn (single worker), with a graceful shutdown that keeps checkpoints."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agent import Agent
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
    agents: Agent[Any] | Mapping[str, Agent[Any]] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    db_path: str | None = None,
    store: ChatStore | None = None,
    token: str | None = None,
    title: str = "lovia",
    max_turns: int = 50,
    log_level: str = "info",
    echo: Callable[[str], None] | None = None,
    allowed_hosts: Sequence[str] = (),
    root_path: str = "",
    followups: bool = False,
    config_runtime: Any = None,
) -> None:
    """Serve the chat app until interrupted (Ctrl+C / SIGTERM: live runs keep their checkpoints).

    Args:
        agents: an ``Agent`` or ``{name: agent}``; ``None`` uses ``LOVIA_MODEL`` or the offline demo.
        host: bind address; anything but loopback requires a token.
        port: TCP port.
        db_path: the SQLite file (default ``./.lovia/lovia.db``).
        store: a ready :class:`ChatStore` instead of ``db_path``.
        token: the API token; generated and printed for a non-loopback ``host`` when omitted.
        title: page title.
        max_turns: per-run turn limit.
        log_level: uvicorn log level.
        echo: where to print the startup lines (default: stdout).
        allowed_hosts: more ``Host`` names to answer (``--allowed-host``); loopback names and
            ``host`` itself always work, any other name is refused (DNS-rebinding defence).
        root_path: the path prefix a reverse proxy serves the app under (``"/lovia"``) and strips
            before forwarding; the page's asset and API URLs then carry it. The server itself
            still answers at its root.
        followups: serve follow-up suggestions with the built-in suggester (a model call each).
        config_runtime: the CLI's :class:`~lovia.web.config.ConfigRuntime` (``create_app``'s keyword).
    """
    require_web()
    from .app import create_app

    say = echo or (lambda line: print(line, file=sys.stdout, flush=True))
    root_path = normalize_root_path(root_path)
    if token is None and not is_loopback(host):
        token = generate_token()
        say(f"lovia web: {host} is not a loopback address, so API calls need this token: {token}")
    app = create_app(
        agents,
        store=store,
        db_path=db_path,
        token=token,
        title=title,
        max_turns=max_turns,
        followups=followups,
        config_runtime=config_runtime,
    )
    app.state.host_policy.bind_to(host, allowed_hosts)
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    link = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    state = app.state.lovia
    if state.demo:
        where = "open Settings → Models in the page" if config_runtime is not None else "set LOVIA_MODEL"
        say(f"lovia web: no model configured ({where}); the page offers the offline demo model")
    if root_path:
        say(f"lovia web: serving for a proxy at {root_path}/ (it strips the prefix); this server answers at {link}")
    else:
        say(f"lovia web: open {link}")
    _log_run_failures()
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        workers=1,
        timeout_graceful_shutdown=15,
        root_path=root_path,
    )
    _server_class()(config).run()
