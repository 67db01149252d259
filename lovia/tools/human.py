"""``ask_human``: the model asks the operator a question and waits for the answer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..exceptions import InvalidToolArguments, ToolError
from ._tool import Tool

__all__ = ["HumanChannel", "HumanQuestion", "QuestionOption", "ask_human"]


class QuestionOption(BaseModel):
    """A suggested answer: a single-line label (the answer text) and an optional explanation."""

    label: str = Field(
        min_length=1,
        pattern=r"^[^\r\n]+$",
        description="Short single-line display label — a few words. Choosing the option answers with this exact text.",
    )
    description: str = Field(
        default="",
        pattern=r"^[^\r\n]*$",
        description="Optional one-line explanation of the choice — its meaning or trade-off. Empty when the label "
        "alone is clear.",
    )


@dataclass
class HumanQuestion:
    """One question waiting for the operator."""

    id: str
    question: str
    options: list[QuestionOption] = field(default_factory=list)
    multi_select: bool = False
    session_id: str | None = None
    run_id: str | None = None


_END = object()


class HumanChannel:
    """Where ``ask_human`` questions go and answers come from (one consumer, on the event loop)."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[str]] = {}
        self._questions: dict[str, HumanQuestion] = {}
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._closed: str | None = None

    @property
    def pending(self) -> list[HumanQuestion]:
        """Unanswered questions, oldest first."""
        return list(self._questions.values())

    async def questions(self) -> AsyncIterator[HumanQuestion]:
        """Queued questions as they arrive; ends when the channel is closed.

        On a closed channel it ends at once, on the first and on every later iteration.
        """
        while self._closed is None:
            item = await self._queue.get()
            if item is _END:
                self._queue.put_nowait(_END)  # so any other iteration ends too
                return
            assert isinstance(item, HumanQuestion)
            if item.id in self._questions:
                yield item

    async def ask(self, question: HumanQuestion) -> str:
        """Queue ``question`` and wait for its answer (what the tool does)."""
        if self._closed is not None:
            raise ToolError(f"no operator is available: {self._closed}", hint="continue without the answer")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._futures[question.id] = future
        self._questions[question.id] = question
        self._queue.put_nowait(question)
        try:
            return await future
        finally:
            self._futures.pop(question.id, None)
            self._questions.pop(question.id, None)

    def answer(self, question_id: str, answer: str) -> None:
        """Resolve a question: the tool returns ``answer``.

        Raises:
            KeyError: No pending question has this id.
        """
        future = self._futures.get(question_id)
        if future is None or future.done():
            raise KeyError(f"no pending question {question_id!r}")
        future.set_result(str(answer))

    def cancel(self, question_id: str, reason: str = "cancelled") -> None:
        """Fail one question with a tool error the model sees."""
        future = self._futures.get(question_id)
        if future is not None and not future.done():
            future.set_exception(ToolError(f"the question was not answered: {reason}", hint="continue without it"))

    def close(self, reason: str = "channel closed") -> None:
        """Cancel every outstanding question, end iteration and refuse future asks."""
        if self._closed is not None:
            return
        self._closed = reason
        for qid in list(self._futures):
            self.cancel(qid, reason)
        self._queue.put_nowait(_END)


_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question for the user, self-contained."},
        "options": {
            "type": "array",
            "minItems": 2,
            "maxItems": 4,
            "description": "Optional 2-4 suggested answers for a pick-one (or pick-many) question.",
            "items": QuestionOption.model_json_schema(),
        },
        "multi_select": {"type": "boolean", "default": False, "description": "Allow picking several options."},
    },
    "required": ["question"],
}


def ask_human(channel: HumanChannel, *, name: str = "ask_human") -> Tool[Any]:
    """A tool that lets the model ask the operator for information only a person has."""

    async def invoke(args: dict[str, Any], ctx: Any) -> str:
        text = args.get("question")
        if not isinstance(text, str) or not text.strip():
            raise InvalidToolArguments("'question' must be a non-empty string", hint="ask one clear question")
        raw_options = args.get("options") or []
        try:
            options = [QuestionOption.model_validate(o) for o in raw_options]
        except ValidationError as exc:
            raise InvalidToolArguments(
                f"invalid options: {exc.errors()[0]['msg']}", hint="single-line labels"
            ) from None
        labels = [o.label for o in options]
        if len(set(labels)) != len(labels):
            raise InvalidToolArguments("option labels must be unique", hint="give each option its own label")
        if options and not 2 <= len(options) <= 4:
            raise InvalidToolArguments("give 2 to 4 options (or none)", hint="drop or merge options")
        question = HumanQuestion(
            id=f"q-{uuid.uuid4().hex[:10]}",
            question=text.strip(),
            options=options,
            # Several picks need options to pick from: without any it is a plain question.
            multi_select=bool(args.get("multi_select", False)) and bool(options),
            session_id=getattr(ctx, "session_id", None),
            run_id=getattr(ctx, "run_id", None),
        )
        return await channel.ask(question)

    return Tool(
        name=name,
        description=(
            "Ask the user a question and wait for the answer. Use it only for information only the user has; "
            "options are suggestions, any text is a valid answer (multi-select answers are joined by newlines)."
        ),
        parameters=_PARAMETERS,
        invoke=invoke,
        parallel=False,
    )
