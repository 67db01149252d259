"""The waiting line of chat runs that arrive while the server is at its live-run cap.

A chat started from the page (``POST /api/chat/stream``) past ``max_background_runs`` does not
fail at once: it takes a place in a bounded first-in, first-out line (``max_queued_runs`` places)
and its stream says so with ``run_waiting`` frames (its place, 1 = next). When any live run
ends, the head of the line starts. Only a full line answers 429 ``too_many_runs``.

:class:`RunQueue` is a plain bounded line and knows nothing of runs. :class:`WaitingLine` holds
runs in one and keeps each run's streams told of its place. The supervisor
(:mod:`lovia.web.supervisor`) owns a :class:`WaitingLine` and decides what enters and leaves it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Generic, Protocol, TypedDict, TypeVar

from .sse import frame

__all__ = ["RunQueue", "RunWaitingData", "WaitingLine", "default_queue_size", "waiting_frame"]

T = TypeVar("T")


class Waiter(Protocol):
    """What :class:`WaitingLine` needs of a run (a :class:`~lovia.web.supervisor.RunController`)."""

    session_id: str
    run_id: str
    buffer: list[dict[str, str]]

    def broadcast(self, item: dict[str, str], *, buffer: bool = True) -> None: ...


W = TypeVar("W", bound=Waiter)


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


class WaitingLine(Generic[W]):
    """Runs waiting for a slot, first in, first out; each one's streams hear its place.

    A waiting run's frame buffer holds only its latest ``run_waiting`` frame, so a stream that
    attaches late learns the current place, and nothing of it once the run has left the line.
    """

    def __init__(self) -> None:
        self._line: RunQueue[W] = RunQueue()

    def __len__(self) -> int:
        return len(self._line)

    def has_room(self, limit: int) -> bool:
        """Whether one more run fits under ``limit`` places."""
        return self._line.has_room(limit)

    def join(self, run: W, *, limit: int) -> int | None:
        """Put ``run`` at the end and tell its streams; its place, or ``None`` when the line is full."""
        place = self._line.push(run, limit=limit)
        if place is not None:
            _tell(run, place)
        return place

    def leave(self, run: W) -> bool:
        """Take ``run`` out (the ones behind it move up); ``False`` when it was not in line."""
        if not self._line.remove(run):
            return False
        self._announce()
        return True

    def next(self) -> W | None:
        """The head of the line, taken out (its place is forgotten; the rest move up)."""
        run = self._line.pop()
        if run is not None:
            run.buffer.clear()
            self._announce()
        return run

    def clear(self) -> list[W]:
        """Empty the line; the runs it held, in order."""
        return self._line.clear()

    def _announce(self) -> None:
        for place, run in enumerate(self._line, start=1):
            _tell(run, place)


def _tell(run: Waiter, place: int) -> None:
    run.buffer.clear()
    run.broadcast(waiting_frame(run.session_id, run.run_id, place))
