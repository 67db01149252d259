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

__all__ = ["MAX_PAGE", "CleanJsonBodies", "Limit", "Offset", "Since", "validation_response"]

MAX_PAGE = 500

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"page size, 1 to {MAX_PAGE}")]
Offset = Annotated[int, Query(ge=0, le=2**62, description="rows to skip, 0 or more")]
Since = Annotated[
    float | None, Query(ge=0, allow_inf_nan=False, description="only what started at or after this epoch time")
]


def _where(loc: Any) -> str:
    parts = [str(p) for p in (loc or ())]
    if len(parts) >= 2 and parts[0] in ("query", "path", "header", "body"):
        kind = {"query": "query parameter", "path": "path parameter", "header": "header", "body": "body field"}[
            parts[0]
        ]
        return f"{kind} {'.'.join(parts[1:])!r}"
    return ".".join(parts) or "request"


def validation_response(exc: RequestValidationError) -> JSONResponse:
    """A 422 whose ``detail`` says in one sentence which parameter is wrong and why."""
    errors = exc.errors()
    problems = [f"{_where(e.get('loc'))}: {e.get('msg', 'invalid')}" for e in errors]
    return JSONResponse(
        {
            "detail": "; ".join(problems) or "invalid request",
            "hint": "fix the named parameter and send the request again",
            "type": "RequestValidationError",
            "errors": [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors],
        },
        status_code=422,
    )


class CleanJsonBodies:
    """ASGI middleware: the text policy (:mod:`lovia._text`) for JSON request bodies.

    ``JSON.stringify`` in a browser writes a lone surrogate as a ``\\udXXX`` escape; pydantic would
    refuse such a string with 422. A body that spells one is decoded, cleaned (lone surrogates
    become U+FFFD) and re-encoded before the route sees it, so a chat message behaves exactly like
    run input given in Python. Other bodies pass through untouched.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH") or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left while sending: let the app see it
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        cleaned = _clean_body(body)
        if cleaned is not body:
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*headers, (b"content-length", str(len(cleaned)).encode())]}
        await self.app(scope, _replay([{"type": "http.request", "body": cleaned, "more_body": False}], receive), send)


def _is_json(scope: Any) -> bool:
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-type":
            return bytes(value).lower().startswith(b"application/json")
    return False


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
