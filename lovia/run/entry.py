"""Internal: the seam between ``Agent``'s shortcuts and the runner.

``Agent`` is configuration: it sits below the run machinery and does not import it, not even for
annotations. Its shortcuts (``agent.run``, ``run_sync``, ``stream``, ``as_tool``) call the entry
points that :mod:`lovia.runner` installs here when it is imported; ``lovia/__init__`` imports the
runner, so any use of the package has them. This module imports nothing from the package: the
runner is described by the :class:`RunnerEntry` protocol, and ``Agent`` annotates what comes back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = ["AgentTool", "RunnerEntry", "agent_tool", "install", "runner"]

AgentTool = Callable[..., Any]
"""``agent_tool(agent, *, name, description, max_turns, budget, retry, context_policy) -> Tool``."""


class RunnerEntry(Protocol):
    """What ``Agent``'s shortcuts need from ``Runner`` (the class itself satisfies it)."""

    @staticmethod
    def run(*args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``Runner.run``: a coroutine resolving to a ``RunResult``."""
        ...

    @staticmethod
    def run_sync(*args: Any, **kwargs: Any) -> Any:
        """``Runner.run_sync``: returns a ``RunResult``."""
        ...

    @staticmethod
    def stream(*args: Any, **kwargs: Any) -> Any:
        """``Runner.stream``: returns a ``RunHandle``."""
        ...


_runner: RunnerEntry | None = None
_agent_tool: AgentTool | None = None


def install(runner_class: RunnerEntry, agent_tool_factory: AgentTool) -> None:
    """Called once by :mod:`lovia.runner` at import."""
    global _runner, _agent_tool
    _runner, _agent_tool = runner_class, agent_tool_factory


def runner() -> RunnerEntry:
    """The installed ``Runner``."""
    if _runner is None:  # only when lovia.agent is loaded without the package (never via import)
        raise RuntimeError("lovia.runner is not loaded; import lovia first")
    return _runner


def agent_tool() -> AgentTool:
    """The installed agent-as-tool factory."""
    if _agent_tool is None:
        raise RuntimeError("lovia.runner is not loaded; import lovia first")
    return _agent_tool
