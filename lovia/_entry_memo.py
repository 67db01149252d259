"""Internal: convert a growing transcript to provider messages converting only what is new.

Every model turn hands the provider the whole transcript, which only grows within a run (and
between runs of one session). Transcript entries are immutable, so a conversion computed for a
prefix stays valid: :class:`PrefixMemo` remembers the last few conversions and, when a new
transcript starts with the same entries (in practice the very same objects), reuses the output up to the last *cut*
(an index where the converter starts afresh: nothing before it merges with what follows) and
converts only the entries from there on.

A converter qualifies when ``convert(e) == convert(e[:k]) + convert(e[k:])`` for every cut ``k``
its ``is_cut(previous, entry)`` accepts. Outputs are shared between calls: callers must treat
them as read-only (the returned list itself is fresh).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["PrefixMemo"]

E = TypeVar("E")
T = TypeVar("T")

# Transcripts remembered per converter: concurrent runs each keep their own chain.
SLOTS = 16


@dataclass(slots=True)
class _Chain(Generic[E, T]):
    entries: list[E]
    outputs: list[T]
    cut: int  # convert(entries[:cut]) == outputs[:cut_outputs]
    cut_outputs: int


class PrefixMemo(Generic[E, T]):
    """``convert`` memoized by transcript prefix (see the module docstring)."""

    def __init__(
        self,
        convert: Callable[[Sequence[E]], list[T]],
        is_cut: Callable[[E, E], bool],
        *,
        head: Callable[[Sequence[E]], int] | None = None,
        slots: int = SLOTS,
    ) -> None:
        self._convert = convert
        self._is_cut = is_cut
        # Leading entries rebuilt by every run (the system head): converted apart, every time,
        # so that the body (session history + the run) still matches the previous run's chain.
        # ``head(e)`` must itself be a valid cut.
        self._head = head
        self._slots = slots
        self._chains: list[_Chain[E, T]] = []
        self._lock = threading.Lock()

    def _find(self, entries: list[E]) -> _Chain[E, T] | None:
        n = len(entries)
        for chain in self._chains:
            m = len(chain.entries)
            if m <= n and chain.cut > 0 and chain.entries[m - 1] is entries[m - 1] and _same(chain.entries, entries, m):
                return chain
        return None

    def __call__(self, entries: Sequence[E]) -> list[T]:
        """``convert(entries)``, converting only the entries after the last reusable cut."""
        entries = entries if isinstance(entries, list) else list(entries)
        h = self._head(entries) if self._head is not None else 0
        body = self._body(entries[h:])  # a copy the memo may keep: the caller's list can change later
        return self._convert(entries[:h]) + body if h else body

    def _body(self, entries: list[E]) -> list[T]:
        # ``entries`` is the memo's own list. Every pass over it below is a C loop (slice, compare,
        # extend): a turn late in a long run costs about what an early one does.
        with self._lock:
            chain = self._find(entries)
        start = chain.cut if chain is not None else 0
        outputs = chain.outputs[: chain.cut_outputs] if chain is not None else []
        # The newest cut after ``start``: the next call reuses everything before it.
        cut = start
        for i in range(len(entries) - 1, start, -1):
            if self._is_cut(entries[i - 1], entries[i]):
                cut = i
                break
        if cut > start:
            outputs += self._convert(entries[start:cut])
        cut_outputs = len(outputs)
        outputs += self._convert(entries[cut:])
        fresh = _Chain(entries, outputs, cut, cut_outputs)
        with self._lock:
            if chain is not None and chain in self._chains:
                self._chains.remove(chain)
            self._chains.insert(0, fresh)
            del self._chains[self._slots :]
        return list(outputs)


def _same(prefix: list[E], entries: list[E], m: int) -> bool:
    """Whether ``entries`` starts with ``prefix`` (``m`` long). List equality tests identity first,
    in C, so the common case (the very same entry objects) costs a pointer compare per entry; an
    equal but distinct entry converts the same way, and one whose fields cannot be compared (a
    ``raw`` value whose ``==`` raises) is a mismatch."""
    try:
        return (entries[:m] if m < len(entries) else entries) == prefix
    except Exception:
        return False
