"""A chat's background processes, for the page: what runs, its recent output, and a Kill button.

* ``GET /api/sessions/{id}/processes``: ``[{process_id, command, status, exit_code}]`` (``[]`` for an
  unknown chat or one without a live workspace).
* ``GET /api/sessions/{id}/processes/{pid}/output``: the last 64 KiB of output and the status.
* ``POST /api/sessions/{id}/processes/{pid}/kill``: kill the process's whole group.

The processes are the ones the chat's agent started with ``shell(background=true)`` in the
workspace session ``lovia web`` keeps per chat. None of these routes consume anything: the
output is a tail kept beside what the model has not read yet, and a kill from here leaves the
final output (and the news of the kill) to the model's next ``read_process_output``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from ..workspace.protocol import WorkspaceSession
from ..workspace.types import ProcessStatus
from .errors import ApiRoute, WebError

if TYPE_CHECKING:
    from .state import WebState

__all__ = ["processes_router"]


def _status(p: ProcessStatus) -> dict[str, Any]:
    return {"process_id": p.process_id, "command": p.command, "status": p.status, "exit_code": p.exit_code}


def processes_router(state: WebState) -> APIRouter:
    """``/api/sessions/{id}/processes`` and its ``output`` and ``kill`` routes."""
    router = APIRouter(prefix="/api/sessions", route_class=ApiRoute)

    async def live(session_id: str) -> WorkspaceSession | None:
        if await state.store.get(session_id) is None:
            raise WebError(
                404, "session_not_found", f"no chat {session_id!r}", hint="list the chats with GET /api/sessions"
            )
        session = state.workspaces.get(session_id)
        return None if session is None or getattr(session, "closed", False) else session

    async def find(session_id: str, process_id: str) -> WorkspaceSession:
        session = await live(session_id)
        known = session.background_processes() if session is not None else []
        if session is not None and any(p.process_id == process_id for p in known):
            return session
        ids = ", ".join(p.process_id for p in known) or "none"
        raise WebError(
            404,
            "process_not_found",
            f"chat {session_id!r} has no background process {process_id!r} (known: {ids})",
            hint="list them with GET /api/sessions/{id}/processes; they do not survive a server restart",
        )

    def unsupported(what: str) -> WebError:
        return WebError(
            501,
            "feature_unavailable",
            f"this chat's workspace session cannot {what} without taking output from the agent",
            hint="use a LocalWorkspace, whose sessions keep a separate tail for viewers",
        )

    @router.get("/{session_id}/processes")
    async def processes(session_id: str) -> list[dict[str, Any]]:
        session = state.workspaces.get(session_id)
        if session is None or getattr(session, "closed", False):
            return []  # an unknown chat, or one whose workspace is not live, runs nothing
        return [_status(p) for p in session.background_processes()]

    @router.get("/{session_id}/processes/{process_id}/output")
    async def output(session_id: str, process_id: str) -> dict[str, Any]:
        session = await find(session_id, process_id)
        peek = getattr(session, "peek_process_output", None)
        if peek is None:
            raise unsupported("show output")
        out = await peek(process_id)
        return {
            "process_id": out.process_id,
            "status": out.status,
            "exit_code": out.exit_code,
            "output": out.output,
            "truncated": out.truncated,
        }

    @router.post("/{session_id}/processes/{process_id}/kill")
    async def kill(session_id: str, process_id: str) -> dict[str, Any]:
        session = await find(session_id, process_id)
        stop = getattr(session, "stop_process", None)
        if stop is None:
            raise unsupported("kill a process")
        status: ProcessStatus = await stop(process_id)
        return _status(status)

    return router
