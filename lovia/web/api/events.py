"""The process-wide notification stream over HTTP: ``GET /api/events``.

One SSE stream per open page, separate from any chat's run stream. It opens with a ``hello``
frame naming the chats that have a run in flight (``{"live": [session_id, ...]}``), then carries
the run supervisor's notifications as they happen (``session_created``, ``run_started``,
``run_finished``, ``schedule_fired`` and the others the page lists in its sidebar), with
keep-alive comments while nothing happens. The stream ends when the run supervisor shuts down.

uvicorn waits for open streams to close before it runs the app's lifespan shutdown, so a host
app served by :func:`lovia.web.serve` (or its server class) sets ``app.state.lovia = deps``:
the server then shuts the supervisor down, ending these streams, before it waits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from ..errors import ApiRoute
from ..sse import event_stream, frame
from .deps import RouterDeps

__all__ = ["build_events_router"]


def build_events_router(deps: RouterDeps) -> APIRouter:
    """``GET /api/events`` bound to ``deps``: the notification stream of its run supervisor."""
    router = APIRouter(prefix="/api", route_class=ApiRoute)

    @router.get("/events")
    async def events() -> StreamingResponse:
        supervisor = deps.supervisor
        subscription = deps.bus.subscribe()

        async def frames() -> AsyncIterator[dict[str, str]]:
            try:
                yield frame("hello", {"live": [run.session_id for run in supervisor.live_runs]})
                async for item in subscription.frames():
                    yield item
            finally:
                subscription.close()

        return event_stream(frames())

    return router
