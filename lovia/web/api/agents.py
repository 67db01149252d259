"""The server and its agents: ``GET /api/info``, ``GET /api/agents`` and ``GET /api/agents/{name}``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...agent import Agent
from ...handoff import Handoff
from ...providers.base import provider_model
from ..errors import ApiRoute, WebError
from ..schemas import AgentInfo, ServerInfo
from .deps import RouterDeps
from .memory import memory_plugin
from .workspace import workspace_cfg

__all__ = ["agent_info", "build_agents_router", "model_name", "resolve_context_window"]


def model_name(agent: Agent[Any]) -> str | None:
    """The agent's model as a string: the string it was given (``vendor:model``), or a provider
    instance's own ``.model`` (``None`` for one that names no model, as ``ScriptedProvider`` by default)."""
    model = agent.model
    if model is None or isinstance(model, str):
        return model
    return provider_model(model)


def resolve_context_window(agent: Agent[Any], server_policy: Any) -> int | None:
    """The context window (tokens) ``agent``'s runs work within on this server, when it is known
    without asking the endpoint.

    The policy in force names it first: ``server_policy`` (``RouterDeps.context_policy``) when
    the server sets one, else the agent's own ``context_policy`` (a ``Compaction(context_window=...)``).
    Otherwise the agent's provider instance tells; a model named by a string does not.
    """
    policy = server_policy if server_policy is not None else agent.context_policy
    window = getattr(policy, "context_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    from ...providers.base import context_window

    return context_window(agent.model) if agent.model is not None else None


def agent_info(name: str, agent: Agent[Any], *, context_window: int | None = None) -> AgentInfo:
    """What a client may know about the agent served as ``name`` (never its provider's keys).

    ``context_window`` is the window to report (see :func:`resolve_context_window`).
    """
    from ...plugins.memory import Memory

    return AgentInfo(
        name=name,
        instructions=agent.instructions if isinstance(agent.instructions, str) else None,
        tools=[t.name for t in agent.tools],
        workspace=agent.workspace is not None,
        memory=any(isinstance(p, Memory) for p in agent.plugins or []),  # the /api/memory routes work
        context_window=context_window,
        model=model_name(agent),
    )


def _detail(agent: Agent[Any]) -> dict[str, Any]:
    """What ``GET /api/agents/{name}`` adds to :func:`agent_info`: tools in full, handoffs, output type."""
    return {
        "dynamic_instructions": not isinstance(agent.instructions, str) or bool(agent._fragments),
        "tool_details": [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "needs_approval": bool(t.needs_approval),
            }
            for t in agent.tools
        ],
        "handoffs": [h.target.name if isinstance(h, Handoff) else h.name for h in agent.handoffs],
        "output_type": getattr(agent.output_type, "__name__", str(agent.output_type)),
        "context_policy": type(agent.context_policy).__name__,
    }


def build_agents_router(deps: RouterDeps) -> APIRouter:
    """``GET /api/info``, ``GET /api/agents`` and ``GET /api/agents/{name}`` bound to ``deps``."""
    router = APIRouter(prefix="/api", route_class=ApiRoute)

    def infos() -> list[AgentInfo]:
        return [
            agent_info(name, agent, context_window=resolve_context_window(agent, deps.context_policy))
            for name, agent in deps.agents.items()
        ]

    @router.get("/info", response_model=ServerInfo)
    async def info() -> ServerInfo:
        from ... import __version__

        return ServerInfo(
            title=deps.title,
            version=__version__,
            agents=list(deps.agents),  # names; GET /api/agents describes them
            default_agent=deps.default_agent if len(deps.agents) == 1 else None,  # several: the client picks
            configured=deps.configured,
            demo=deps.demo,
            features={
                "checkpointing": True,  # every ChatStore keeps a checkpoint per live run
                "titles": deps.titles,
                "followups": deps.followups is not False,
                "scheduling": True,
                "memory": any(memory_plugin(a) is not None for a in deps.agents.values()),
                "rewind": deps.store.supports_rewind,
                "stop": True,
                "approvals": True,
                "inject": True,
                "pin": True,
                "events": True,
                "workspace": any(workspace_cfg(a) is not None for a in deps.agents.values()),
                "model_config": deps.config_runtime is not None,
            },
        )

    @router.get("/agents")
    async def agents() -> list[dict[str, Any]]:
        return [a.model_dump() for a in infos()]

    @router.get("/agents/{name}")
    async def agent(name: str) -> dict[str, Any]:
        found = deps.agents.get(name)
        if found is None:
            raise WebError(
                404, "agent_not_found", f"no agent {name!r}", hint=f"agents: {', '.join(sorted(deps.agents))}"
            )
        window = resolve_context_window(found, deps.context_policy)
        return {**agent_info(name, found, context_window=window).model_dump(), **_detail(found)}

    return router
