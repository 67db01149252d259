"""Validated numeric query parameters shared by the API routes, and the 422 answer for bad ones.

Every numeric query parameter has bounds: a value outside them (``limit=-1``, ``offset=-5``,
``since=nan``) is refused with 422 and a message naming the parameter, never clamped or
passed to a store.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

__all__ = ["MAX_PAGE", "Limit", "Offset", "Since", "validation_response"]

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
