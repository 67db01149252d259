"""Internal: how a run picks up ``Agent(workspace=...)`` (called by the run loop on activation).

The workspace joins the run like a plugin: its tools are merged (a name clash is a
``UserError``), its generated prompt section and per-turn reminder are added, its live session
becomes ``ctx.workspace``, and a session the run opened is closed when the run ends.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import UserError
from ..plugins import PluginInstance
from .protocol import WorkspaceLike


async def attach_workspace(loop: Any, agent: Any) -> None:
    """Open (or reuse) the agent's workspace session and add its bundle to ``loop``."""
    workspace = agent.workspace
    if workspace is None:
        loop.ctx.workspace = None
        return
    if not isinstance(workspace, WorkspaceLike):
        raise UserError(
            f"agent {agent.name!r}: workspace= takes a Workspace, got {type(workspace).__name__}",
            hint='Agent(workspace=Workspace.local(".", mode="coding"))',
        )
    opened: dict[int, Any] = loop.__dict__.setdefault("_lovia_workspaces", {})
    session = opened.get(id(workspace))
    if session is None:
        session = await workspace.open()
        opened[id(workspace)] = session
        if workspace.close_after_run:
            loop._closers.append(session.close)
    loop.ctx.workspace = session
    for t in workspace.tools():
        if t.name in loop.tools:
            raise UserError(
                f"tool name {t.name!r} is defined twice (in the workspace and elsewhere) for agent {agent.name!r}",
                hint="rename your tool: the workspace bundle owns read_file, write_file, shell and friends",
            )
        loop.tools[t.name] = t
    loop.plugins.append(
        PluginInstance(instructions=workspace.instructions(), view_injectors=list(workspace.view_injectors()))
    )
