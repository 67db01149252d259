"""The one error body of the HTTP API, and the route class that guarantees it.

Every error an API route answers with has the body ``{"detail": {"code", "message", "hint"}}``:
``code`` is a stable machine-readable name (branch on it, never on ``message``), ``message`` says
what went wrong in a sentence, and ``hint`` (a string or ``null``) suggests a fix. Request
validation is the one exception, as in FastAPI: 422 with ``detail`` a list of
``{loc, msg, type}`` items, one per bad field.

:class:`ApiRoute` is the ``route_class`` of every router in :func:`lovia.web.api.build_api_router`,
so an app that mounts only the router gets the same bodies as :func:`~lovia.web.app.create_app`:
a :class:`~lovia.exceptions.UserError` escaping a route becomes 400 ``invalid_request`` with its
hint, any other exception 500 ``internal`` (logged with its traceback; the client gets none).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..exceptions import LoviaError, UserError
from .run_errors import RunErrorCode, run_error_code

__all__ = [
    "ApiRoute",
    "ErrorCode",
    "RunErrorCode",
    "WebError",
    "error_body",
    "internal_error_response",
    "lovia_error_response",
    "run_error_code",
    "validation_detail",
    "validation_response",
]

logger = logging.getLogger("lovia.web")

ErrorCode = Literal[
    "invalid_request",
    "server_token",
    "cross_origin",
    "host_not_allowed",
    "path_denied",
    "agent_not_found",
    "session_not_found",
    "schedule_not_found",
    "image_not_found",
    "file_not_found",
    "ui_data_not_found",
    "model_not_found",
    "model_exists",
    "model_in_use",
    "local_origin_required",
    "process_not_found",
    "turn_not_found",
    "approval_not_found",
    "question_not_found",
    "run_not_found",
    "not_found",
    "method_not_allowed",
    "feature_unavailable",
    "run_active",
    "run_stopping",
    "run_unfinished",
    "nothing_to_fork",
    "schedule_not_fired",
    "payload_too_large",
    "file_too_large",
    "unsupported_file_type",
    "shutting_down",
    "run_failed",
    "run_cancelled",
    "too_many_runs",
    "internal",
]
"""Every ``code`` the API answers with (the table in ``docs/web.md`` says when)."""


def error_body(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    """The JSON body of an API error: ``{"detail": {"code", "message", "hint"}}``."""
    return {"detail": {"code": code, "message": message, "hint": hint}}


class WebError(HTTPException):
    """An API error with the documented body; raise it from a route like any ``HTTPException``.

    Args:
        status_code: the HTTP status.
        code: the stable error code (:data:`ErrorCode`).
        message: one sentence saying what went wrong.
        hint: how to fix it, when there is something to suggest.
        headers: extra response headers (``WWW-Authenticate``, ``Retry-After``).
    """

    def __init__(
        self,
        status_code: int,
        code: ErrorCode,
        message: str,
        *,
        hint: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, detail=error_body(code, message, hint)["detail"], headers=dict(headers or {}))
        self.code = code
        self.message = message
        self.hint = hint

    @classmethod
    def from_exc(cls, status_code: int, code: ErrorCode, exc: BaseException) -> WebError:
        """A ``WebError`` carrying an exception's message and, for a lovia error, its hint."""
        if isinstance(exc, LoviaError):
            return cls(status_code, code, exc.message, hint=exc.hint)
        return cls(status_code, code, str(exc) or type(exc).__name__)


def validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    """FastAPI's 422 ``detail`` list, without echoing the rejected input back."""
    return [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", "invalid"), "type": e.get("type")} for e in exc.errors()
    ]


def _too_deep_response() -> JSONResponse:
    """The 422 answer to a JSON body nested deeper than the parser goes (a request validation error)."""
    msg = "the JSON body is nested too deeply to read"
    return JSONResponse({"detail": [{"loc": ["body"], "msg": msg, "type": "json_invalid"}]}, status_code=422)


def validation_response(exc: RequestValidationError) -> JSONResponse:
    """The 422 answer to a request that failed validation."""
    return JSONResponse({"detail": validation_detail(exc)}, status_code=422)


def internal_error_response(exc: BaseException, request: Request | None = None) -> JSONResponse:
    """500 ``internal`` for an unexpected exception: logged with its traceback, which the client never sees.

    The message carries an error id that the log line repeats, so a report can be matched to it.
    """
    error_id = uuid.uuid4().hex[:12]
    where = f" on {request.method} {request.url.path}" if request is not None else ""
    logger.error("unexpected error %s%s", error_id, where, exc_info=(type(exc), exc, exc.__traceback__))
    return JSONResponse(
        error_body(
            "internal",
            f"internal server error (error id {error_id})",
            "this is a bug or an outage on the server; its log has the details under that error id",
        ),
        status_code=500,
    )


def lovia_error_response(exc: LoviaError, request: Request | None = None) -> JSONResponse:
    """A lovia error that escaped a route: 400 ``invalid_request`` for a ``UserError``, else 500 ``internal``.

    Lovia errors are written for users, so their message and hint are sent as they are.
    """
    if isinstance(exc, UserError):
        return JSONResponse(error_body("invalid_request", exc.message, exc.hint), status_code=400)
    logger.error("%s: %s", type(exc).__name__, exc.message, exc_info=(type(exc), exc, exc.__traceback__))
    return JSONResponse(error_body("internal", exc.message, exc.hint), status_code=500)


class ApiRoute(APIRoute):
    """A route whose failures all answer with the documented error body (see the module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """Wrap FastAPI's handler: validation errors, lovia errors and crashes become API errors."""
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except StarletteHTTPException as exc:
                if isinstance(exc.__cause__, RecursionError):  # FastAPI's "error parsing the body"
                    return _too_deep_response()
                raise  # already an API error (or an auth dependency's own)
            except ClientDisconnect:
                raise  # a client that left
            except RequestValidationError as exc:
                return validation_response(exc)
            except LoviaError as exc:
                return lovia_error_response(exc, request)
            except Exception as exc:
                return internal_error_response(exc, request)

        return handle
