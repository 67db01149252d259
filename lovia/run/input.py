"""Internal: what a run takes as input."""

from __future__ import annotations

from ..messages import Message
from ..transcript import TranscriptEntry

__all__ = ["RunInput"]

RunInput = str | Message | list[Message] | list[TranscriptEntry]
"""One user message as text, a message, a list of messages, or transcript entries."""
