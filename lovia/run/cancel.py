"""Internal: turn a fired ``CancelToken`` into ``RunCancelled`` inside a block."""

from __future__ import annotations

import asyncio
from types import TracebackType

from ..exceptions import RunCancelled
from ..reliability import CancelToken

__all__ = ["cancel_scope"]


class cancel_scope:  # noqa: N801 - used as ``async with cancel_scope(token)``, like a function
    """Cancel the current task's awaits when ``token`` fires, and raise ``RunCancelled`` instead.

    Running async tools and an in-flight model stream stop at once; sync tools on worker threads
    cannot be interrupted and finish in the background. A plain class rather than a generator
    context manager: the loop enters one per turn.
    """

    __slots__ = ("_fired", "_inside", "_task", "_token", "_unsubscribe")

    def __init__(self, token: CancelToken) -> None:
        self._token = token
        self._fired = False
        self._inside = False

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._inside = True
        # A callback on the token, not a task waiting on it: the block costs no task of its own.
        self._unsubscribe = self._token._on_cancel(asyncio.get_running_loop(), self._on_fire)

    def _on_fire(self) -> None:
        if self._inside:
            self._fired = True
            self._task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._inside = False
        self._unsubscribe()
        if self._fired and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            uncancel = getattr(self._task, "uncancel", None)
            if callable(uncancel):
                uncancel()  # Python 3.11+: this cancellation is consumed here
            raise RunCancelled(
                self._token.reason or "run cancelled",
                hint="re-issue the call with the same run_id to resume from the checkpoint",
            ) from None
        return False
