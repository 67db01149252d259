"""Plugins: bundles of tools, prompt text, per-turn view entries, hooks and guardrails.

A plugin never controls the loop. ``setup()`` runs once per run, and again each time a handoff
activates an agent carrying the plugin; per-run state lives in the returned instance, cross-run
state on the plugin object (which must then be safe for concurrent runs). ``aclose`` hooks are
awaited last-in first-out at run end, best effort.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..hooks import AgentHooks

if TYPE_CHECKING:
    from ..guardrails import Guardrail
    from ..run_context import RunContext
    from ..tools import Tool
    from ..transcript import TranscriptEntry

__all__ = ["Plugin", "PluginInstance", "ViewInjector", "setup_plugin"]

ViewInjector = Callable[["RunContext[Any]"], "list[TranscriptEntry] | None | Awaitable[list[TranscriptEntry] | None]"]
"""``(ctx) -> entries | None``: transient entries appended to each turn's view, never persisted."""


async def _no_close() -> None:
    return None


@dataclass
class PluginInstance:
    """What one plugin contributes to one run."""

    tools: list[Tool[Any]] = field(default_factory=list)
    instructions: str | None = None
    view_injectors: list[ViewInjector] = field(default_factory=list)
    hooks: AgentHooks | None = None
    input_guardrails: list[Guardrail] = field(default_factory=list)
    output_guardrails: list[Guardrail] = field(default_factory=list)
    aclose: Callable[[], Awaitable[None]] = _no_close


@runtime_checkable
class Plugin(Protocol):
    """A plugin: a unique ``name`` and an async ``setup()``."""

    name: str

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """Build the per-run instance; ``ctx`` is the run's context (deps, session id, mailbox...)."""
        ...


async def setup_plugin(plugin: Plugin, ctx: RunContext[Any] | None) -> PluginInstance:
    """Call ``plugin.setup``, passing ``ctx`` when the plugin's ``setup`` takes it.

    Both spellings are accepted: ``async def setup(self, ctx)`` and the older ``async def setup(self)``.
    """
    setup: Callable[..., Awaitable[PluginInstance]] = plugin.setup
    try:
        takes_ctx = bool(inspect.signature(setup).parameters)
    except (TypeError, ValueError):  # builtins or exotic callables: assume the documented form
        takes_ctx = True
    return await (setup(ctx) if takes_ctx else setup())
