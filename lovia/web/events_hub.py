"""``EventHub``: the process-wide notification stream behind ``GET /api/events``.

Frames: ``run_started {session_id, run_id, agent}``, ``run_finished {session_id, run_id, status}``,
``session_created {session}``, ``session_updated {session}`` (renamed, pinned, retitled),
``session_deleted {session_id}``, ``sessions_cleared {}``. There is no replay: a client that
(re)connects reloads the list first, then applies what arrives. A subscriber that stops reading
is dropped once its queue is full, so a stuck tab never holds memory or slows a run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .sse import Frame

__all__ = ["EventHub"]

QUEUE_LIMIT = 256


class EventHub:
    """Fan-out of small notification frames to every open ``/api/events`` stream."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[Frame | None]] = set()

    def subscribe(self) -> asyncio.Queue[Frame | None]:
        """A new subscriber queue (``None`` in it means: the hub is closing)."""
        queue: asyncio.Queue[Frame | None] = asyncio.Queue(QUEUE_LIMIT)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Frame | None]) -> None:
        """Stop delivering to ``queue`` (no error when already gone)."""
        self._queues.discard(queue)

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send one frame to every subscriber, dropping subscribers that fell behind."""
        frame = Frame(event, data)
        for queue in list(self._queues):
            try:
                queue.put_nowait(frame)
            except asyncio.QueueFull:
                self._queues.discard(queue)
                _close(queue)

    def close(self) -> None:
        """End every stream (server shutdown)."""
        for queue in list(self._queues):
            _close(queue)
        self._queues.clear()

    @property
    def subscribers(self) -> int:
        """How many streams are open."""
        return len(self._queues)


def _close(queue: asyncio.Queue[Frame | None]) -> None:
    # Make room for the end marker even when the queue is full: the reader must learn it is dropped.
    while queue.full():
        queue.get_nowait()
    queue.put_nowait(None)
