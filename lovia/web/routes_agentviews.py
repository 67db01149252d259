"""Routes of the agent's own views: ``ask_human`` questions (read, answer) and the chat's todo list."""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter

from ..plugins.todo import todos_from_entries
from .errors import ApiRoute, ErrorCode, WebError
from .questions import QuestionRegistry, question_payload
from .schemas import AnswerRequest
from .store import ChatStore
from .supervisor import RunSupervisor

__all__ = ["AgentViewsState", "AnswerRequest", "agentviews_router", "api_error"]


def api_error(status: int, code: ErrorCode, message: str, hint: str | None = None) -> WebError:
    """A :class:`~lovia.web.errors.WebError`: the documented error body ``{"detail": {code, message, hint}}``."""
    return WebError(status, code, message, hint=hint)


class AgentViewsState(Protocol):
    """What the routes need from the app state (``WebState`` has it; no import of the app module)."""

    store: ChatStore

    @property
    def supervisor(self) -> RunSupervisor: ...

    questions: QuestionRegistry | None


def _registry(state: AgentViewsState) -> QuestionRegistry:
    registry = state.questions
    if registry is None:
        raise api_error(
            501,
            "feature_unavailable",
            "this server has no question channel",
            "pass question_channel= to create_app (shared with the agent's ask_human tool)",
        )
    return registry


def agentviews_router(state: AgentViewsState) -> APIRouter:
    """``GET /api/chat/question``, ``POST /api/chat/answer`` and ``GET /api/sessions/{id}/todos``."""
    router = APIRouter(prefix="/api", route_class=ApiRoute)
    _question_routes(router, state)
    _todo_routes(router, state)
    return router


def _question_routes(router: APIRouter, state: AgentViewsState) -> None:
    @router.get("/chat/question")
    async def question(session_id: str) -> dict[str, Any]:
        pending = _registry(state).pending(session_id)
        return {"question": question_payload(pending) if pending is not None else None}

    @router.post("/chat/answer")
    async def answer(body: AnswerRequest) -> dict[str, Any]:
        if not _registry(state).resolve(body.session_id, body.answer):
            raise api_error(
                404,
                "question_not_found",
                "no pending question in this chat",
                "it was answered, timed out or its run ended; reload the chat",
            )
        return {"ok": True}


def _todo_routes(router: APIRouter, state: AgentViewsState) -> None:
    @router.get("/sessions/{session_id}/todos")
    async def todos(session_id: str) -> dict[str, Any]:
        meta = await state.store.get(session_id)
        if meta is None:
            raise api_error(404, "session_not_found", "session not found", "list the chats with GET /api/sessions")
        entries = await state.store.session.load(session_id)
        live = state.supervisor.live(session_id)
        if live is not None:  # the run in flight: its completed tool calls count too
            entries = [*entries, *live.entries]
        sup = state.supervisor
        agent = live.agent if live is not None else sup.agents.get(meta.agent or sup.default_agent)
        items = todos_from_entries(entries, tool_name=_todo_tool_name(agent))
        return {"todos": [item.model_dump() for item in items]}


def _todo_tool_name(agent: Any) -> str:
    """The Todo plugin's tool name on ``agent`` (``todo_write`` unless it was renamed)."""
    from ..plugins.todo import Todo

    for plugin in getattr(agent, "plugins", None) or []:
        if isinstance(plugin, Todo):
            return plugin.tool_name
    return "todo_write"
