"""``ScriptedProvider``: an in-memory provider that replays canned assistant turns.

It is a real provider (no network, no tokens): tests drive the loop with it, ``lovia.testing``
re-exports it, and the web app's offline demo model is one.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import AssistantTurn, Message, ToolCall, Usage
from ..transcript import (
    FinishDelta,
    ModelDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    TranscriptEntry,
    UsageDelta,
    entries_to_messages,
)
from .base import ModelSettings, ToolDefinition

__all__ = ["ScriptedProvider", "ScriptedReply", "ScriptedRequest", "ScriptedTurn", "batch", "call", "fail", "text"]


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One canned model response: deltas to stream, then optionally an error to raise."""

    deltas: tuple[ModelDelta, ...]
    error: BaseException | None = None
    delay: float = 0.0
    """Seconds to sleep before each delta (to make timing visible in tests)."""

    @property
    def content(self) -> str | None:
        """The answer text this turn streams (``None`` when it streams none)."""
        parts = [d.text for d in self.deltas if isinstance(d, TextDelta)]
        return "".join(parts) if parts else None

    @property
    def reasoning(self) -> str | None:
        """The reasoning text streamed before the answer, if any."""
        parts = [d.text for d in self.deltas if isinstance(d, ReasoningDelta)]
        return "".join(parts) if parts else None

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls this turn requests, in order."""
        ids: dict[int, str] = {}
        names: dict[int, str] = {}
        args: dict[int, list[str]] = {}
        for d in self.deltas:
            if isinstance(d, ToolCallDelta):
                if d.call_id:
                    ids[d.index] = d.call_id
                if d.name:
                    names[d.index] = d.name
                if d.arguments:
                    args.setdefault(d.index, []).append(d.arguments)
        return [ToolCall(id=ids.get(i, ""), name=names.get(i, ""), arguments="".join(args.get(i, []))) for i in names]

    @property
    def usage(self) -> Usage:
        """The token usage this turn reports."""
        total = Usage()
        for d in self.deltas:
            if isinstance(d, UsageDelta):
                total.add(d.usage)
        return total

    @property
    def finish_reason(self) -> str | None:
        """Why the turn stops (``stop``, ``tool_calls``...)."""
        return next((d.reason for d in self.deltas if isinstance(d, FinishDelta)), None)


@dataclass(slots=True)
class ScriptedRequest:
    """What the provider received for one call."""

    entries: list[TranscriptEntry]
    tools: list[ToolDefinition] = field(default_factory=list)
    response_format: dict[str, Any] | None = None
    settings: ModelSettings | None = None


@dataclass(slots=True)
class ScriptedReply(AssistantTurn):
    """An :class:`~lovia.messages.AssistantTurn` made by :func:`text`, :func:`call` or :func:`batch`.

    Its fields (``content``, ``tool_calls``, ``usage``, ``finish_reason``) may be changed before
    the turn is played. On top of a plain turn it carries the ``reasoning`` streamed before the
    answer, a per-delta ``delay`` and an ``error`` to raise after streaming (like :class:`ScriptedTurn`).
    """

    reasoning: str | None = None
    delay: float = 0.0
    """Seconds to sleep before each delta (to make timing visible in tests)."""
    error: BaseException | None = None
    """Raised after the deltas are streamed (as :class:`ScriptedTurn` does)."""

    @property
    def deltas(self) -> tuple[ModelDelta, ...]:
        """What the provider streams for this turn: reasoning and text one character per delta,
        then the tool calls, the usage and the finish reason."""
        deltas: list[ModelDelta] = [ReasoningDelta(ch) for ch in self.reasoning or ""]
        deltas.extend(TextDelta(ch) for ch in self.content or "")
        for index, tc in enumerate(self.tool_calls):
            deltas.extend(_call_deltas(index, tc.name, tc.arguments, tc.id or None))
        deltas.append(UsageDelta(self.usage.copy()))
        deltas.append(FinishDelta(self.finish_reason or ("tool_calls" if self.tool_calls else "stop")))
        return tuple(deltas)


def _one_each() -> Usage:
    """The usage every builder reports unless told otherwise: 1 input and 1 output token."""
    return Usage(input_tokens=1, output_tokens=1)


def text(
    content: str, *, reasoning: str | None = None, usage: Usage | None = None, delay: float = 0.0
) -> ScriptedReply:
    """A text answer, streamed character by character (reasoning first); usage 1 + 1 tokens."""
    return ScriptedReply(
        content=content, usage=usage or _one_each(), finish_reason="stop", reasoning=reasoning, delay=delay
    )


def _call_deltas(index: int, name: str, args: dict[str, Any] | str, call_id: str | None) -> list[ModelDelta]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return [
        ToolCallDelta(index=index, call_id=call_id or f"call_{name}", name=name),
        ToolCallDelta(index=index, arguments=raw),
    ]


def _arguments(args: dict[str, Any] | str | None) -> str:
    if args is None:
        return "{}"
    return args if isinstance(args, str) else json.dumps(args)


def call(
    name: str,
    args: dict[str, Any] | str | None = None,
    *,
    call_id: str | None = None,
    text: str | None = None,
    usage: Usage | None = None,
) -> ScriptedReply:
    """A turn with one tool call (``args`` may be a raw string, e.g. malformed JSON) and the
    optional ``text`` said before it; usage 1 + 1 tokens unless ``usage`` says otherwise."""
    return ScriptedReply(
        content=text or None,
        tool_calls=[ToolCall(id=call_id or f"call_{name}", name=name, arguments=_arguments(args))],
        usage=usage or _one_each(),
        finish_reason="tool_calls",
    )


def batch(*calls: tuple[str, dict[str, Any] | str] | tuple[str, dict[str, Any] | str, str]) -> ScriptedReply:
    """A turn with several tool calls: ``batch(("a", {...}), ("b", {...}, "call-id"))``; usage 1 + 1."""
    made: list[ToolCall] = []
    for index, spec in enumerate(calls):
        name, args = spec[0], spec[1]
        call_id = spec[2] if len(spec) > 2 else f"call_{name}_{index}"
        made.append(ToolCall(id=call_id, name=name, arguments=_arguments(args)))
    return ScriptedReply(content=None, tool_calls=made, usage=_one_each(), finish_reason="tool_calls")


def fail(
    error: BaseException, *, after: ScriptedTurn | ScriptedReply | None = None, after_deltas: int = 0
) -> ScriptedTurn:
    """A turn that raises ``error``, optionally after streaming part of another turn."""
    deltas = after.deltas[:after_deltas] if after is not None else ()
    return ScriptedTurn(tuple(deltas), error=error)


TurnFunction = Callable[[list[TranscriptEntry], list[ToolDefinition]], Any]


class ScriptedProvider:
    """Replays canned turns, one per model call; records every prompt.

    ``name`` is ``"scripted"`` and ``model`` is ``None`` unless given. Pass a list of turns
    (``text``, ``call``, ``batch``, ``fail``, ``AssistantTurn`` values or plain strings), or a
    function ``(entries, tools) -> turn`` (sync or async) that decides each response. A list is
    single-use and not safe for concurrent runs; running out of turns raises ``AssertionError``.
    ``record=False`` keeps no copy of the prompts (for a long-lived provider).
    """

    def __init__(
        self,
        script: Sequence[ScriptedTurn | AssistantTurn | str] | TurnFunction,
        *,
        model: str | None = None,
        supports_json_schema: bool = False,
        record: bool = True,
    ) -> None:
        self._fn: TurnFunction | None = script if callable(script) else None
        self._turns: list[ScriptedTurn] = [] if callable(script) else [_coerce(t) for t in script]
        self._model = model or None
        self._supports_json_schema = supports_json_schema
        self._record = record
        self.calls: list[list[Message]] = []
        self.requests: list[ScriptedRequest] = []

    @property
    def name(self) -> str:
        """Provider name."""
        return "scripted"

    @property
    def model(self) -> str | None:
        """Model name, ``None`` unless given (assignable, like a plain field)."""
        return self._model

    @model.setter
    def model(self, value: str | None) -> None:
        self._model = value or None

    @property
    def supports_json_schema(self) -> bool:
        """Whether native structured output is advertised (False: the prompt contract is used)."""
        return self._supports_json_schema

    @property
    def remaining(self) -> int:
        """Canned turns not used yet."""
        return len(self._turns)

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream the next canned turn."""
        if self._record:
            self.calls.append(entries_to_messages(entries))
            self.requests.append(ScriptedRequest(list(entries), list(tools or []), response_format, settings))
        turn = await self._next(list(entries), list(tools or []))
        for delta in turn.deltas:
            if turn.delay:
                await asyncio.sleep(turn.delay)
            yield delta
        if turn.error is not None:
            raise turn.error

    async def _next(self, entries: list[TranscriptEntry], tools: list[ToolDefinition]) -> ScriptedTurn:
        if self._fn is not None:
            out = self._fn(entries, tools)
            if inspect.isawaitable(out):
                out = await out
            return _coerce(out)
        if not self._turns:
            raise AssertionError("ScriptedProvider ran out of canned responses")
        return self._turns.pop(0)


def _from_assistant_turn(turn: AssistantTurn) -> ScriptedTurn:
    """Stream a complete :class:`~lovia.messages.AssistantTurn` the way ``text``/``call`` do."""
    deltas: list[ModelDelta] = [TextDelta(ch) for ch in turn.content or ""]
    for index, tc in enumerate(turn.tool_calls):
        deltas.extend(_call_deltas(index, tc.name, tc.arguments, tc.id or None))
    deltas.append(UsageDelta(turn.usage.copy()))
    deltas.append(FinishDelta(turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")))
    return ScriptedTurn(tuple(deltas))


def _coerce(turn: ScriptedTurn | AssistantTurn | str) -> ScriptedTurn:
    if isinstance(turn, str):
        turn = text(turn)
    if isinstance(turn, ScriptedTurn):
        return turn
    if isinstance(turn, ScriptedReply):
        return ScriptedTurn(turn.deltas, error=turn.error, delay=turn.delay)
    if isinstance(turn, AssistantTurn):
        return _from_assistant_turn(turn)
    raise TypeError(f"scripted turns must be ScriptedTurn, AssistantTurn or str, got {type(turn).__name__}")
