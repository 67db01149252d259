"""Who may talk to the server: the bearer token, and the Host / Origin checks.

Loopback binds need no token, any other bind requires one. Independently of the token, every
request must name a ``Host`` the server answers for and a state change must be same-origin
(:class:`HostOriginGuard`): without that, a web page whose domain resolves to 127.0.0.1 (DNS
rebinding) could use the token-less loopback server from the user's own browser.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = [
    "TOKEN_COOKIE",
    "HostOriginGuard",
    "HostPolicy",
    "generate_token",
    "is_loopback",
    "normalize_origin",
    "same_origin",
    "set_token_cookie",
    "split_host",
    "token_dependency",
    "token_matches",
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def generate_token() -> str:
    """A fresh random token (URL-safe)."""
    return secrets.token_urlsafe(24)


def token_matches(expected: str, authorization: str | None) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <expected>`` (constant-time compare)."""
    if not authorization:
        return False
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), expected.encode())


TOKEN_COOKIE = "lovia_token"
"""The cookie that carries the server token for the bundled page (``HttpOnly``, ``SameSite=Strict``).

The page gets it when it is opened as ``/?token=<token>``; requests the page cannot give an
``Authorization`` header (``EventSource``, ``<img>``, download links) authenticate with it."""


def cookie_matches(expected: str, cookie: str | None) -> bool:
    """Whether a :data:`TOKEN_COOKIE` value equals ``expected`` (constant-time compare)."""
    if not cookie:
        return False
    return hmac.compare_digest(cookie.strip().encode(), expected.encode())


def _cookie_may_change_state(request: Any) -> bool:
    """A cookie rides along with cross-site requests a page forges; the header never does.

    So a state change authenticated by the cookie alone must come from no browser page (no
    ``Origin``) or from this server's own page, even when no :class:`HostOriginGuard` is installed.
    """
    if str(request.method).upper() in _SAFE_METHODS:
        return True
    origin = request.headers.get("origin")
    return origin is None or same_origin(origin, request.headers.get("host"))


def set_token_cookie(request: Any, response: Any, token: str | None) -> None:
    """Give the page the token cookie when it was opened as ``?token=<token>`` with the right token.

    The cookie is ``HttpOnly`` (page scripts cannot read it), ``SameSite=Strict`` and scoped to the
    app's path prefix (two instances under one host keep separate tokens); ``Secure`` over HTTPS.
    A wrong token sets nothing.
    """
    if token is None:
        return
    given = request.query_params.get("token")
    if not given or not cookie_matches(token, given):
        return
    root = str(request.scope.get("root_path", "")).rstrip("/")
    response.set_cookie(
        TOKEN_COOKIE,
        token,
        path=root + "/",
        httponly=True,
        samesite="Strict",
        secure=request.url.scheme == "https",
    )


AUTHENTICATED = "lovia_authenticated"
"""The request-state flag a passed token or ``auth=`` check sets (routes that ask for more than
loopback access without one, such as config writes, read it)."""


def mark_authenticated(request: Any) -> None:
    """Record on the request that the server's token or ``auth=`` dependency let it in."""
    setattr(request.state, AUTHENTICATED, True)


def is_authenticated(request: Any) -> bool:
    """Whether a token or ``auth=`` check passed for this request (a header alone is not enough)."""
    return bool(getattr(request.state, AUTHENTICATED, False))


def token_dependency(token: str) -> Callable[[Any], Awaitable[None]]:
    """A FastAPI dependency requiring the server token; otherwise 401 ``server_token``.

    The token comes as ``Authorization: Bearer <token>`` or in the :data:`TOKEN_COOKIE` cookie.
    A state change (POST, PUT, PATCH, DELETE) carried by the cookie alone is accepted only from no
    page at all (no ``Origin``) or from the server's own origin: other sites' pages cannot use it.

    ``create_app(token=...)`` guards its API with it; an app mounting
    :func:`lovia.web.api.build_api_router` adds it itself:
    ``app.include_router(router, dependencies=[Depends(token_dependency(token))])``.
    """
    from starlette.requests import Request

    from .errors import WebError

    async def require_token(request: Request) -> None:
        by_header = token_matches(token, request.headers.get("authorization"))
        by_cookie = not by_header and cookie_matches(token, request.cookies.get(TOKEN_COOKIE))
        if by_cookie and not _cookie_may_change_state(request):
            raise WebError(
                403,
                "cross_origin",
                "a cross-origin state change with the token cookie is refused",
                hint="send 'Authorization: Bearer <token>', or call the API from the server's own page",
            )
        if not (by_header or by_cookie):
            raise WebError(
                401,
                "server_token",
                "missing or wrong server token",
                hint="send 'Authorization: Bearer <token>' with the token the server printed at startup,"
                " or open the page as /?token=<token> once",
                headers={"WWW-Authenticate": "Bearer"},
            )
        mark_authenticated(request)

    # This module is imported without FastAPI too, so ``Request`` is a local name, and FastAPI
    # resolves a string annotation in the module's globals: hand it the class itself.
    require_token.__annotations__["request"] = Request
    return require_token


