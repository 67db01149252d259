"""Which agents the web app serves: ``--app module:attr``, the configured model, or the offline demo."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..agent import Agent
from ..exceptions import UserError
from ..providers import model_from_env
from .demo_model import DEMO_AGENT_NAME, clock, demo_agent
from .html import show_html

__all__ = ["AgentSet", "default_agents", "load_app", "resolve_agents"]

_INSTRUCTIONS = "You are a helpful assistant. Answer in Markdown when formatting helps; keep answers concise."


@dataclass(frozen=True, slots=True)
class AgentSet:
    """The served agents, the default one, and whether a real model is configured."""

    agents: dict[str, Agent[Any]]
    default: str
    configured: bool

    @property
    def demo(self) -> bool:
        """True when only the offline demo model is served."""
        return not self.configured


def load_app(spec: str) -> Any:
    """Import ``module:attr`` (the current directory is importable) and return the attribute."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"--app {spec!r} is not 'module:attr'", hint="e.g. --app myagents:agent")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(
            f"cannot import {module_name!r} for --app: {exc}", hint="run from the folder that contains it"
        ) from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise UserError(
                f"{module_name!r} has no attribute {attr!r}", hint="point --app at an Agent or a dict of agents"
            )
        target = getattr(target, part)
    return target


def resolve_agents(obj: Agent[Any] | Mapping[str, Agent[Any]]) -> AgentSet:
    """Normalise an agent or a ``{name: agent}`` mapping (the first entry is the default)."""
    if isinstance(obj, Agent):
        return AgentSet({obj.name: obj}, obj.name, True)
    if isinstance(obj, Mapping) and obj and all(isinstance(a, Agent) for a in obj.values()):
        agents = {str(k): v for k, v in obj.items()}
        return AgentSet(agents, next(iter(agents)), True)
    raise UserError(
        f"cannot serve {type(obj).__name__}: expected an Agent or a non-empty dict of agents",
        hint="e.g. agent = Agent(name='assistant', model='openai:gpt-4.1-mini')",
    )


def default_agents() -> AgentSet:
    """An assistant on ``LOVIA_MODEL``, or the offline demo model when no model is configured."""
    model = model_from_env(required=False)
    if model:
        agent: Agent[Any] = Agent(name="assistant", instructions=_INSTRUCTIONS, model=model, tools=[clock, show_html])
        return AgentSet({agent.name: agent}, agent.name, True)
    return AgentSet({DEMO_AGENT_NAME: demo_agent()}, DEMO_AGENT_NAME, False)
