"""Run deps: each served run's ``RunContext.deps``, built by ``create_app(run_deps=fn)``.

The page sends a *client context* with a message (``context`` in the body of ``POST /api/chat``,
``/api/chat/stream`` and ``/api/schedules``): a JSON object of UI state, at most
:data:`MAX_CLIENT_CONTEXT_BYTES` of JSON. Before a run starts, ``fn`` gets a :class:`RunTrigger`
(the chat, the agent, why the run starts, the request after ``auth=`` ran, and that context) and
its return value becomes the run's deps. Raising an ``HTTPException`` from ``fn`` refuses the run.

The browser controls the client context: never derive identity or permissions from it. Identity
belongs on ``trigger.request`` (its ``state``, set by your ``auth=`` dependency).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from starlette.requests import Request

    from ..agent import Agent

__all__ = [
    "MAX_CLIENT_CONTEXT_BYTES",
    "JsonValue",
    "RunDepsFn",
    "RunTrigger",
    "build_run_deps",
    "checked_context",
    "client_context_size",
]

logger = logging.getLogger("lovia.web")

MAX_CLIENT_CONTEXT_BYTES = 64 * 1024
"""The largest client context accepted, measured as compact UTF-8 JSON."""

JsonValue = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007
"""Any value JSON can carry."""


@dataclass(slots=True)
class RunTrigger:
    """Why a run is about to start, handed to the ``run_deps`` function.

    Attributes:
        session_id: the chat the run belongs to.
        agent: the agent about to run.
        source: ``user`` (a message, or a reconnect resuming a run) or ``schedule:<id>``.
        request: the request that started the run, after the ``auth=`` dependency ran (identity
            lives on ``request.state``); ``None`` when nobody requested it (a scheduled fire).
        client_context: the page's context (UI state; the browser controls it).
        resumed: a reconnect resumes the run from its checkpoint.
    """

    session_id: str
    agent: Agent[Any]
    source: str
    request: Request | None = None
    client_context: Mapping[str, JsonValue] = field(default_factory=dict)
    resumed: bool = False


RunDepsFn = Callable[[RunTrigger], Union[Any, Awaitable[Any]]]  # noqa: UP007
"""``(trigger) -> deps``, sync or async (``create_app(run_deps=fn)``)."""


def client_context_size(value: Mapping[str, JsonValue]) -> int:
    """How many bytes ``value`` takes as compact UTF-8 JSON (what :data:`MAX_CLIENT_CONTEXT_BYTES` caps)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def checked_context(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """A request's client context as a dict; over the limit, 422 ``invalid_request`` (a ``WebError``)."""
    if not value:
        return {}
    size = client_context_size(value)
    if size > MAX_CLIENT_CONTEXT_BYTES:
        from .errors import WebError  # FastAPI's side: loaded only when a request is refused

        raise WebError(
            422,
            "invalid_request",
            f"the client context is {size} bytes of JSON, over the {MAX_CLIENT_CONTEXT_BYTES}-byte limit",
            hint="send identifiers in the context, not documents (the server can look them up)",
        )
    return dict(value)


async def build_run_deps(fn: RunDepsFn | None, trigger: RunTrigger) -> Any:
    """The run's deps: ``fn(trigger)``, awaited when it returns an awaitable; ``None`` without ``fn``.

    Without ``fn`` a trigger carrying a client context logs a warning (nothing reads it). What
    ``fn`` raises propagates: the caller refuses the run.
    """
    if fn is None:
        if trigger.client_context:
            logger.warning(
                "chat %s sent a client context, but the app has no run_deps to read it (ignored)", trigger.session_id
            )
        return None
    value = fn(trigger)
    if inspect.isawaitable(value):
        value = await value
    return value
