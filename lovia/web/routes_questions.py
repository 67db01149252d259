"""``ask_human`` in the page: read the chat's pending question, answer it (the run resumes)."""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from .questions import QuestionRegistry, question_payload

__all__ = ["AnswerRequest", "QuestionState", "api_error", "questions_router"]


class AnswerRequest(BaseModel):
    """Body of ``POST /api/chat/answer``: the answer to the chat's pending question."""

    session_id: str = Field(min_length=1, max_length=200)
    answer: str = Field(max_length=100_000)


def api_error(status: int, code: str, message: str, hint: str = "") -> HTTPException:
    """An ``HTTPException`` with the documented error body ``{"detail": {code, message, hint}}``."""
    return HTTPException(status, detail={"code": code, "message": message, "hint": hint})


class QuestionState(Protocol):
    """What the routes need from the app state (``WebState`` has it; no import of the app module)."""

    questions: QuestionRegistry | None


def _registry(state: QuestionState) -> QuestionRegistry:
    registry = state.questions
    if registry is None:
        raise api_error(
            501,
            "feature_unavailable",
            "this server has no question channel",
            "pass question_channel= to create_app (shared with the agent's ask_human tool)",
        )
    return registry


def questions_router(state: QuestionState) -> APIRouter:
    """``GET /api/chat/question`` and ``POST /api/chat/answer``."""
    router = APIRouter(prefix="/api/chat")

    @router.get("/question")
    async def question(session_id: str) -> dict[str, Any]:
        pending = _registry(state).pending(session_id)
        return {"question": question_payload(pending) if pending is not None else None}

    @router.post("/answer")
    async def answer(body: AnswerRequest) -> dict[str, Any]:
        if not _registry(state).resolve(body.session_id, body.answer):
            raise api_error(
                404,
                "question_not_found",
                "no pending question in this chat",
                "it was answered, timed out or its run ended; reload the chat",
            )
        return {"ok": True}

    return router
