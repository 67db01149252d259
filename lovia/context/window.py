"""Context-window resolution: explicit setting, overflow report, then the provider.

Order: an explicit ``context_window``; the window named by an overflow error (it may only lower
an explicit value); the provider's ``context_window()``; its ``discover_context_window()`` probe
(memoized per endpoint and model for the life of the process); otherwise unknown.
"""

from __future__ import annotations

import asyncio
import logging

__all__ = ["resolve_window"]

logger = logging.getLogger("lovia.context")

_DISCOVERED: dict[tuple[str, str, str], int | None] = {}


def _probe_key(provider: object) -> tuple[str, str, str]:
    return (
        str(getattr(provider, "name", type(provider).__name__)),
        str(getattr(provider, "base_url", "")),
        str(getattr(provider, "model", "")),
    )


async def _discover(provider: object) -> int | None:
    probe = getattr(provider, "discover_context_window", None)
    if not callable(probe):
        return None
    key = _probe_key(provider)
    if key in _DISCOVERED:
        return _DISCOVERED[key]
    try:
        value = await probe()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        logger.info("context window discovery failed for %s: %s", key, exc)
        value = None
    found = value if isinstance(value, int) and value > 0 else None
    _DISCOVERED[key] = found
    return found


async def resolve_window(explicit: int | None, reported: int | None, provider: object) -> int | None:
    """The window to plan against, or ``None`` when nothing knows it."""
    if explicit is not None:
        return min(explicit, reported) if reported else explicit
    if reported:
        return reported
    if provider is None:
        return None
    static = getattr(provider, "context_window", None)
    if callable(static):
        try:
            value = static()
        except Exception:
            value = None
        if isinstance(value, int) and value > 0:
            return value
    return await _discover(provider)
