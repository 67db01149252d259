"""``AgentHooks``: react to run events with plain functions (sync or async).

Handlers receive ``(event, ctx)`` with the very objects the stream yields. Dispatch happens at one
point in emission order; catch-all handlers run first, then typed ones in registration order.
A failing handler is logged (a warning with its traceback) and skipped (fail-open): observers never break a run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .events import Event

if TYPE_CHECKING:
    from .run_context import RunContext

__all__ = ["E", "AgentHooks", "Handler", "HookHandler", "dispatch"]

logger = logging.getLogger("lovia")

Handler = Callable[[Any, "RunContext[Any]"], Any]
"""``(event, ctx) -> None`` or an awaitable."""
HookHandler = Handler

E = TypeVar("E", bound=Event)
"""An event type, for typing handlers registered with :meth:`AgentHooks.on`."""


class AgentHooks:
    """A registry of event handlers attached to an agent (``Agent(hooks=...)``)."""

    def __init__(self) -> None:
        self._any: list[Handler] = []
        self._typed: list[tuple[tuple[type[Event], ...], Handler]] = []

    def on(self, event_type: type[Event] | tuple[type[Event], ...]) -> Callable[[Handler], Handler]:
        """Register a handler for an event class (base classes catch whole families)."""
        types = event_type if isinstance(event_type, tuple) else (event_type,)

        def register(fn: Handler) -> Handler:
            self._typed.append((types, fn))
            return fn

        return register

    def on_any(self, fn: Handler) -> Handler:
        """Register a handler for every event."""
        self._any.append(fn)
        return fn

    def handlers_for(self, event: Event) -> list[Handler]:
        """The handlers that match ``event``, in dispatch order."""
        return [*self._any, *(fn for types, fn in self._typed if isinstance(event, types))]

    async def dispatch(self, event: Event, ctx: RunContext[Any]) -> None:
        """Call every matching handler; failures are logged, never raised."""
        for fn in self.handlers_for(event):
            try:
                out = fn(event, ctx)
                if inspect.isawaitable(out):
                    await out
            except Exception:
                logger.warning(
                    "hook %s failed on %s (ignored)",
                    getattr(fn, "__name__", fn),
                    type(event).__name__,
                    exc_info=True,
                )


async def dispatch(hooks: AgentHooks | None, event: Event, ctx: RunContext[Any]) -> None:
    """Dispatch ``event`` to ``hooks`` when there are any (failures are logged, never raised)."""
    if hooks is not None:
        await hooks.dispatch(event, ctx)
