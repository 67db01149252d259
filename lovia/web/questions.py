"""``QuestionRegistry``: the web app's side of an ``ask_human`` channel.

One consumer task reads the channel's questions, keeps the latest one per chat, tells the page
(through ``on_question``, the supervisor's broadcast) and cancels a question nobody answers
within ``timeout`` seconds, so a forgotten prompt never holds a run slot forever.

A question lives inside its tool call: when the server stops, the call is interrupted with the
run and stays unanswered in the run's checkpoint; the resumed run re-executes it, which asks the
same question again. That is how a pending question survives a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ..tools.human import HumanChannel, HumanQuestion

__all__ = ["QuestionRegistry", "broadcast_question", "question_payload"]


def question_payload(question: HumanQuestion) -> dict[str, Any]:
    """The JSON form of a question (the ``question`` frame and ``GET /api/chat/question``)."""
    return {
        "id": question.id,
        "question": question.question,
        "options": [o.model_dump() for o in question.options],
        "multi_select": question.multi_select,
        "session_id": question.session_id,
        "run_id": question.run_id,
    }


class QuestionRegistry:
    """Pending ``ask_human`` questions by chat.

    Args:
        channel: the channel the agents' ``ask_human`` tool asks through (owned by the caller:
            the registry never closes it).
        timeout: seconds a question may wait before it is cancelled with a tool error
            (``None``: no limit).
        on_question: called with each new question (the app broadcasts it to the chat's stream).
    """

    def __init__(
        self,
        channel: HumanChannel,
        *,
        timeout: float | None = None,
        on_question: Callable[[HumanQuestion], None] | None = None,
    ) -> None:
        self.channel = channel
        self.timeout = timeout
        self.on_question = on_question
        self._by_session: dict[str, str] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start consuming the channel (call once, on the running event loop)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._consume())

    async def aclose(self) -> None:
        """Stop consuming and drop the timers (pending questions stay with their tool calls)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _consume(self) -> None:
        async for question in self.channel.questions():
            if question.session_id is not None:
                self._by_session[question.session_id] = question.id
            if self.timeout is not None:
                reason = f"no answer within {self.timeout:g} seconds"
                loop = asyncio.get_running_loop()
                self._timers[question.id] = loop.call_later(self.timeout, self.channel.cancel, question.id, reason)
            if self.on_question is not None:
                self.on_question(question)

    def pending(self, session_id: str) -> HumanQuestion | None:
        """The chat's unanswered question, if any."""
        qid = self._by_session.get(session_id)
        if qid is None:
            return None
        found = next((q for q in self.channel.pending if q.id == qid), None)
        if found is None:
            self._forget(session_id, qid)
        return found

    def resolve(self, session_id: str, answer: str) -> bool:
        """Answer the chat's pending question; ``False`` when it has none."""
        question = self.pending(session_id)
        if question is None:
            return False
        try:
            self.channel.answer(question.id, answer)
        except KeyError:
            return False
        finally:
            self._forget(session_id, question.id)
        return True

    def cancel_session(self, session_id: str, reason: str = "run cancelled") -> None:
        """Fail the chat's pending question (the model sees a tool error)."""
        question = self.pending(session_id)
        if question is not None:
            self.channel.cancel(question.id, reason)
            self._forget(session_id, question.id)

    def _forget(self, session_id: str, question_id: str) -> None:
        if self._by_session.get(session_id) == question_id:
            del self._by_session[session_id]
        timer = self._timers.pop(question_id, None)
        if timer is not None:
            timer.cancel()


def broadcast_question(supervisor: Any, question: HumanQuestion) -> None:
    """Send a ``question`` frame to the asking chat's live stream (kept for late subscribers)."""
    from .sse import frame

    live = supervisor.get(question.session_id) if question.session_id else None
    if live is not None:
        live.broadcast(frame("question", question_payload(question)))
