"""A small reverse proxy for the path-prefix tests: ``/<prefix>/...`` is forwarded to a backend as ``/...``.

It does what ``location /lovia/ { proxy_pass http://127.0.0.1:8000/; proxy_set_header Host $host; }``
does in nginx: strips the prefix, keeps the client's ``Host`` and ``Origin``, and streams the
answer back as it arrives (so SSE works through it). Anything outside the prefix is 404.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from .helpers import ThreadServer

_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"content-length"}


class StripPrefixProxy:
    """The ASGI app of the proxy (served by uvicorn in :func:`proxy_server`)."""

    def __init__(self, prefix: str, backend: str) -> None:
        self.prefix = prefix.rstrip("/")
        self.backend = backend.rstrip("/")
        self.paths: list[str] = []
        """Every path the proxy forwarded, as the backend saw it."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path: str = scope["path"]
        if not path.startswith(self.prefix + "/"):
            await _answer(send, 404, b"outside the proxied prefix")
            return
        inner = path[len(self.prefix) :]
        query = scope.get("query_string", b"").decode("latin-1")
        self.paths.append(inner)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        client = httpx.AsyncClient(timeout=httpx.Timeout(30, read=None))
        try:
            request = client.build_request(
                scope["method"], self.backend + inner + (f"?{query}" if query else ""), headers=headers, content=body
            )
            response = await client.send(request, stream=True)
            try:
                out = [(k.encode(), v.encode()) for k, v in response.headers.items() if k.encode().lower() not in _HOP]
                await send({"type": "http.response.start", "status": response.status_code, "headers": out})
                relay = asyncio.ensure_future(_relay(response, send))
                gone = asyncio.ensure_future(_disconnected(receive))
                await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
                for task in (relay, gone):  # a client that left ends the backend request too
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                    await relay
            finally:
                await response.aclose()
        finally:
            await client.aclose()


async def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    async for chunk in response.aiter_raw():
        if chunk:
            yield chunk


async def _relay(response: httpx.Response, send: Any) -> None:
    async for chunk in _chunks(response):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def proxy_server(prefix: str, backend: str) -> tuple[ThreadServer, StripPrefixProxy]:
    """A started-on-enter server running the proxy, and the proxy itself (for its ``paths``)."""
    proxy = StripPrefixProxy(prefix, backend)
    return ThreadServer(proxy), proxy
