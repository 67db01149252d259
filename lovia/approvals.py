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
    """Out-of-band decisions for a run's pending approvals, by ``call_id``."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[ToolCall, asyncio.Future[bool]]] = {}
        self.opted_in = False
        """True once a consumer has touched the channel: pending calls then wait for it."""

    def register(self, call: ToolCall, future: asyncio.Future[bool]) -> None:
        """Track a pending call (used by the loop)."""
        self._pending[call.id] = (call, future)

        def forget(_f: asyncio.Future[bool]) -> None:
            self._pending.pop(call.id, None)

        future.add_done_callback(forget)

    @property
    def pending(self) -> list[ToolCall]:
        """Calls waiting for a decision, in request order."""
        return [call for call, _ in self._pending.values()]

    def is_pending(self, call_id: str) -> bool:
        """Whether ``call_id`` waits for a decision."""
        return call_id in self._pending

    def resolve(self, call_id: str, decision: bool) -> bool:
        """Decide one call; False if it was not pending."""
        entry = self._pending.get(call_id)
        if entry is None:
            return False
        future = entry[1]
        if not future.done():
            future.get_loop().call_soon_threadsafe(_settle, future, decision)
        return True

    def approve(self, call_id: str) -> bool:
        """Allow a pending call."""
        return self.resolve(call_id, True)

    def reject(self, call_id: str) -> bool:
        """Deny a pending call."""
        return self.resolve(call_id, False)

    def release(self, decision: bool = False) -> int:
        """Decide every pending call at once (deny by default); returns how many."""
        ids = list(self._pending)
        for call_id in ids:
            self.resolve(call_id, decision)
        return len(ids)

    def discard(self, call_id: str) -> None:
        """Stop tracking a call without deciding it (it is denied)."""
        self.resolve(call_id, False)


def _settle(future: asyncio.Future[bool], decision: bool) -> None:
    if not future.done():
        future.set_result(decision)
