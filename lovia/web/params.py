"""Request input: validated numeric query parameters, the 422 answer for bad ones, and the text
policy for JSON bodies (:class:`CleanJsonBodies`).

Every numeric query parameter has bounds: a value outside them (``limit=-1``, ``offset=-5``,
``since=nan``) is refused with 422 and a message naming the parameter, never clamped or
passed to a store.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from .._text import clean_value

__all__ = ["MAX_JSON_BODY", "MAX_PAGE", "CleanJsonBodies", "Limit", "Offset", "Since", "validation_response"]

MAX_PAGE = 500

MAX_JSON_BODY = 4 << 20
"""The largest JSON request body (4 MiB): far above the longest chat message, even fully escaped."""

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"page size, 1 to {MAX_PAGE}")]
Offset = Annotated[int, Query(ge=0, le=2**62, description="rows to skip, 0 or more")]
Since = Annotated[
    float | None, Query(ge=0, allow_inf_nan=False, description="only what started at or after this epoch time")
]


def validation_response(exc: RequestValidationError) -> JSONResponse:
    """The 422 answer: ``{"detail": [{loc, msg, type}, ...]}`` (see :mod:`lovia.web.errors`)."""
    from .errors import validation_response as respond

    return respond(exc)


class CleanJsonBodies:
    """ASGI middleware: the size limit and the text policy (:mod:`lovia._text`) for JSON request bodies.

    A JSON body over :data:`MAX_JSON_BODY` is refused with 413 ``payload_too_large``, from its
    ``Content-Length`` before a byte is read, else as soon as the bytes read pass the limit.

    ``JSON.stringify`` in a browser writes a lone surrogate as an escape such as ``\\udc80``; pydantic would
    refuse such a string with 422. A body that spells one is decoded, cleaned (lone surrogates
    become U+FFFD) and re-encoded before the route sees it, so a chat message behaves exactly like
    run input given in Python. Other bodies pass through untouched.
    """

    def __init__(self, app: Any, *, max_bytes: int = MAX_JSON_BODY) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH") or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left while sending: let the app see it
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        cleaned = _clean_body(body)
        if cleaned is not body:
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*headers, (b"content-length", str(len(cleaned)).encode())]}
        await self.app(scope, _replay([{"type": "http.request", "body": cleaned, "more_body": False}], receive), send)

    async def _too_large(self, send: Any) -> None:
        body = json.dumps(
            {
                "detail": {
                    "code": "payload_too_large",
                    "message": f"the request body is over the {self.max_bytes >> 20} MiB limit for JSON",
                    "hint": "send less at once; files go to POST /api/sessions/{id}/uploads",
                }
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


def _is_json(scope: Any) -> bool:
    value = _header(scope, b"content-type")
    return value is not None and value.lower().startswith("application/json")


def _clean_body(body: bytes) -> bytes:
    if b"\\ud" not in body and b"\\uD" not in body:
        return body
    try:
        value = json.loads(body)
    except ValueError:
        return body  # not JSON: the route's own validation answers
    cleaned = clean_value(value)
    return body if cleaned is value else json.dumps(cleaned, ensure_ascii=False).encode("utf-8")


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    pending = list(messages)

    async def replay() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
