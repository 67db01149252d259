"""Chat titles: a provisional one from the first message at once, a better one from a small model
once the first exchange is done."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..agent import Agent

if TYPE_CHECKING:
    from ..providers.base import Provider

__all__ = ["TITLE_INSTRUCTIONS", "generate_title", "provisional_title"]

TITLE_INSTRUCTIONS = (
    "Write a short title (three to six words) for the chat that starts with the exchange below. "
    "Answer with the title only: no quotes, no trailing punctuation."
)
"""The system prompt of the title model."""

_PROVISIONAL_CHARS = 60
_TITLE_CHARS = 80
_EXCERPT_CHARS = 2000


def provisional_title(user_message: str) -> str:
    """A chat title from its first message: whitespace collapsed, at most 60 characters."""
    text = re.sub(r"\s+", " ", user_message).strip()
    return text if len(text) <= _PROVISIONAL_CHARS else text[: _PROVISIONAL_CHARS - 1].rstrip() + "…"


async def generate_title(user_message: str, assistant_reply: Any, *, model: str | Provider) -> str:
    """Ask ``model`` for a 3-6 word title of the exchange; a blank answer gives the provisional title.

    Both sides are cut to their first 2000 characters; the answer is put on one line, stripped of
    quotes and a trailing full stop, and cut to 80 characters. A failing model call raises.
    """
    from ..runner import Runner

    helper: Agent[Any] = Agent(name="chat-titler", instructions=TITLE_INSTRUCTIONS, model=model)
    reply = "" if assistant_reply is None else str(assistant_reply)
    prompt = f"USER: {user_message[:_EXCERPT_CHARS]}\n\nASSISTANT: {reply[:_EXCERPT_CHARS]}"
    result = await Runner.run(helper, prompt, max_turns=1)
    title = " ".join(str(result.output or "").split()).strip("\"'` .")[:_TITLE_CHARS]
    return title or provisional_title(user_message)
