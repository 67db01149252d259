"""The waiting line of chat runs that arrive while the server is at its live-run cap.

A chat started from the page (``POST /api/chat/stream``) past ``max_background_runs`` does not
fail at once: it takes a place in a bounded first-in, first-out line (``max_queued_runs`` places)
and its stream says so with ``run_waiting`` frames (its place, 1 = next). When any live run
ends, the head of the line starts. Only a full line answers 429 ``too_many_runs``.

:class:`RunQueue` is the line itself and knows nothing of runs; the supervisor
(:mod:`lovia.web.supervisor`) owns one and decides what enters it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Generic, TypedDict, TypeVar

from .sse import frame

__all__ = ["RunQueue", "RunWaitingData", "default_queue_size", "waiting_frame"]

T = TypeVar("T")


class RunWaitingData(TypedDict):
    """``run_waiting`` on a chat stream: the chat's run waits for a free slot."""

    session_id: str
    run_id: str
    position: int
    """The chat's place in the line; 1 starts next."""


def default_queue_size(max_background_runs: int) -> int:
    """The waiting places a server keeps unless told otherwise: four per live-run slot."""
    return 4 * max_background_runs


def waiting_frame(session_id: str, run_id: str, position: int) -> dict[str, str]:
    """The ``run_waiting`` frame of a run at ``position`` in the line."""
    data: RunWaitingData = {"session_id": session_id, "run_id": run_id, "position": position}
    return frame("run_waiting", data)


class RunQueue(Generic[T]):
    """A first-in, first-out line of items compared by identity, bounded at each :meth:`push`.

    The bound is passed per push (the server's setting is read when used, like the cap).
    """

    def __init__(self) -> None:
        self._items: deque[T] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))

    def has_room(self, limit: int) -> bool:
        """Whether one more item fits under ``limit`` places."""
        return len(self._items) < limit

    def push(self, item: T, *, limit: int) -> int | None:
        """Put ``item`` at the end; its place (1-based), or ``None`` when ``limit`` places are taken."""
        if not self.has_room(limit):
            return None
        self._items.append(item)
        return len(self._items)

    def pop(self) -> T | None:
        """Take the head of the line (``None`` when it is empty)."""
        return self._items.popleft() if self._items else None

    def remove(self, item: T) -> bool:
        """Take ``item`` out wherever it stands; ``False`` when it is not in the line."""
        for index, queued in enumerate(self._items):
            if queued is item:
                del self._items[index]
                return True
        return False

    def position(self, item: T) -> int | None:
        """The place of ``item`` (1-based), or ``None`` when it is not in the line."""
        for index, queued in enumerate(self._items):
            if queued is item:
                return index + 1
        return None

    def clear(self) -> list[T]:
        """Empty the line; what it held, in order."""
        items = list(self._items)
        self._items.clear()
        return items
