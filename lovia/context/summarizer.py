"""Summarizers: condense old history into a structured note, on the run's own provider.

:class:`LLMSummarizer` asks the model (temperature 0, no tools) for a summary with fixed markdown
sections and rejects an answer that misses one; :class:`~lovia.context.SummarizeHistory` counts
that as a failure for its per-run circuit breaker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..exceptions import LoviaError
from ..transcript import AssistantTextEntry, EntryCompletedDelta, InputEntry, TextDelta, TranscriptEntry, UsageDelta
from .render import transcript_to_text

if TYPE_CHECKING:
    from ..providers.base import ModelSettings, Provider
    from .policy import CompactionRequest

__all__ = [
    "REQUIRED_SECTIONS",
    "SUMMARY_SYSTEM_PROMPT",
    "LLMSummarizer",
    "SummaryFailed",
    "Summarizer",
    "transcript_to_text",
]

REQUIRED_SECTIONS: tuple[str, ...] = ("Intent", "Current state", "Key facts", "Artifacts", "Constraints", "Next steps")
"""The headings every summary must contain, in this order."""

SUMMARY_SYSTEM_PROMPT = """You condense the earlier part of an agent's working session so the agent can \
continue without it. The agent will see only your summary plus the most recent messages.

Write markdown with exactly these level-2 headings, in this order:
{sections}

Under each heading write terse bullet points:
- Intent: what the user wants overall, in their terms.
- Current state: what has been done and what is in progress.
- Key facts: names, numbers, identifiers, decisions and findings that later steps depend on.
- Artifacts: files, URLs, records or outputs created or inspected, with their exact names.
- Constraints: requirements, preferences and limits the user or the tools imposed.
- Next steps: what remains to be done.

Keep exact values (paths, ids, figures) verbatim. Write "none" under a heading with nothing to \
report. Do not address the user and do not continue the task."""
"""System prompt of :class:`LLMSummarizer`; ``{sections}`` lists the required headings."""


class SummaryFailed(LoviaError):
    """A summarizer could not produce a usable summary."""


@runtime_checkable
class Summarizer(Protocol):
    """Condenses entries (and the previous summary, if any) into summary text.

    ``req`` is the compaction request being served: its ``provider`` and ``model`` are the run's,
    and a summarizer that calls a model adds that call's spend to ``req.usage``.
    """

    async def summarize(
        self,
        entries: list[TranscriptEntry],
        *,
        req: CompactionRequest,
        prior_summary: str | None = None,
    ) -> str:
        """Return the new summary covering ``prior_summary`` plus ``entries``."""
        ...


class LLMSummarizer:
    """Summarize with a model: the run's own provider unless one is given, at temperature 0.

    Args:
        provider: The provider to summarize with (a cheaper model, say); ``None``: the run's.
        prompt: System prompt; ``{sections}`` is replaced by the heading list.
        settings: Model settings for the call; ``None``: temperature 0 and ``max_tokens``.
        required_sections: Headings the answer must contain (case-insensitive); ``None``: any
            non-empty answer is accepted.
        max_chars_per_entry: Each entry is clipped to this many characters in the request.
        max_tokens: Cap on the summary's length when ``settings`` is not given.
    """

    def __init__(
        self,
        provider: Provider | None = None,
        *,
        prompt: str = SUMMARY_SYSTEM_PROMPT,
        settings: ModelSettings | None = None,
        required_sections: tuple[str, ...] | None = REQUIRED_SECTIONS,
        max_chars_per_entry: int = 4_000,
        max_tokens: int = 4_096,
    ) -> None:
        self.provider = provider
        self.prompt = prompt
        self.settings = settings
        self.required_sections = tuple(required_sections or ())
        self.max_chars_per_entry = max_chars_per_entry
        self.max_tokens = max_tokens

    def request(self, entries: Sequence[TranscriptEntry], *, previous: str | None) -> list[TranscriptEntry]:
        """The entries sent to the model for one summary."""
        sections = "\n".join(f"## {s}" for s in self.required_sections)
        system = self.prompt.replace("{sections}", sections)
        text = transcript_to_text(entries, max_chars_per_entry=self.max_chars_per_entry)
        parts = []
        if previous:
            parts.append(f"Summary of everything before this part:\n\n{previous}")
        parts.append(f"Conversation to fold into the summary:\n\n{text}")
        parts.append("Write the updated summary now.")
        return [InputEntry(role="system", content=system), InputEntry(role="user", content="\n\n---\n\n".join(parts))]

    async def summarize(
        self,
        entries: list[TranscriptEntry],
        *,
        req: CompactionRequest,
        prior_summary: str | None = None,
    ) -> str:
        """Ask the model for the summary, add the call's usage to ``req.usage``, check the sections.

        Raises:
            SummaryFailed: No provider, or the answer was empty or missed a required section.
        """
        from ..providers.base import ModelSettings

        provider = self.provider or req.provider
        if provider is None:
            raise SummaryFailed("no provider to summarize with", hint="pass LLMSummarizer(provider=...)")
        settings = self.settings or ModelSettings(temperature=0.0, max_tokens=self.max_tokens)
        chunks: list[str] = []
        final: str | None = None
        request = self.request(entries, previous=prior_summary)
        async for delta in provider.stream(request, tools=None, settings=settings):
            if isinstance(delta, TextDelta):
                chunks.append(delta.text)
            elif isinstance(delta, EntryCompletedDelta) and isinstance(delta.entry, AssistantTextEntry):
                final = delta.entry.content
            elif isinstance(delta, UsageDelta):
                req.usage.add(delta.usage)
        text = (final if final is not None else "".join(chunks)).strip()
        self.check(text)
        return text

    def check(self, text: str) -> None:
        """Raise :class:`SummaryFailed` unless ``text`` has every required heading."""
        if not text:
            raise SummaryFailed("the summarizer returned no text", hint="check the provider and model")
        missing = [s for s in self.required_sections if not re.search(rf"^#+\s*{re.escape(s)}\b", text, re.I | re.M)]
        if missing:
            raise SummaryFailed(
                f"the summary misses section(s) {', '.join(missing)}",
                hint="use a stronger model or a prompt= that the model follows",
            )
