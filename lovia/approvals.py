"""Approvals for gated tool calls; they fail closed.

Decision order per gated call: (1) the stream consumer calls ``ApprovalRequired.approve()`` /
``reject()`` before asking for the next event, or later through ``handle.approvals`` once it has
opted in by touching that channel; (2) ``Agent.approval_handler`` answers allow / deny / "ask";
(3) nobody decided: deny. Handler and predicate errors deny. Decisions are not persisted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from .messages import ToolCall

__all__ = ["ApprovalChannel", "ApprovalDecision", "ApprovalHandler"]

ApprovalDecision = bool | str
ApprovalHandler = Callable[..., "ApprovalDecision | Awaitable[ApprovalDecision]"]
"""``(call: ToolCall, ctx) -> True/"allow" | False/"deny" | "ask"`` (sync or async)."""


class ApprovalChannel:
    """Out-of-band decisions for pending approvals, by ``call_id`` within an optional ``scope``.

    A scope keeps calls of different runs apart when one channel serves several of them (a server
    keying by session id, say), so equal call ids never collide. Every method takes ``scope=``;
    ``None`` is the default scope, the one a run's own ``handle.approvals`` uses.
    """

    def __init__(self) -> None:
        self._pending: dict[tuple[str | None, str], tuple[ToolCall | None, asyncio.Future[bool]]] = {}
        self.opted_in = False
        """True once a consumer has touched the channel: pending calls then wait for it."""

    def register(
        self, call_id: ToolCall | str, future: asyncio.Future[bool] | None = None, *, scope: str | None = None
    ) -> asyncio.Future[bool]:
        """Track a pending call and return the future its decision settles.

        Give a ``call_id`` (a new future is made on the running event loop), or a ``ToolCall``
        plus the future to settle (how the run loop registers its own calls).
        """
        call_obj = call_id if isinstance(call_id, ToolCall) else None
        key_id = call_id.id if isinstance(call_id, ToolCall) else call_id
        fut = future if future is not None else asyncio.get_running_loop().create_future()
        key = (scope, key_id)
        self._pending[key] = (call_obj, fut)

        def forget(done: asyncio.Future[bool]) -> None:
            entry = self._pending.get(key)
            if entry is not None and entry[1] is done:
                del self._pending[key]

        fut.add_done_callback(forget)
        return fut

    @property
    def pending(self) -> list[ToolCall]:
        """Calls waiting for a decision, in request order (those registered with their ``ToolCall``)."""
        return [call for call, _ in self._pending.values() if call is not None]

    def pending_ids(self, *, scope: str | None = None) -> list[str]:
        """Call ids waiting for a decision in ``scope``, in request order."""
        return [call_id for (s, call_id) in self._pending if s == scope]

    def is_pending(self, call_id: str, *, scope: str | None = None) -> bool:
        """Whether ``call_id`` waits for a decision in ``scope``."""
        return (scope, call_id) in self._pending

    def resolve(self, call_id: str, decision: bool, *, scope: str | None = None) -> bool:
        """Decide one call; False if it was not pending in ``scope``."""
        entry = self._pending.get((scope, call_id))
        if entry is None:
            return False
        future = entry[1]
        if not future.done():
            future.get_loop().call_soon_threadsafe(_settle, future, decision)
        return True

    def approve(self, call_id: str, *, scope: str | None = None) -> bool:
        """Allow a pending call (False if it was not pending)."""
        return self.resolve(call_id, True, scope=scope)

    def reject(self, call_id: str, *, scope: str | None = None) -> bool:
        """Deny a pending call (False if it was not pending)."""
        return self.resolve(call_id, False, scope=scope)

    def release(self, decision: bool = False, *, scope: str | None = None) -> int:
        """Decide every pending call of ``scope`` at once (deny by default); returns how many."""
        ids = self.pending_ids(scope=scope)
        for call_id in ids:
            self.resolve(call_id, decision, scope=scope)
        return len(ids)

    def discard(self, call_id: str, *, scope: str | None = None) -> None:
        """Stop waiting for a decision on one call; it is denied (approvals fail closed)."""
        self.resolve(call_id, False, scope=scope)


def _settle(future: asyncio.Future[bool], decision: bool) -> None:
    if not future.done():
        future.set_result(decision)
