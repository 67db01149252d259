"""Internal: the seam between ``Agent``'s shortcuts and the runner.

``Agent`` is configuration: it sits below the run machinery and does not import it. Its
shortcuts (``agent.run``, ``run_sync``, ``stream``, ``as_tool``) call the entry points that
:mod:`lovia.runner` installs here when it is imported; ``lovia/__init__`` imports the runner, so
any use of the package has them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runner import Runner
    from ..tools import Tool

__all__ = ["AgentTool", "agent_tool", "install", "runner"]

AgentTool = Callable[..., "Tool[Any]"]
"""``agent_tool(agent, *, name, description, max_turns, budget, retry, context_policy) -> Tool``."""

_runner: type[Runner] | None = None
_agent_tool: AgentTool | None = None


def install(runner_class: type[Runner], agent_tool_factory: AgentTool) -> None:
    """Called once by :mod:`lovia.runner` at import."""
    global _runner, _agent_tool
    _runner, _agent_tool = runner_class, agent_tool_factory


def runner() -> type[Runner]:
    """The installed ``Runner``."""
    if _runner is None:  # only when lovia.agent is loaded without the package (never via import)
        raise RuntimeError("lovia.runner is not loaded; import lovia first")
    return _runner


def agent_tool() -> AgentTool:
    """The installed agent-as-tool factory."""
    if _agent_tool is None:
        raise RuntimeError("lovia.runner is not loaded; import lovia first")
    return _agent_tool
