"""Internal: turn a fired ``CancelToken`` into ``RunCancelled`` inside a block."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ..exceptions import RunCancelled
from ..reliability import CancelToken

__all__ = ["cancel_scope"]


@contextlib.asynccontextmanager
async def cancel_scope(token: CancelToken) -> AsyncIterator[None]:
    """Cancel the current task's awaits when ``token`` fires, and raise ``RunCancelled`` instead.

    Running async tools and an in-flight model stream stop at once; sync tools on worker threads
    cannot be interrupted and finish in the background.
    """
    task = asyncio.current_task()
    assert task is not None
    fired = False
    inside = True

    def on_fire() -> None:
        nonlocal fired
        if inside:
            fired = True
            task.cancel()

    # A callback on the token, not a task waiting on it: the block costs no task of its own.
    unsubscribe = token._on_cancel(asyncio.get_running_loop(), on_fire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            uncancel = getattr(task, "uncancel", None)
            if callable(uncancel):
                uncancel()  # Python 3.11+: this cancellation is consumed here
            raise RunCancelled(
                token.reason or "run cancelled",
                hint="re-issue the call with the same run_id to resume from the checkpoint",
            ) from None
        raise
    finally:
        inside = False
        unsubscribe()
