"""The context-policy seam: shape each model call's *view* of the transcript.

A policy never edits the transcript, the session or the checkpoint. It receives the full
transcript (system head first) and returns the entries to send. Whatever it must remember between
turns lives in ``CompactionRequest.scratch``: the loop persists that dict as
``RunHead.context_state`` in checkpoints and as ``meta["context_state"]`` in the session segment,
and hands it back on resume and on the session's next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..messages import Usage
from ..transcript import TranscriptEntry

if TYPE_CHECKING:
    from ..providers.base import Provider, ToolDefinition
    from ..tools._tool import Tool

__all__ = ["CompactionRequest", "ContextPolicy", "ContextResult", "NoopContextPolicy"]


@dataclass(slots=True)
class CompactionRequest:
    """Everything a policy may look at for one model call."""

    entries: list[TranscriptEntry]
    """The full transcript: system head, session history, then this run's entries."""
    provider: Provider | None = None
    model: str | None = None
    tools: Sequence[ToolDefinition] = ()
    last_input_tokens: int | None = None
    """Input tokens the provider reported for the previous call (calibration)."""
    overflow: bool = False
    """True on the reactive path after a ``ContextOverflowError``."""
    reported_window: int | None = None
    """The window named in that overflow error, when the vendor said it."""
    scratch: dict[str, Any] = field(default_factory=dict)
    """Carried state; mutate in place. Persisted by the loop (must stay JSON-safe)."""
    usage: Usage = field(default_factory=Usage)
    """Where a policy may record what its own model calls (a summarizer) spent for this request."""
    session_id: str | None = None
    run_id: str | None = None


@dataclass(slots=True)
class ContextResult:
    """The view to send and what the policy did."""

    entries: list[TranscriptEntry]
    changed: bool = False
    """The view differs from the transcript."""
    compacted: bool = False
    """New compaction decisions were taken for this call (emits ``ContextCompacted``)."""
    reason: str | None = None
    summary: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    detail: list[str] = field(default_factory=list)


@runtime_checkable
class ContextPolicy(Protocol):
    """Decides what each model call sees. May also offer ``tools() -> list[Tool]``."""

    async def compact(self, req: CompactionRequest) -> ContextResult:
        """Return the view for this call."""
        ...


class NoopContextPolicy:
    """Send the whole transcript every time."""

    async def compact(self, req: CompactionRequest) -> ContextResult:
        """Return the transcript unchanged."""
        return ContextResult(entries=req.entries)

    def tools(self) -> list[Tool[Any]]:
        """No tools."""
        return []
