"""Token estimates and the compaction budget.

The estimate is deliberately cheap: UTF-8 bytes // 4 per entry (memoized by entry identity, since
entries are frozen), flat costs for images and files, and the tool schemas counted on their own.
A calibration ratio, learned from what the provider reports, scales the heuristic to the model's
real tokenizer (see :func:`calibrate`).
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import UserError
from ..messages import FilePart, ImagePart
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
    "check_levels",
    "usable_tokens",
]

CALIBRATION_ALPHA = 0.2
"""Weight of the newest observation in the calibration EMA."""
RATIO_MIN = 0.5
"""Lowest calibration ratio accepted."""
RATIO_MAX = 2.5
"""Highest calibration ratio accepted."""


def _text_tokens(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass")) // 4


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
    """Token estimates per entry, memoized per entry object (least recently used dropped first).

    The heuristic, in floor division: a text entry costs its UTF-8 bytes // 4 plus
    ``entry_overhead``; a tool call (its name plus arguments) bytes // 4 plus the overhead; each
    image part a flat ``image_tokens`` and each file part ``file_tokens``; a tool result with
    parts is priced like an input entry with those parts (its output text is not counted again).

    Args:
        provider: A provider that can estimate (one with ``estimate_tokens(entries)``, the
            ``TokenEstimator`` shape): each entry is then priced by ``estimate_tokens([entry])``,
            falling back to the heuristic when that raises. One with only ``count_tokens(entries)``
            is asked by :meth:`count` for the whole list.
        image_tokens: Flat cost of one image part.
        file_tokens: Flat cost of one file part.
        entry_overhead: Tokens a message envelope costs (role, separators) on top of its text.
        memo_size: Entries remembered; past it, the least recently used one is dropped.
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
        if memo_size < 1:
            raise UserError(f"memo_size must be at least 1, got {memo_size}", hint="use the default (8192)")
        self.provider = provider
        self.image_tokens = image_tokens
        self.file_tokens = file_tokens
        self.entry_overhead = entry_overhead
        self.memo_size = memo_size
        # id(entry) -> (entry, tokens): holding the entry keeps its id from being reused.
        self._memo: OrderedDict[int, tuple[TranscriptEntry, int]] = OrderedDict()
        # id(tool) -> (tool, tokens), same idea.
        self._tools_memo: dict[int, tuple[object, int]] = {}

    @staticmethod
    def count_text(text: str) -> int:
        """UTF-8 bytes // 4."""
        return _text_tokens(text)

    def count(self, entries: Sequence[TranscriptEntry]) -> int:
        """Estimated tokens of ``entries``: the sum of :meth:`count_entry`, or the exact count of a
        provider that only offers ``count_tokens``."""
        if not callable(getattr(self.provider, "estimate_tokens", None)):
            exact = getattr(self.provider, "count_tokens", None)
            if callable(exact):
                return int(exact(list(entries)))
        return sum(self.count_entry(e) for e in entries)

    def count_entry(self, entry: TranscriptEntry) -> int:
        """Estimated tokens of one entry (memoized by identity: entries are immutable)."""
        key = id(entry)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is entry:
            self._memo.move_to_end(key)
            return hit[1]
        tokens = self._estimate(entry)
        self._memo[key] = (entry, tokens)
        self._memo.move_to_end(key)
        while len(self._memo) > self.memo_size:
            self._memo.popitem(last=False)
        return tokens

    def measure(self, entry: TranscriptEntry) -> int:
        """Heuristic tokens of one entry, without memoizing (for short-lived marker entries)."""
        return self._measure(entry)

    def count_all(self, entries: Sequence[TranscriptEntry]) -> int:
        """The heuristic sum over ``entries`` (never asks the provider)."""
        if callable(getattr(self.provider, "estimate_tokens", None)):
            return sum(self._measure(e) for e in entries)
        return sum(self.count_entry(e) for e in entries)

    def count_tools(self, tools: Sequence[object]) -> int:
        """Estimated tokens of the tool schemas sent with a call: per tool, the compact JSON of
        ``tool.openai_schema()`` in UTF-8 bytes // 4 plus ``entry_overhead`` (memoized per tool
        object); a tool without that method, or whose method raises, costs ``entry_overhead``."""
        total = 0
        for tool in tools:
            hit = self._tools_memo.get(id(tool))
            if hit is None or hit[0] is not tool:
                hit = (tool, self._tool_tokens(tool))
                if len(self._tools_memo) >= self.memo_size:
                    self._tools_memo.clear()
                self._tools_memo[id(tool)] = hit
            total += hit[1]
        return total

    def _tool_tokens(self, tool: object) -> int:
        schema = getattr(tool, "openai_schema", None)
        if not callable(schema):
            return self.entry_overhead
        try:
            payload = json.dumps(schema(), separators=(",", ":"), ensure_ascii=False, default=str)
        except Exception:
            return self.entry_overhead
        return _text_tokens(payload) + self.entry_overhead

    def _estimate(self, entry: TranscriptEntry) -> int:
        estimator = getattr(self.provider, "estimate_tokens", None)
        if callable(estimator):
            try:
                return int(estimator([entry]))
            except Exception:
                pass  # a broken estimator: the heuristic stands in
        return self._measure(entry)

    def _parts_tokens(self, parts: Sequence[Any]) -> int:
        flat, text_bytes = 0, 0
        for p in parts:
            if isinstance(p, ImagePart):
                flat += self.image_tokens
            elif isinstance(p, FilePart):
                flat += self.file_tokens
            else:
                text_bytes += len(str(getattr(p, "text", "")).encode("utf-8", "surrogatepass"))
        return flat + text_bytes // 4

    def _measure(self, entry: TranscriptEntry) -> int:
        if isinstance(entry, InputEntry):
            body = _text_tokens(entry.content) if isinstance(entry.content, str) else self._parts_tokens(entry.content)
        elif isinstance(entry, AssistantTextEntry):
            body = _text_tokens(entry.content)
        elif isinstance(entry, ReasoningEntry):
            meta = json.dumps(entry.metadata, default=str) if entry.metadata else ""
            body = _text_tokens(entry.content + meta)
        elif isinstance(entry, ToolCallEntry):
            body = _text_tokens(entry.name + entry.arguments)
        elif isinstance(entry, ToolResultEntry):
            body = self._parts_tokens(entry.parts) if entry.parts else _text_tokens(entry.output)
        else:  # pragma: no cover - the union is closed
            body = 0
        return body + self.entry_overhead


