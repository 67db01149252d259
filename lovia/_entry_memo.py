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

    def _claim(self, entries: list[E]) -> _Chain[E, T] | None:
        """The newest chain ``entries`` continues, taken out of the memo (its lists are reused in
        place, so no other call may hold it meanwhile); the caller puts a chain back."""
        n = len(entries)
        with self._lock:
            for i, chain in enumerate(self._chains):
                m = len(chain.entries)
                if m <= n and chain.cut > 0 and chain.entries[m - 1] is entries[m - 1]:
                    if _starts_with(entries, chain.entries):
                        del self._chains[i]
                        return chain
        return None

    def __call__(self, entries: Sequence[E]) -> list[T]:
        """``convert(entries)``, converting only the entries after the last reusable cut."""
        entries = entries if isinstance(entries, list) else list(entries)
        h = self._head(entries) if self._head is not None else 0
        # The body is copied: the memo keeps the copy, and the caller's list can change later.
        return self._body(entries[h:], self._convert(entries[:h]) if h else [])

    def _body(self, entries: list[E], head: list[T]) -> list[T]:
        # ``entries`` is the memo's own list. Besides the conversion of what is new, a call costs
        # one comparison of the lists and one copy of the outputs (behind ``head``, in a fresh list
        # made before the chain is shared again), all C loops: a turn late in a long run costs
        # about what an early one does.
        chain = self._claim(entries)
        start = chain.cut if chain is not None else 0
        outputs: list[T] = []
        if chain is not None:
            outputs = chain.outputs
            del outputs[chain.cut_outputs :]  # what followed the last cut is converted again
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
        head += outputs
        with self._lock:
            self._chains.insert(0, _Chain(entries, outputs, cut, cut_outputs))
            del self._chains[self._slots :]
        return head


def _starts_with(entries: list[E], prefix: list[E]) -> bool:
    """Whether ``entries`` (the memo's own list) starts with ``prefix``, compared without copying
    ``entries``: its tail is cut off for the comparison and put back. List equality tests identity
    first, in C, so the common case (the very same entry objects) costs a pointer compare per
    entry; an equal but distinct entry converts the same way, and one whose fields cannot be
    compared (a ``raw`` value whose ``==`` raises) is a mismatch."""
    m = len(prefix)
    tail = entries[m:]
    del entries[m:]
    try:
        return entries == prefix
    except Exception:
        return False
    finally:
        entries += tail
