"""Workspaces in ``lovia web``: the ``--workspace`` flags and one workspace session per chat.

A chat's agent is served with its workspace bound to a session that lives as long as the chat
(so a dev server started in one turn is still up at the next message); the session closes when
the chat is deleted or the server shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TYPE_CHECKING, Any

from ..agent import Agent
from ..exceptions import UserError

if TYPE_CHECKING:
    from ..workspace import LocalWorkspace
    from ..workspace.protocol import WorkspaceSession
    from ..workspace.workspace import WorkspaceSessionBinding

__all__ = ["DEFAULT_WORKSPACE_MODE", "WorkspaceSessions", "resolve_workspace", "with_workspace"]

DEFAULT_WORKSPACE_MODE = "coding"


def resolve_workspace(cli_dir: str | None, cli_mode: str | None, no_workspace: bool) -> LocalWorkspace | None:
    """The served agent's workspace from the CLI flags: ``None`` with ``--no-workspace``.

    Without ``--workspace`` the current folder is used; ``cli_mode`` is ``readonly``, ``coding``
    (the default) or ``trusted``.

    Raises:
        UserError: The folder does not exist, or the flags contradict each other.
    """
    if no_workspace:
        if cli_dir is not None or cli_mode is not None:
            raise UserError(
                "--no-workspace cannot be combined with --workspace, --readonly or --trusted", hint="pick one"
            )
        return None
    root = os.path.abspath(os.path.expanduser(cli_dir or "."))
    if not os.path.isdir(root):
        raise UserError(f"--workspace {cli_dir!r} is not a directory", hint="create it or pass an existing folder")
    from ..workspace import Workspace

    mode = cli_mode or DEFAULT_WORKSPACE_MODE
    if mode not in ("readonly", "coding", "trusted"):
        raise UserError(f"unknown workspace mode {mode!r}", hint="use --readonly or --trusted (default: coding)")
    return Workspace.local(root, mode=mode)  # type: ignore[arg-type]


def with_workspace(agent: Agent[Any], workspace: LocalWorkspace | None) -> Agent[Any]:
    """``agent`` with ``workspace`` attached, unless it already brings its own (or ``workspace`` is None)."""
    if workspace is None or agent.workspace is not None:
        return agent
    return agent.clone(workspace=workspace)


class WorkspaceSessions:
    """One live workspace session per chat, for agents whose workspace is a :class:`LocalWorkspace`."""

    def __init__(self) -> None:
        self._bindings: dict[str, WorkspaceSessionBinding] = {}

    def bind_now(self, session_id: str, agent: Agent[Any]) -> Agent[Any]:
        """Synchronous :meth:`bind` (the session itself opens at the run's first use)."""
        from ..workspace import LocalWorkspace
        from ..workspace.workspace import WorkspaceSessionBinding

        workspace = agent.workspace
        if isinstance(workspace, WorkspaceSessionBinding):
            return agent
        if not isinstance(workspace, LocalWorkspace):
            return agent
        binding = self._bindings.get(session_id)
        if binding is None or binding.workspace is not workspace or getattr(binding.live, "closed", False):
            binding = WorkspaceSessionBinding(workspace)  # opened by the first run, then kept for the chat
            self._bindings[session_id] = binding
        return agent.clone(workspace=binding)

    async def bind(self, session_id: str, agent: Agent[Any]) -> Agent[Any]:
        """``agent`` with its workspace bound to this chat's session (opened now if needed)."""
        from ..workspace.workspace import WorkspaceSessionBinding

        bound = self.bind_now(session_id, agent)
        if isinstance(bound.workspace, WorkspaceSessionBinding):
            await bound.workspace.open()
        return bound

    def get(self, session_id: str) -> WorkspaceSession | None:
        """The chat's live workspace session, if one was opened."""
        binding = self._bindings.get(session_id)
        return binding.live if binding is not None else None

    async def close(self, session_id: str) -> None:
        """Close the chat's session (its background processes die with it)."""
        binding = self._bindings.pop(session_id, None)
        if binding is not None and binding.live is not None:
            with contextlib.suppress(Exception):
                await binding.live.close()

    async def aclose(self) -> None:
        """Close every chat's session (server shutdown)."""
        ids = list(self._bindings)
        await asyncio.gather(*(self.close(i) for i in ids), return_exceptions=True)


def served_with_workspace(agents: Any, args: Any) -> Any:
    """What ``lovia web`` serves once the workspace flags are applied.

    The default agent (on ``LOVIA_MODEL``) gets a workspace on the current folder in ``coding``
    mode unless ``--no-workspace``; ``--app`` agents get one only when a workspace flag is given.
    The offline demo model is served as it is.
    """
    from .agents import default_agents, resolve_agents

    explicit = args.workspace is not None or args.workspace_mode is not None
    workspace = resolve_workspace(args.workspace, args.workspace_mode, args.no_workspace)
    if agents is None:
        chosen = default_agents()
        if chosen.demo or workspace is None:
            return None
        return {name: with_workspace(agent, workspace) for name, agent in chosen.agents.items()}
    if not explicit or workspace is None:
        return agents
    served = resolve_agents(agents)
    return {name: with_workspace(agent, workspace) for name, agent in served.agents.items()}
