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

from ..exceptions import UserError
from ..messages import FilePart, ImagePart, TextPart
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

__all__ = [
    "CALIBRATION_ALPHA",
    "RATIO_MAX",
    "RATIO_MIN",
    "TokenBudget",
    "TokenCounter",
    "calibrate",
    "usable_tokens",
]

CALIBRATION_ALPHA = 0.2
"""Weight of the newest observation in the calibration EMA."""
RATIO_MIN = 0.5
"""Lowest calibration ratio accepted."""
RATIO_MAX = 2.5
"""Highest calibration ratio accepted."""


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
        provider: A provider that can count exactly (one with ``count_tokens(entries)``, the
            ``TokenEstimator`` shape); :meth:`count` then asks it instead of estimating.
        image_tokens: Flat cost of one image part.
        file_tokens: Flat cost of one file part.
        entry_overhead: Tokens a message envelope costs (role, separators) on top of its text.
        memo_size: Entries remembered before the oldest half of the memo is dropped.
    """

    def __init__(
        self,
        provider: object | None = None,
        *,
        image_tokens: int = 1_600,
        file_tokens: int = 2_000,
        entry_overhead: int = 8,
        memo_size: int = 8_192,
    ) -> None:
        if memo_size < 2:
            raise UserError(f"memo_size must be at least 2, got {memo_size}", hint="use the default (8192)")
        self.provider = provider
        self.image_tokens = image_tokens
        self.file_tokens = file_tokens
        self.entry_overhead = entry_overhead
        self.memo_size = memo_size
        # id(entry) -> (entry, tokens): holding the entry keeps its id from being reused.
        self._memo: dict[int, tuple[TranscriptEntry, int]] = {}
        self._tools_memo: tuple[tuple[Any, ...], int] | None = None

    @staticmethod
    def count_text(text: str) -> int:
        """UTF-8 bytes / 4, rounded up."""
        return _text_tokens(text)

    def count(self, entries: Sequence[TranscriptEntry]) -> int:
        """Estimated tokens of ``entries``: the provider's exact count when it offers one, else the sum
        of :meth:`count_entry`."""
        exact = getattr(self.provider, "count_tokens", None)
        if callable(exact):
            return int(exact(list(entries)))
        return sum(self.count_entry(e) for e in entries)

    def count_entry(self, entry: TranscriptEntry) -> int:
        """Estimated tokens of one entry (memoized by identity: entries are immutable)."""
        hit = self._memo.get(id(entry))
        if hit is not None and hit[0] is entry:
            return hit[1]
        tokens = self._measure(entry)
        if len(self._memo) >= self.memo_size:
            for key in list(self._memo)[: self.memo_size // 2]:
                del self._memo[key]
        self._memo[id(entry)] = (entry, tokens)
        return tokens

    def measure(self, entry: TranscriptEntry) -> int:
        """Estimated tokens of one entry, without memoizing (for short-lived marker entries)."""
        return self._measure(entry)

    def count_all(self, entries: Sequence[TranscriptEntry]) -> int:
        """The heuristic sum of :meth:`count_entry` over ``entries`` (never asks the provider)."""
        return sum(self.count_entry(e) for e in entries)

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
            total += _text_tokens(json.dumps(payload, default=str, ensure_ascii=False)) + self.entry_overhead
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
        return body + self.entry_overhead


def _resolve(value: int | float, usable: int) -> int:
    if isinstance(value, float):
        return int(usable * value)
    return int(value)


def usable_tokens(window: int, reserve_output: int) -> int:
    """The part of ``window`` a prompt may fill: the window minus the tokens kept for the answer.

    When the reserve would swallow more than half the window (small windows, tests), half the
    window stays usable, so a policy always has room to work with.
    """
    return max(window - reserve_output, window // 2)


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """The token levels one compaction decision works with.

    ``trigger`` and ``target`` are the policy's ``compact_at`` / ``compact_to``: a float is a
    fraction of the usable window, an int an absolute token count. A ``trigger`` of ``0`` means no
    trigger level at all (the overflow path compacts whatever the size).
    """

    window: int
    """The model's context window."""
    reserve_output: int = 16_384
    """Tokens kept free for the answer."""
    trigger: int | float = 0.85
    """Compact when the estimate exceeds this level."""
    target: int | float = 0.6
    """Compact down to this level."""
    keep_recent_tokens: int | None = None
    """Tokens of recent history that stay verbatim (the protected tail); ``None``: usable // 5."""

    @property
    def usable(self) -> int:
        """Window minus the reserve (see :func:`usable_tokens`)."""
        return usable_tokens(self.window, self.reserve_output)

    @property
    def trigger_tokens(self) -> int:
        """The trigger level in tokens (at least 1, unless there is no trigger)."""
        if self.trigger == 0:
            return 0
        return max(1, _resolve(self.trigger, self.usable))

    @property
    def target_tokens(self) -> int:
        """The target level in tokens, always below the trigger level."""
        target = max(0, _resolve(self.target, self.usable))
        high = self.trigger_tokens
        return target if high == 0 else max(0, min(target, high - 1))

    @property
    def keep_recent(self) -> int:
        """The protected tail in tokens."""
        return self.usable // 5 if self.keep_recent_tokens is None else self.keep_recent_tokens

    def pressure(self, tokens: int) -> float:
        """How full the usable window is at ``tokens``: 1.0 is full; compaction starts at the trigger."""
        return tokens / self.usable if self.usable > 0 else float("inf")

    def aggressive(self) -> TokenBudget:
        """The overflow variant: no trigger level, target ~25% of usable, tail 10%."""
        return TokenBudget(
            window=self.window,
            reserve_output=self.reserve_output,
            trigger=0,
            target=self.usable // 4,
            keep_recent_tokens=min(self.keep_recent, self.usable // 10),
        )