def _check_level(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a float fraction or an int token count, got {value!r}")
    if isinstance(value, float) and not 0.0 < value <= 1.0:
        raise ValueError(f"{name} as a fraction must be in (0, 1], got {value!r}")
    if isinstance(value, int) and value < 1:
        raise ValueError(f"{name} as a token count must be at least 1, got {value!r}")


def check_levels(trigger: object, target: object, *, names: tuple[str, str] = ("trigger", "target")) -> None:
    """Raise ``ValueError`` unless ``trigger`` and ``target`` are valid watermarks.

    Each is a float fraction in (0, 1] or an int token count of at least 1 (a bool is neither);
    when both have the same type, ``target`` must be below ``trigger``.
    """
    _check_level(names[0], trigger)
    _check_level(names[1], target)
    if type(trigger) is type(target) and target >= trigger:  # type: ignore[operator]
        raise ValueError(f"{names[1]} ({target}) must be below {names[0]} ({trigger})")


def usable_tokens(window: int, reserve_output: int) -> int:
    """The part of ``window`` a prompt may fill: the window minus the tokens kept for the answer.

    When the reserve is as large as the window (or larger: small windows, tests), half the window
    stays usable, so a policy always has room to work with. Never below 1.
    """
    if reserve_output >= window:
        return max(1, window // 2)
    return max(1, window - reserve_output)


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """The token levels one compaction decision works with.

    ``trigger`` and ``target`` are the policy's ``compact_at`` / ``compact_to``: a float is a
    fraction of the usable window, an int an absolute token count (clamped to the usable window).

    Raises:
        ValueError: ``window`` < 1, ``reserve_output`` < 0, a bool or out-of-range level, or
            ``target`` not below ``trigger`` when both have the same type.
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
    """Tokens of recent history that stay verbatim (the protected tail); ``None``: max(1, usable // 5)."""

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"window must be a positive token count, got {self.window!r}")
        if isinstance(self.reserve_output, bool) or not isinstance(self.reserve_output, int) or self.reserve_output < 0:
            raise ValueError(f"reserve_output must not be negative, got {self.reserve_output!r}")
        check_levels(self.trigger, self.target)

    @property
    def usable(self) -> int:
        """Window minus the reserve (see :func:`usable_tokens`); at least 1."""
        return usable_tokens(self.window, self.reserve_output)

    @property
    def trigger_tokens(self) -> int:
        """The trigger level in tokens: a fraction of usable, or the int clamped to usable (at least 1)."""
        usable = self.usable
        if isinstance(self.trigger, float):
            return max(1, int(usable * self.trigger))
        return max(1, min(self.trigger, usable))

    @property
    def target_tokens(self) -> int:
        """The target level in tokens, always below the trigger level (0 when the trigger is 1 token)."""
        usable = self.usable
        target = int(usable * self.target) if isinstance(self.target, float) else min(self.target, usable)
        return max(0, min(target, self.trigger_tokens - 1))

    @property
    def keep_recent(self) -> int:
        """The protected tail in tokens: ``keep_recent_tokens`` or max(1, usable // 5)."""
        return max(1, self.usable // 5) if self.keep_recent_tokens is None else self.keep_recent_tokens

    def pressure(self, tokens: int) -> float:
        """How full the usable window is at ``tokens``: 1.0 is full; compaction starts at the trigger."""
        return tokens / self.usable

    def aggressive(self) -> TokenBudget:
        """The overflow variant: trigger at the whole usable window (the overflow path compacts
        whatever the size), target 25% of usable, tail at most usable // 10."""
        return TokenBudget(
            window=self.window,
            reserve_output=self.reserve_output,
            trigger=1.0,
            target=0.25,
            keep_recent_tokens=min(self.keep_recent, self.usable // 10),
        )
