"""Internal: ``RunScope``, what a run opened and must close — plugin instances and providers."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..providers.base import Provider

__all__ = ["RunScope"]

logger = logging.getLogger("lovia")


@dataclass(eq=False, slots=True)
class RunScope:
    """Resources a run owns; :meth:`aclose` releases them in reverse order, best effort."""

    providers: dict[str, Provider] = field(default_factory=dict)
    """Providers built from model strings, one per string, reused across handoffs."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Plugin instances' ``aclose``, in setup order."""

    async def aclose(self) -> None:
        """Close plugins (newest first), then the providers this run built."""
        for close in reversed(self.closers):
            try:
                await close()
            except Exception:
                logger.exception("plugin aclose failed (ignored)")
        for provider in self.providers.values():
            provider_close = getattr(provider, "aclose", None)
            if callable(provider_close):
                with contextlib.suppress(Exception):
                    await provider_close()
