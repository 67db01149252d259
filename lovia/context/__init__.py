"""Context management: policies that shape the per-call view, result stores, recall.

A policy decides what each model call sees; it never edits the transcript, the session or the
checkpoint. :class:`Compaction` is the default: sticky offload / clear / summarize decisions kept
in a JSON-safe state the loop persists, rendered by the pure :func:`render_view`.
"""

from __future__ import annotations

# The tools package re-exports recall_tool_result (built in .recall from this package's stores):
# loading it first lets it finish before .compaction asks .recall for the same tool.
from .. import tools as _tools  # noqa: F401  (import order, see above)
from .compaction import Compaction
from .policy import CompactionRequest, ContextPolicy, ContextResult, NoopContextPolicy
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
