"""Internal: what an agent brings to a run — its plugins and its merged tool set."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..handoff import handoff_tool
from ..plugins.base import Plugin, PluginInstance, setup_plugin
from ..tools import Tool

if TYPE_CHECKING:
    from ..agent import Agent
    from ..run_context import RunContext

__all__ = ["merge_tools", "setup_plugins"]


async def setup_plugins(agent: Agent[Any], ctx: RunContext[Any] | None = None) -> list[PluginInstance]:
    """Validate the agent's plugins (before any setup runs), then set each one up in order."""
    names = [getattr(p, "name", None) for p in agent.plugins]
    for plugin, name in zip(agent.plugins, names, strict=True):
        if not isinstance(plugin, Plugin) or not isinstance(name, str) or not name:
            raise UserError(
                f"agent {agent.name!r}: {plugin!r} is not a Plugin", hint="a plugin needs a name and async setup()"
            )
        if names.count(name) > 1:
            raise UserError(
                f"agent {agent.name!r} has two plugins named {name!r}", hint="plugin names must be unique per agent"
            )
    instances: list[PluginInstance] = []
    try:
        for plugin in agent.plugins:
            instances.append(await setup_plugin(plugin, ctx))
    except BaseException:
        for instance in reversed(instances):  # a later setup failed: undo the earlier ones
            with contextlib.suppress(Exception):
                await instance.aclose()
        raise
    return instances


def merge_tools(
    agent: Agent[Any], plugins: Sequence[PluginInstance], policy_tools: Sequence[Tool[Any]]
) -> dict[str, Tool[Any]]:
    """Agent tools, plugin tools and handoff tools by name (a clash is a ``UserError``).

    Context-policy tools such as ``recall_tool_result`` come last and silently yield to an
    explicit tool of the same name.
    """
    tools: dict[str, Tool[Any]] = {}
    sources: dict[str, str] = {}
    candidates: list[tuple[Tool[Any], str]] = [(t, "agent tools") for t in agent.tools]
    for plugin, instance in zip(agent.plugins, plugins, strict=True):
        candidates += [(t, f"plugin {plugin.name!r}") for t in instance.tools]
    candidates += [(handoff_tool(h), "handoffs") for h in agent.handoff_list]
    for tool, source in candidates:
        if tool.name in tools:
            raise UserError(
                f"tool name {tool.name!r} is defined twice (in {sources[tool.name]} and {source})"
                f" for agent {agent.name!r}",
                hint="rename one of them",
            )
        tools[tool.name] = tool
        sources[tool.name] = source
    for tool in policy_tools:
        tools.setdefault(tool.name, tool)
    return tools