# --------------------------------------------------------------------------- Host and Origin checks

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def split_host(value: str) -> tuple[str, str | None]:
    """``(name, port)`` of a ``Host`` header or URL authority: the name lowercased, IPv6 unbracketed,
    a trailing dot (``localhost.``, the same name written as fully qualified) dropped."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else None
    if value.count(":") == 1:
        name, _, port = value.partition(":")
        return name.rstrip("."), port
    return value.rstrip(".") if value.count(":") == 0 else value, None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostPolicy:
    """Which ``Host`` names the server answers (a DNS-rebinding defence).

    Always allowed: ``localhost`` and loopback addresses. Bound to one address: that address.
    Bound to every interface (``0.0.0.0`` / ``::``): any IP address and this machine's host name
    (a rebinding page reaches the server under *its own* domain name, never as an IP literal).
    Names in ``allowed`` are accepted too; ``.example.com`` accepts every subdomain of
    ``example.com`` and ``*`` turns the check off (for a reverse proxy that checks itself).
    """

    def __init__(self, allowed: Sequence[str] = (), *, bind: str | None = None) -> None:
        self.allowed = frozenset(name.strip().lower().strip("[]") for name in allowed if name.strip())
        self.bind: str | None = None
        self.bind_to(bind)

    def bind_to(self, bind: str | None, extra: Sequence[str] = ()) -> None:
        """Record the bound address (``serve`` calls this) and more allowed names."""
        self.bind = None if bind is None else bind.strip().lower().strip("[]")
        self.allowed = self.allowed | {name.strip().lower().strip("[]") for name in extra if name.strip()}
        if self.bind in _WILDCARD_BINDS:
            self.allowed = self.allowed | {socket.gethostname().lower()}  # no DNS lookup at startup

    def allows(self, host_header: str | None) -> bool:
        """Whether a request carrying this ``Host`` header may be answered."""
        if "*" in self.allowed:
            return True
        if not host_header:
            return False
        name, _port = split_host(host_header)
        if not name:
            return False
        if name in LOOPBACK_NAMES or name in self.allowed or name == self.bind:
            return True
        ip = _ip(name)
        if ip is not None:
            if ip.is_loopback:
                return True
            if self.bind is None or self.bind in _WILDCARD_BINDS:
                return True
            bound = _ip(self.bind)
            return bound is not None and bound == ip
        return any(entry.startswith(".") and (name.endswith(entry) or name == entry[1:]) for entry in self.allowed)


def same_origin(origin: str, host_header: str | None) -> bool:
    """Whether an ``Origin`` header names the same host and port the request was sent to."""
    scheme, sep, authority = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not host_header:
        return False
    o_name, o_port = split_host(authority.rstrip("/"))
    h_name, h_port = split_host(host_header)
    default = "443" if scheme == "https" else "80"
    return o_name == h_name and (o_port or default) == (h_port or default)


def normalize_origin(origin: str) -> str:
    """An ``Origin`` as compared against an allowlist: trimmed, lowercased, no trailing slash."""
    return origin.strip().lower().rstrip("/")


def addressed_in_process(scope: Any, host_header: str | None) -> bool:
    """Whether the request names the server exactly as the ASGI server reported itself.

    A network server (uvicorn, hypercorn) puts the socket's own address in ``scope["server"]``:
    an IP literal, which a rebinding page never uses as its ``Host``. An in-process client
    (Starlette's ``TestClient``, httpx's ``ASGITransport``) puts the name from its base URL there
    and sends the same name as ``Host``, with no socket a browser could reach. So a ``Host`` equal
    to the server's own name is answered: it lets tests and embedding code call the app as
    ``TestClient(create_app(...))`` without opening the guard to any domain name.
    """
    server = scope.get("server")
    if not host_header or not server or not isinstance(server[0], str):
        return False
    name, _port = split_host(host_header)
    return bool(name) and name == server[0].strip().lower().strip("[]")


class HostOriginGuard:
    """ASGI middleware: refuse a foreign ``Host`` (421) and a cross-site state change (403).

    Every request must carry a ``Host`` the :class:`HostPolicy` allows, so a page whose domain
    was re-pointed at this machine (DNS rebinding) gets nothing. A state-changing request
    (anything but GET, HEAD, OPTIONS) must come with no ``Origin`` (not a browser) or a
    same-origin one, so another site cannot make the browser post to the API (CSRF).
    ``allowed_origins`` (``create_app(cors_origins=...)``) are let through as well, and so is any
    origin ``origin_allowed`` accepts (``create_app`` passes the origins the app's own
    ``CORSMiddleware`` allows).
    """

    def __init__(
        self,
        app: Any,
        *,
        policy: HostPolicy,
        allowed_origins: Sequence[str] = (),
        origin_allowed: Callable[[str], bool] | None = None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.allowed_origins = frozenset(normalize_origin(o) for o in allowed_origins)
        self.origin_allowed = origin_allowed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if not (self.policy.allows(host) or addressed_in_process(scope, host)):
            shown = (host or "").strip()[:100] or "(none)"
            await _refuse(
                scope,
                send,
                421,
                "host_not_allowed",
                f"this server does not answer for host {shown!r}",
                "open it through its own address (e.g. http://127.0.0.1), or start it with"
                f" --allowed-host {split_host(shown)[0] or 'NAME'}"
                " (create_app(allowed_hosts=[...])) when that name is really yours",
            )
            return
        origin = headers.get("origin")
        unsafe = scope["type"] == "websocket" or scope.get("method", "GET").upper() not in _SAFE_METHODS
        if (
            unsafe
            and origin is not None
            and not same_origin(origin, host)
            and normalize_origin(origin) not in self.allowed_origins
            and not (self.origin_allowed is not None and self.origin_allowed(origin))
        ):
            await _refuse(
                scope,
                send,
                403,
                "cross_origin",
                f"cross-origin request from {origin.strip()[:100]!r} refused",
                "state-changing API calls are accepted from this server's own page only (same origin)"
                " or from non-browser clients",
            )
            return
        await self.app(scope, receive, send)


async def _refuse(scope: Any, send: Any, status: int, code: str, message: str, hint: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"detail": {"code": code, "message": message, "hint": hint}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
