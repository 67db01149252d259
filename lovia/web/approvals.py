"""Approvals for a server's own stream loop: gated calls wait, keyed by chat, until a route decides.

The bundled server resolves approvals through each live run's ``handle.approvals``. An app that
drives :meth:`Runner.stream <lovia.Runner.stream>` itself (its own SSE route, a WebSocket, a queue
worker) needs the same thing across requests: the loop that sees an
:class:`~lovia.events.ApprovalRequired` waits, and another request answers it by chat id and call
id. :class:`ApprovalRegistry` is that meeting point::

    registry = ApprovalRegistry()

    async for event in Runner.stream(agent, message, session=session):   # in the chat's stream route
        if isinstance(event, events.ApprovalRequired):
            await registry.await_decision(session_id, event)              # sends nothing; just waits

    await registry.resolve(session_id, call_id, True)                     # in POST /approve

Decisions fail closed: a wait that is cancelled (the client left, the run was stopped) denies the
call, and so do :meth:`ApprovalRegistry.release` and :meth:`ApprovalRegistry.deny_pending`. The
registry lives in one process's memory; equal call ids of different chats never collide.
"""

from __future__ import annotations

import asyncio

from ..approvals import ApprovalChannel
from ..events import ApprovalRequired

__all__ = ["ApprovalRegistry"]


class ApprovalRegistry:
    """Pending approvals of many chats, each decided by ``(session_id, call_id)``."""

    def __init__(self) -> None:
        self._channel = ApprovalChannel()

    async def await_decision(self, session_id: str, ev: ApprovalRequired) -> bool:
        """Wait until the call of ``ev`` is decided for chat ``session_id``; returns the decision.

        The decision is also given to ``ev`` (approve or reject), so the run that emitted it goes on
        as soon as this returns. Cancelling the wait denies the call before the cancellation
        propagates.
        """
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._channel.register(ev.call, future, scope=session_id)
        try:
            decision = await future
        except asyncio.CancelledError:
            ev.reject()
            raise
        finally:
            # A cancelled wait leaves the future pending: settle it so the call leaves the registry.
            if not future.done():
                future.cancel()
        if decision:
            ev.approve()
        else:
            ev.reject()
        return decision

    async def resolve(self, session_id: str, call_id: str, decision: bool) -> bool:
        """Approve (``True``) or deny (``False``) one pending call; ``False`` if it is not pending."""
        return self._channel.resolve(call_id, decision, scope=session_id)

    async def release(self, session_id: str) -> None:
        """Deny every call chat ``session_id`` still waits on (its run ends, its client left)."""
        self.deny_pending(session_id)

    def deny_pending(self, session_id: str) -> None:
        """Deny every call chat ``session_id`` still waits on, without awaiting (safe in callbacks)."""
        self._channel.release(False, scope=session_id)

    def pending(self, session_id: str) -> list[str]:
        """The call ids chat ``session_id`` waits on, in request order."""
        return self._channel.pending_ids(scope=session_id)
