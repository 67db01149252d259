"""Internal: how a run picks up ``Agent(workspace=...)`` (called by the run loop on activation).

The workspace joins the run like a plugin: its tools are merged (a name clash is a
``UserError``), its generated prompt section and per-turn reminder are added, its live session
becomes ``ctx.workspace``, and a session the run opened is closed when the run ends. A handoff
back to an agent reuses the session this run already opened for its workspace.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..exceptions import UserError
from ..plugins.base import PluginInstance
from ..providers.base import supports_vision
from .protocol import WorkspaceLike, WorkspaceSession

__all__ = ["attach_workspace", "with_workspace"]

A = TypeVar("A")
Closer = Callable[[], Awaitable[None]]

_OPENED: weakref.WeakKeyDictionary[Any, dict[int, WorkspaceSession]] = weakref.WeakKeyDictionary()


async def _bundle(
    agent: Any, ctx: Any, closers: list[Closer], taken: set[str] | dict[str, Any]
) -> tuple[WorkspaceSession, list[Any], PluginInstance] | None:
    """Open (or reuse) the session and build what the workspace adds; ``None`` without a workspace."""
    workspace = agent.workspace
    if workspace is None:
        ctx.workspace = None
        return None
    if not isinstance(workspace, WorkspaceLike):
        raise UserError(
            f"agent {agent.name!r}: workspace= takes a Workspace, got {type(workspace).__name__}",
            hint='Agent(workspace=Workspace.local(".", mode="coding"))',
        )
    opened = _OPENED.setdefault(ctx, {})
    session = opened.get(id(workspace))
    if session is None:
        session = await workspace.open()
        opened[id(workspace)] = session
        if workspace.close_after_run:
            closers.append(session.close)
    ctx.workspace = session
    tools = workspace.tools()
    if not supports_vision(getattr(agent, "model", None)):  # a text-only model cannot look at images
        tools = [t for t in tools if t.name != "view_image"]
    for t in tools:
        if t.name in taken:
            raise UserError(
                f"tool name {t.name!r} is defined twice (in the workspace and elsewhere) for agent {agent.name!r}",
                hint="rename your tool: the workspace bundle owns read_file, write_file, shell and friends",
            )
    extra = PluginInstance(instructions=workspace.instructions(), view_injectors=list(workspace.view_injectors()))
    return session, tools, extra


async def attach_workspace(loop: Any, agent: Any) -> None:
    """Add the agent's workspace bundle to a loop holding mutable ``tools`` / ``plugins`` / ``_closers``."""
    bundle = await _bundle(agent, loop.ctx, loop._closers, loop.tools)
    if bundle is None:
        return
    _, tools, extra = bundle
    loop.tools.update({t.name: t for t in tools})
    loop.plugins.append(extra)


async def with_workspace(active: A, ctx: Any, closers: list[Closer]) -> A:
    """A copy of a frozen activation (fields ``agent``, ``tools``, ``plugins``) with the workspace added."""
    agent: Any = getattr(active, "agent")  # noqa: B009 - any activation shape with these fields
    tools: dict[str, Any] = getattr(active, "tools")  # noqa: B009
    bundle = await _bundle(agent, ctx, closers, tools)
    if bundle is None:
        return active
    _, extra_tools, extra = bundle
    merged = {**tools, **{t.name: t for t in extra_tools}}
    plugins = (*getattr(active, "plugins"), extra)  # noqa: B009
    return dataclasses.replace(active, tools=merged, plugins=plugins)  # type: ignore[type-var]
