"""Info routes: ``/api/info`` and agent introspection."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from ..agent import Agent
from ..handoff import Handoff
from .errors import ApiRoute, WebError
from .routes_workspace import has_workspace

if TYPE_CHECKING:
    from .state import WebState

__all__ = ["agent_info", "info_router", "model_name"]


def model_name(agent: Agent[Any]) -> str | None:
    """The agent's model as a string (``vendor:model`` for a provider instance)."""
    model = agent.model
    if model is None or isinstance(model, str):
        return model
    return f"{model.name}:{model.model}"


def agent_info(agent: Agent[Any], *, detail: bool = False) -> dict[str, Any]:
    """What the page and API clients may know about an agent (never its provider's keys)."""
    from ..plugins.memory import Memory
    from ..providers.base import context_window

    info: dict[str, Any] = {
        "name": agent.name,
        "model": model_name(agent),
        "tools": [t.name for t in agent.tools],
        "memory": any(isinstance(p, Memory) for p in agent.plugins or []),  # the /api/memory routes work
        "workspace": agent.workspace is not None,
        "instructions": agent.instructions if isinstance(agent.instructions, str) else None,
        "context_window": context_window(agent.model) if agent.model is not None else None,
    }
    if detail:
        info.update(
            dynamic_instructions=not isinstance(agent.instructions, str) or bool(agent._fragments),
            tool_details=[
                {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "needs_approval": bool(t.needs_approval),
                }
                for t in agent.tools
            ],
            handoffs=[h.target.name if isinstance(h, Handoff) else h.name for h in agent.handoffs],
            output_type=getattr(agent.output_type, "__name__", str(agent.output_type)),
            context_policy=type(agent.context_policy).__name__,
        )
    return info


def info_router(state: WebState) -> APIRouter:
    """``/api/info``, ``/api/agents`` and ``/api/agents/{name}`` (``/api/events``: :mod:`lovia.web.api.events`)."""
    router = APIRouter(prefix="/api", route_class=ApiRoute)

    @router.get("/info")
    async def info() -> dict[str, Any]:
        from .. import __version__

        return {
            "title": state.title,
            "version": __version__,
            "agents": [agent_info(a) for a in state.agents.values()],
            "default_agent": state.default_agent,
            "configured": state.configured,
            "demo": state.demo,
            "features": {
                "rewind": state.store.supports_rewind,
                "stop": True,
                "approvals": True,
                "inject": True,
                "pin": True,
                "events": True,
                "workspace": any(has_workspace(a) for a in state.agents.values()),
                "model_config": getattr(state, "config_runtime", None) is not None,
            },
        }

    @router.get("/agents")
    async def agents() -> dict[str, Any]:
        return {"agents": [agent_info(a) for a in state.agents.values()], "default_agent": state.default_agent}

    @router.get("/agents/{name}")
    async def agent(name: str) -> dict[str, Any]:
        found = state.agents.get(name)
        if found is None:
            raise WebError(
                404, "agent_not_found", f"no agent {name!r}", hint=f"agents: {', '.join(sorted(state.agents))}"
            )
        return agent_info(found, detail=True)

    return router
