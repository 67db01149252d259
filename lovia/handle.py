"""``RunHandle``: a live run you can iterate (events), await (result) and cancel.

Contract: iterate at most once; iteration never raises run errors and ends after exactly one
terminal event (``RunCompleted`` or ``RunFailed``); ``await handle`` equals ``await
handle.result()``, which drives the run itself when nobody iterates; abandoning iteration before
the terminal event cancels the run and makes ``result()`` raise.

A model that sends many deltas at once (a burst already in the socket) would otherwise be parsed
to its end before anyone downstream saw the first one: the run never yields to the event loop
while its provider has bytes in hand. So when events follow each other without the loop getting
a turn, the handle yields to it: at once for the first such pair (the first token reaches a
reader without waiting for the rest), then at most every :data:`BURST_SLICE` seconds, so the
readers take the rest in batches. A stream whose events come one at a time never yields here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

from .approvals import ApprovalChannel
from .events import ApprovalRequired, Event, RunCompleted, RunFailed
from .reliability import CancelToken
from .result import RunResult

__all__ = ["BURST_SLICE", "EventSink", "RunHandle"]

BURST_SLICE = 0.002
"""Seconds a burst of events runs before the handle lets its readers have the loop again."""

T = TypeVar("T")
EventSink = Callable[[Event], Awaitable[None]]
_END = object()


class RunHandle(Generic[T]):
    """Handle on one run started by ``Runner.stream``."""

    def __init__(
        self,
        start: Callable[[EventSink], Awaitable[RunResult[T]]],
        *,
        cancel_token: CancelToken,
        approvals: ApprovalChannel,
    ) -> None:
        self._start = start
        self._cancel_token = cancel_token
        self._approvals = approvals
        self._queue: asyncio.Queue[tuple[Any, asyncio.Future[None] | None]] | None = None
        self._task: asyncio.Task[RunResult[T]] | None = None
        self._iterated = False
        self._abandoned = False
        self._consumer_acks = False
        self._terminal_seen = False
        self._waiting = False
        self._in_burst = False  # an event was queued since the event loop last had a turn
        self._last_yield = float("-inf")

    # ------------------------------------------------------------------ control

    @property
    def approvals(self) -> ApprovalChannel:
        """Decide pending approvals out of band; touching it makes pending calls wait for you."""
        self._approvals.opted_in = True
        return self._approvals

    @property
    def cancel_token(self) -> CancelToken:
        """The run's cancel token."""
        return self._cancel_token

    def cancel(self, reason: str | None = None) -> None:
        """Ask the run to stop; it ends with ``RunFailed(RunCancelled)``."""
        self._cancel_token.cancel(reason)

    @property
    def done(self) -> bool:
        """Whether the run has finished."""
        return self._task is not None and self._task.done()

    # ------------------------------------------------------------------ plumbing

    def _ensure_started(self, *, unread: bool = False) -> None:
        """Start the run; ``unread``: nobody will iterate, so events are dropped as they come
        (no queue, and no task waking up to empty it)."""
        if self._task is not None:
            return
        if unread:
            self._task = asyncio.ensure_future(self._start(_drop))
        else:
            self._queue = asyncio.Queue()
            self._task = asyncio.ensure_future(self._start(self._sink))
        self._task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[RunResult[T]]) -> None:
        if self._queue is not None:
            self._queue.put_nowait((_END, None))
        if not task.cancelled():
            task.exception()  # retrieved here: an abandoned run's error is not "never retrieved"

    async def _sink(self, event: Event) -> None:
        assert self._queue is not None
        if isinstance(event, ApprovalRequired) and self._consumer_acks:
            # Wait until the consumer asked for the next event: it may have decided meanwhile.
            ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.put_nowait((event, ack))
            await ack
        else:
            self._queue.put_nowait((event, None))
        if not self._in_burst:
            self._in_burst = True
            asyncio.get_running_loop().call_soon(self._loop_turned)
            return
        now = asyncio.get_running_loop().time()
        if now - self._last_yield >= BURST_SLICE:
            self._last_yield = now
            # Twice: once for the reader of this queue, once for whoever it hands the events to
            # (a web stream writing them to its socket).
            await asyncio.sleep(0)
            await asyncio.sleep(0)

    def _loop_turned(self) -> None:
        self._in_burst = False

    # ------------------------------------------------------------------ iteration

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._iterated:
            raise RuntimeError("a RunHandle can be iterated only once")
        self._iterated = True
        self._consumer_acks = True
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        self._ensure_started()
        assert self._queue is not None
        pending_ack: asyncio.Future[None] | None = None
        finished = False
        try:
            while True:
                if pending_ack is not None and not pending_ack.done():
                    pending_ack.set_result(None)
                pending_ack = None
                self._waiting = True
                try:
                    item, pending_ack = await self._queue.get()
                finally:
                    self._waiting = False
                if item is _END:
                    finished = True
                    return
                if isinstance(item, (RunCompleted, RunFailed)):
                    self._terminal_seen = True
                    finished = True
                yield item
                if finished:
                    return
        finally:
            if pending_ack is not None and not pending_ack.done():
                pending_ack.set_result(None)
            if not finished:
                self._abandon()

    def _abandon(self) -> None:
        self._abandoned = True
        self._consumer_acks = False
        if self._task is not None and not self._task.done():
            self._cancel_token.cancel("stream abandoned before the run finished")

    async def result(self) -> RunResult[T]:
        """Wait for the run and return its result (or raise its error)."""
        if not self._iterated:
            self._iterated = True
            self._ensure_started(unread=True)
            return await self._await_task()
        ended = self._terminal_seen or (self._task is not None and self._task.done() and self._queue_drained())
        if self._abandoned or (not ended and not self._waiting):
            # The consumer stopped iterating before the terminal event (a `break`).
            self._abandon()
            raise RuntimeError("the stream was abandoned before the run finished: no result")
        return await self._await_task()

    def _queue_drained(self) -> bool:
        return self._queue is not None and self._queue.empty()

    async def _await_task(self) -> RunResult[T]:
        assert self._task is not None
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.done():
                # Our caller was cancelled: take the run down with it (it saves its checkpoint).
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            raise

    def __await__(self) -> Generator[Any, None, RunResult[T]]:
        return self.result().__await__()


async def _drop(event: Event) -> None:
    """The sink of a run nobody iterates: hooks saw the event already, the stream has no reader."""
