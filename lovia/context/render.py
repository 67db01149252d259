"""Rendering: turn the transcript plus a :class:`CompactionState` into the view a model sees.

Everything here is pure: the same transcript and state always give byte-identical entries. An
entry without a decision is passed through as the very same object.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ..messages import FilePart, ImagePart
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    leading_system_count,
)
from .state import CompactionState, OffloadRecord

__all__ = [
    "RECALL_TOOL_NAME",
    "SUMMARY_WRAPPER",
    "clear_marker",
    "offload_marker",
    "render_body",
    "render_entry",
    "render_view",
    "summary_cover",
    "summary_entry",
    "transcript_to_text",
]

RECALL_TOOL_NAME = "recall_tool_result"
"""Name of the tool that brings archived or cleared outputs back."""

SUMMARY_WRAPPER = (
    "[Context summary: earlier parts of this conversation were condensed to fit the context window. "
    "The full record is kept outside this view.]\n\n{summary}"
)
"""Frames a summary in the view; ``{summary}`` is replaced by the text."""


def clear_marker(call_id: str, *, is_error: bool = False, recall: bool = False, ref: str | None = None) -> str:
    """The text that replaces a cleared tool output.

    Args:
        call_id: The result's call id (the recall reference unless ``ref`` is given).
        is_error: Whether the original result was an error.
        recall: Whether to point the model at ``recall_tool_result``.
        ref: The recall reference when it is not the call id (an archived output's digest).
    """
    ref = ref or call_id
    kind = "error output" if is_error else "output"
    text = f"[Tool {kind} cleared from context to save space; ref: {ref}."
    if recall:
        text += f' Call {RECALL_TOOL_NAME}(ref="{ref}") to read it again.'
    return text + "]"


def offload_marker(record: OffloadRecord, *, recall: bool = False) -> str:
    """The text that replaces an offloaded tool output: its preview plus an archive note.

    Args:
        record: The offload decision (preview, size, digest).
        recall: Whether to point the model at ``recall_tool_result``.
    """
    omitted = record.chars - len(record.preview)
    archived = f"{omitted:,} more characters archived ({record.chars:,} in total)"
    text = f"{record.preview}\n[... {archived}; ref: {record.digest}."
    if recall:
        text += f' Call {RECALL_TOOL_NAME}(ref="{record.digest}") for the full output.'
    return text + "]"


def summary_entry(summary: str) -> InputEntry:
    """The user entry that stands in for summarized history."""
    return InputEntry(role="user", content=SUMMARY_WRAPPER.format(summary=summary))


def render_entry(index: int, entry: TranscriptEntry, state: CompactionState) -> TranscriptEntry:
    """Render body entry ``index``: a marker when a decision about its ``call_id`` applies, else
    ``entry`` itself. (The caller keeps the state pruned to ids that are unique in the body.)"""
    if not isinstance(entry, ToolResultEntry):
        return entry
    recall = bool(state.mention_recall)
    record = state.offloaded.get(entry.call_id)
    if entry.call_id in state.cleared:
        # A cleared result that had been archived points at the archive (it outlives session trims).
        ref = record.digest if record is not None else None
        marker = clear_marker(entry.call_id, is_error=entry.is_error, recall=recall, ref=ref)
        return ToolResultEntry(call_id=entry.call_id, output=marker, is_error=entry.is_error)
    if record is not None:
        return ToolResultEntry(
            call_id=entry.call_id, output=offload_marker(record, recall=recall), is_error=entry.is_error
        )
    return entry


def summary_cover(body: Sequence[TranscriptEntry], covered: int) -> int:
    """How many leading body entries a summary covering ``covered`` entries may hide: ``covered``
    itself unless that splits a tool call from its result, else the nearest earlier boundary that
    does not (0 when there is none: the summary cannot be shown)."""
    covered = min(covered, len(body))
    if covered <= 0:
        return 0
    open_calls: Counter[str] = Counter()
    best = 0
    for i in range(covered):
        if i > 0 and not +open_calls:
            best = i
        e = body[i]
        if isinstance(e, ToolCallEntry):
            open_calls[e.call_id] += 1
        elif isinstance(e, ToolResultEntry) and open_calls[e.call_id] > 0:
            open_calls[e.call_id] -= 1
    return best if +open_calls else covered


def render_body(body: Sequence[TranscriptEntry], state: CompactionState) -> list[TranscriptEntry]:
    """Render the transcript body (no system head): summary first, then the remaining entries."""
    state = _unambiguous(body, state)
    out: list[TranscriptEntry] = []
    start = 0
    summary = state.summary
    if summary is not None:
        start = summary_cover(body, summary.covered)
        if start:
            out.append(summary_entry(summary.text))
    out.extend(render_entry(i, body[i], state) for i in range(start, len(body)))
    return out


def _unambiguous(body: Sequence[TranscriptEntry], state: CompactionState) -> CompactionState:
    """``state`` without decisions whose call id more than one result in ``body`` carries."""
    if not (state.cleared or state.offloaded):
        return state
    seen: Counter[str] = Counter(e.call_id for e in body if isinstance(e, ToolResultEntry))
    shared = {cid for cid, n in seen.items() if n > 1}
    if not shared & (state.cleared | set(state.offloaded)):
        return state
    return replace(
        state,
        cleared=state.cleared - shared,
        offloaded={cid: r for cid, r in state.offloaded.items() if cid not in shared},
    )


def render_view(transcript: Sequence[TranscriptEntry], state: CompactionState) -> list[TranscriptEntry]:
    """The view of ``transcript`` under ``state``: system head, then the rendered body.

    Pure and deterministic, so the view's prefix stays byte-identical while ``state`` only gains
    decisions about later entries.
    """
    n = leading_system_count(transcript)
    return list(transcript[:n]) + render_body(transcript[n:], state)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters omitted ...]\n{text[-half:]}"


def _input_text(entry: InputEntry) -> str:
    if isinstance(entry.content, str):
        return entry.content
    pieces = []
    for p in entry.content:
        if isinstance(p, ImagePart):
            pieces.append("[image]")
        elif isinstance(p, FilePart):
            pieces.append(f"[file {p.filename or ''}]".replace(" ]", "]"))
        else:
            pieces.append(p.text)
    return "".join(pieces)


def transcript_to_text(entries: Sequence[TranscriptEntry], *, max_chars_per_entry: int = 4_000) -> str:
    """Plain-text rendering of entries for a summarizer (reasoning left out, long texts clipped)."""
    lines: list[str] = []
    for e in entries:
        if isinstance(e, InputEntry):
            lines.append(f"{e.role.upper()}: {_clip(_input_text(e), max_chars_per_entry)}")
        elif isinstance(e, AssistantTextEntry):
            lines.append(f"ASSISTANT: {_clip(e.content, max_chars_per_entry)}")
        elif isinstance(e, ToolCallEntry):
            lines.append(f"TOOL CALL {e.name} [{e.call_id}]: {_clip(e.arguments, max_chars_per_entry)}")
        elif isinstance(e, ToolResultEntry):
            tag = " (error)" if e.is_error else ""
            lines.append(f"TOOL RESULT [{e.call_id}]{tag}: {_clip(e.output, max_chars_per_entry)}")
        elif isinstance(e, ReasoningEntry):
            continue
    return "\n\n".join(lines)
