"""Follow-up suggestions: a few questions the user might ask next, proposed by a side model call.

The call sees the chat's finished conversation (user and assistant text, no tool traffic) and
never writes to the chat's transcript. Everything here fails soft: an answer that is not a list
of questions yields ``[]``, so suggestions are never load-bearing. ``POST
/api/sessions/{id}/followups`` serves them (see :class:`lovia.web.api.RouterDeps`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message
from ..providers.base import ModelSettings, Provider

__all__ = [
    "FOLLOWUP_INSTRUCTIONS",
    "FollowupFn",
    "FollowupRequest",
    "coerce_suggestions",
    "generate_followups",
    "parse_followups",
]

FOLLOWUP_INSTRUCTIONS = (
    "You propose what the USER might want to ask next, given the exchange that just ended. "
    "Write short questions in the user's own voice and language, each one answerable by the "
    "assistant and not already answered above. Answer with a JSON array of strings only, "
    'e.g. ["How do I ...?", "What about ...?"]; answer [] when nothing useful fits.'
)
"""The built-in suggester's system prompt."""

_MAX_CHARS = 200
"""A suggestion longer than this is dropped (it is not a chip-sized question)."""
_PROMPT_MESSAGES = 12
"""How many of the chat's last user / assistant messages the suggester sees."""
_PROMPT_CHARS = 2000
"""Each of those messages is cut to this many characters."""
_LIST_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+(.+?)\s*$")


@dataclass(slots=True)
class FollowupRequest:
    """What a suggester gets: the chat, the agent serving it, and its chat-shaped messages."""

    session_id: str
    agent: str
    messages: list[Message] = field(default_factory=list)


FollowupFn = Callable[[FollowupRequest], Awaitable[list[str]]]
"""A suggester: ``async (request) -> [question, ...]`` (``create_app(followups=fn)``)."""


def coerce_suggestions(items: object) -> list[str]:
    """The non-empty, chip-sized, distinct strings of ``items`` (anything but a list gives ``[]``)."""
    if not isinstance(items, (list, tuple)):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            continue
        clean = " ".join(item.split())
        key = clean.casefold()
        if clean and len(clean) <= _MAX_CHARS and key not in seen:
            seen.add(key)
            out.append(clean)
    return out


def parse_followups(raw: str, *, limit: int = 3) -> list[str]:
    """The suggestions in a model's answer, at most ``limit`` of them.

    Accepted shapes: a JSON array of strings (possibly inside a code fence or prose), a JSON
    object with a ``followups`` or ``questions`` array, or a bulleted / numbered list. Anything
    else gives ``[]``.
    """
    if limit <= 0:
        return []
    found = _from_json(raw)
    if found is None:
        items = [m.group(1) for line in raw.splitlines() if (m := _LIST_ITEM.match(line))]
        found = coerce_suggestions([i.strip("\"'`") for i in items])
    return found[:limit]


def _from_json(raw: str) -> list[str] | None:
    """The suggestions of a JSON array or object in ``raw``; ``None`` when there is none."""
    for start_char, end_char in (("[", "]"), ("{", "}")):
        start, end = raw.find(start_char), raw.rfind(end_char)
        if start < 0 or end <= start:
            continue
        try:
            value: Any = json.loads(raw[start : end + 1])
        except ValueError:
            continue
        if isinstance(value, dict):
            value = value.get("followups", value.get("questions"))
            if value is None:
                continue
        return coerce_suggestions(value)
    return None


def _conversation(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        said = message.text.strip()
        if said and "<system-reminder>" not in said:
            lines.append(f"{message.role.upper()}: {said[:_PROMPT_CHARS]}")
    return "\n\n".join(lines[-_PROMPT_MESSAGES:])


async def generate_followups(
    request: FollowupRequest,
    *,
    model: str | Provider,
    instructions: str = FOLLOWUP_INSTRUCTIONS,
    limit: int = 3,
) -> list[str]:
    """Ask ``model`` for up to ``limit`` follow-up questions about ``request``'s conversation.

    One tool-less call at temperature 0, outside the chat's transcript. A conversation with no
    text makes no call and gives ``[]``; so does an answer :func:`parse_followups` cannot read.
    A model error propagates (the server turns it into ``[]``).
    """
    from ..agent import Agent
    from ..context import NoopContextPolicy
    from ..runner import Runner

    conversation = _conversation(request.messages)
    if not conversation:
        return []
    # No tools at all: the default context policy would offer recall_tool_result, and a model
    # that likes tools then spends its one turn calling it (MaxTurnsExceeded, no suggestions).
    helper: Agent[Any] = Agent(
        name="followup-suggester",
        instructions=instructions,
        model=model,
        settings=ModelSettings(temperature=0),
        context_policy=NoopContextPolicy(),
    )
    result = await Runner.run(helper, f"The conversation so far:\n\n{conversation}", max_turns=1)
    output = result.output
    return parse_followups(output if isinstance(output, str) else str(output), limit=limit)
