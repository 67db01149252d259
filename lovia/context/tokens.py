"""Token estimates and the compaction budget.

The estimate is deliberately cheap: UTF-8 bytes / 4 per entry (memoized by entry identity, since
entries are frozen), flat costs for images and files, and the tool schemas counted on their own.
A calibration ratio, learned from what the provider reports, scales the heuristic to the model's
real tokenizer (see :func:`calibrate`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import FilePart, ImagePart, TextPart
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

__all__ = ["CALIBRATION_ALPHA", "RATIO_MAX", "RATIO_MIN", "TokenBudget", "TokenCounter", "calibrate"]

CALIBRATION_ALPHA = 0.2
"""Weight of the newest observation in the calibration EMA."""
RATIO_MIN = 0.5
"""Lowest calibration ratio accepted."""
RATIO_MAX = 2.5
"""Highest calibration ratio accepted."""
_ENTRY_OVERHEAD = 4
"""Tokens a message envelope costs (role, separators) on top of its text."""


def _text_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)


def calibrate(ratio: float, observed: float, *, alpha: float = CALIBRATION_ALPHA) -> float:
    """Fold one observation (reported tokens / heuristic tokens) into the ratio, clamped to 0.5-2.5.

    An observation below ``RATIO_MIN / 2`` is ignored: no tokenizer packs four bytes into less
    than a quarter of a token, so such a count did not cover the whole prompt (a provider that
    reports only the uncached part, or a fake usage figure). Trusting it would shrink every later
    estimate and let views outgrow the window; over-counts are only folded in (clamped), since
    they make the policy compact early, never late.
    """
    if not math.isfinite(observed) or observed < RATIO_MIN / 2:
        return ratio
    blended = (1.0 - alpha) * ratio + alpha * observed
    return min(RATIO_MAX, max(RATIO_MIN, blended))


class TokenCounter:
    """Heuristic token counts, memoized per entry object.

    Args:
        image_tokens: Flat cost of one image part.
        file_tokens: Flat cost of one file part.
        max_memo: Entries remembered before the oldest half of the memo is dropped.
    """

    def __init__(self, *, image_tokens: int = 1_600, file_tokens: int = 4_000, max_memo: int = 200_000) -> None:
        self.image_tokens = image_tokens
        self.file_tokens = file_tokens
        self.max_memo = max_memo
        # id(entry) -> (entry, tokens): holding the entry keeps its id from being reused.
        self._memo: dict[int, tuple[TranscriptEntry, int]] = {}
        self._tools_memo: tuple[tuple[Any, ...], int] | None = None

    @staticmethod
    def count_text(text: str) -> int:
        """UTF-8 bytes / 4, rounded up."""
        return _text_tokens(text)

    def count(self, entry: TranscriptEntry) -> int:
        """Estimated tokens of one entry (memoized)."""
        hit = self._memo.get(id(entry))
        if hit is not None and hit[0] is entry:
            return hit[1]
        tokens = self._measure(entry)
        if len(self._memo) >= self.max_memo:
            for key in list(self._memo)[: self.max_memo // 2]:
                del self._memo[key]
        self._memo[id(entry)] = (entry, tokens)
        return tokens

    def measure(self, entry: TranscriptEntry) -> int:
        """Estimated tokens of one entry, without memoizing (for short-lived marker entries)."""
        return self._measure(entry)

    def count_all(self, entries: Sequence[TranscriptEntry]) -> int:
        """Sum of :meth:`count` over ``entries``."""
        return sum(self.count(e) for e in entries)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Estimated tokens of the tool schemas sent with a call (memoized on the same tool objects)."""
        ident = tuple(tools)
        memo = self._tools_memo
        if (
            memo is not None
            and len(memo[0]) == len(ident)
            and all(a is b for a, b in zip(memo[0], ident, strict=False))
        ):
            return memo[1]
        total = 0
        for t in tools:
            payload = {
                "name": getattr(t, "name", ""),
                "description": getattr(t, "description", ""),
                "parameters": getattr(t, "parameters", {}),
            }
            total += _text_tokens(json.dumps(payload, default=str, ensure_ascii=False)) + _ENTRY_OVERHEAD
        self._tools_memo = (ident, total)
        return total

    def _parts_tokens(self, parts: Sequence[Any]) -> int:
        total = 0
        for p in parts:
            if isinstance(p, ImagePart):
                total += self.image_tokens
            elif isinstance(p, FilePart):
                total += self.file_tokens
            else:
                total += _text_tokens(getattr(p, "text", ""))
        return total

    def _measure(self, entry: TranscriptEntry) -> int:
        if isinstance(entry, InputEntry):
            body = _text_tokens(entry.content) if isinstance(entry.content, str) else self._parts_tokens(entry.content)
        elif isinstance(entry, AssistantTextEntry):
            body = _text_tokens(entry.content)
        elif isinstance(entry, ReasoningEntry):
            meta = json.dumps(entry.metadata, default=str) if entry.metadata else ""
            body = _text_tokens(entry.content) + _text_tokens(meta)
        elif isinstance(entry, ToolCallEntry):
            body = _text_tokens(entry.name) + _text_tokens(entry.arguments) + _text_tokens(entry.call_id)
        elif isinstance(entry, ToolResultEntry):
            body = _text_tokens(entry.output) + _text_tokens(entry.call_id)
            if entry.parts:
                body += self._parts_tokens([p for p in entry.parts if not isinstance(p, TextPart)])
        else:  # pragma: no cover - the union is closed
            body = 0
        return body + _ENTRY_OVERHEAD


def _resolve(value: int | float, usable: int) -> int:
    if isinstance(value, float):
        return int(usable * value)
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenBudget:
    """The token levels one compaction decision works with."""

    window: int
    """The model's context window."""
    usable: int
    """Window minus the tokens reserved for the answer."""
    high: int
    """Compact when the estimate exceeds this (``compact_at``)."""
    target: int
    """Compact down to this (``compact_to``)."""
    keep_recent: int
    """Tokens of recent history that stay verbatim (the protected tail)."""

    @classmethod
    def resolve(
        cls,
        window: int,
        *,
        reserve_output_tokens: int,
        compact_at: int | float,
        compact_to: int | float,
        keep_recent_tokens: int | None,
    ) -> TokenBudget:
        """Turn the policy's settings into absolute levels for ``window``.

        When the reserve would swallow most of the window (small test windows), half the window
        stays usable.
        """
        usable = window - reserve_output_tokens
        if usable < window // 2:
            usable = window // 2
        high = max(1, _resolve(compact_at, usable))
        target = max(0, min(_resolve(compact_to, usable), high - 1))
        keep = usable // 5 if keep_recent_tokens is None else keep_recent_tokens
        return cls(window=window, usable=usable, high=high, target=target, keep_recent=keep)

    def aggressive(self) -> TokenBudget:
        """The overflow variant: no trigger level, target ~25% of usable, tail 10%."""
        return TokenBudget(
            window=self.window,
            usable=self.usable,
            high=0,
            target=self.usable // 4,
            keep_recent=min(self.keep_recent, self.usable // 10),
        )
