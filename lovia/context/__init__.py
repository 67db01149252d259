"""Context management: policies that shape the per-call view, result stores, recall.

A policy decides what each model call sees; it never edits the transcript, the session or the
checkpoint. :class:`Compaction` is the default: sticky offload / clear / summarize decisions kept
in a JSON-safe state the loop persists, rendered by the pure :func:`render_view`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .policy import CompactionRequest, ContextPolicy, ContextResult, NoopContextPolicy

if TYPE_CHECKING:
    from .compaction import Compaction
    from .render import (
        RECALL_TOOL_NAME,
        SUMMARY_WRAPPER,
        clear_marker,
        offload_marker,
        render_entry,
        render_view,
        summary_entry,
        transcript_to_text,
    )
    from .stages import ClearToolResults, OffloadToolResults, Stage, StageContext, SummarizeHistory, safe_cut
    from .state import CompactionState, OffloadRecord, SummaryState, fingerprint
    from .stores import FileResultStore, InMemoryResultStore, ResultStore, content_key, is_valid_key
    from .summarizer import REQUIRED_SECTIONS, SUMMARY_SYSTEM_PROMPT, LLMSummarizer, Summarizer, SummaryFailed
    from .tokens import TokenBudget, TokenCounter, calibrate

_LAZY = {
    "ClearToolResults": ".stages",
    "Compaction": ".compaction",
    "CompactionState": ".state",
    "FileResultStore": ".stores",
    "InMemoryResultStore": ".stores",
    "LLMSummarizer": ".summarizer",
    "OffloadRecord": ".state",
    "OffloadToolResults": ".stages",
    "RECALL_TOOL_NAME": ".render",
    "REQUIRED_SECTIONS": ".summarizer",
    "ResultStore": ".stores",
    "SUMMARY_SYSTEM_PROMPT": ".summarizer",
    "SUMMARY_WRAPPER": ".render",
    "Stage": ".stages",
    "StageContext": ".stages",
    "SummarizeHistory": ".stages",
    "Summarizer": ".summarizer",
    "SummaryFailed": ".summarizer",
    "SummaryState": ".state",
    "TokenBudget": ".tokens",
    "TokenCounter": ".tokens",
    "calibrate": ".tokens",
    "clear_marker": ".render",
    "content_key": ".stores",
    "fingerprint": ".state",
    "is_valid_key": ".stores",
    "offload_marker": ".render",
    "render_entry": ".render",
    "render_view": ".render",
    "safe_cut": ".stages",
    "summary_entry": ".render",
    "transcript_to_text": ".render",
}

__all__ = [
    "RECALL_TOOL_NAME",
    "REQUIRED_SECTIONS",
    "SUMMARY_SYSTEM_PROMPT",
    "SUMMARY_WRAPPER",
    "ClearToolResults",
    "Compaction",
    "CompactionRequest",
    "CompactionState",
    "ContextPolicy",
    "ContextResult",
    "FileResultStore",
    "InMemoryResultStore",
    "LLMSummarizer",
    "NoopContextPolicy",
    "OffloadRecord",
    "OffloadToolResults",
    "ResultStore",
    "Stage",
    "StageContext",
    "SummarizeHistory",
    "Summarizer",
    "SummaryFailed",
    "SummaryState",
    "TokenBudget",
    "TokenCounter",
    "calibrate",
    "clear_marker",
    "content_key",
    "fingerprint",
    "is_valid_key",
    "offload_marker",
    "render_entry",
    "render_view",
    "safe_cut",
    "summary_entry",
    "transcript_to_text",
]

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
