"""Handoffs: transfer the conversation to another agent through a ``transfer_to_<slug>`` tool.

The swap happens after the turn's tools: only the leading system entry is replaced, the body is
kept. The first handoff in a turn wins; handoff tools are always barriers.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._agent_protocol import AgentLike
from .tools._tool import Tool

if TYPE_CHECKING:
    from .context.policy import ContextPolicy
    from .reliability import RetryPolicy, RunBudget
    from .run_context import RunContext

__all__ = ["HANDOFF_TOOL_PREFIX", "Handoff", "agent_as_tool", "build_handoff_tool", "handoff_tool", "slugify"]

HANDOFF_TOOL_PREFIX = "transfer_to_"
"""Handoff tools are named ``transfer_to_<slug of the target's name>`` unless given a name."""

OnHandoff = Callable[[dict[str, Any], "RunContext[Any]"], Any]


def slugify(name: str) -> str:
    """An ASCII identifier for ``name``; non-ASCII names get a digest suffix."""
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not name.isascii() or not slug:
        slug = f"{slug}_{hashlib.sha256(name.encode()).hexdigest()[:8]}".strip("_")
    return slug


MAX_TOOL_NAME = 64
"""Vendors refuse longer tool names."""


def generated_tool_name(prefix: str, agent_name: str) -> str:
    """``<prefix><slug of agent_name>``, at most 64 characters.

    A longer one is cut and ends in ``_`` plus a digest of the full agent name, so the name is
    stable across runs and agents whose long names share a start still get distinct tools.
    """
    full = f"{prefix}{slugify(agent_name)}"
    if len(full) <= MAX_TOOL_NAME:
        return full
    digest = hashlib.sha256(agent_name.encode()).hexdigest()[:10]
    return f"{full[: MAX_TOOL_NAME - len(digest) - 1]}_{digest}"


@dataclass(frozen=True, slots=True)
class Handoff:
    """A handoff target with optional tool name, description and callback ``on_handoff(args, ctx)``."""

    target: AgentLike
    """The agent to hand over to (a :class:`lovia.Agent`)."""
    name: str | None = None
    description: str | None = None
    on_handoff: OnHandoff | None = None

    @property
    def tool_name(self) -> str:
        """The tool the model calls to transfer (at most 64 characters, see :func:`generated_tool_name`)."""
        if self.name:
            return self.name[:MAX_TOOL_NAME]
        return generated_tool_name(HANDOFF_TOOL_PREFIX, self.target.name)


def handoff_tool(h: Handoff) -> Tool[Any]:
    """The tool that fires handoff ``h``; the loop applies the swap after the turn."""

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        if h.on_handoff is not None:
            out = h.on_handoff(args, ctx)
            if inspect.isawaitable(out):
                await out
        return f"Transferred to {h.target.name}."

    description = h.description or f"Hand the conversation over to the agent {h.target.name!r}."
    return Tool(
        name=h.tool_name,
        description=description,
        parameters={
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "Why the transfer is needed."}},
        },
        invoke=invoke,
        parallel=False,
        is_handoff=True,
    )


def build_handoff_tool(handoff: Handoff) -> Tool[Any]:
    """The tool the model calls to fire ``handoff`` (same as :func:`handoff_tool`)."""
    return handoff_tool(handoff)


def agent_as_tool(
    agent: AgentLike,
    *,
    name: str | None = None,
    description: str | None = None,
    max_turns: int = 50,
    budget: RunBudget | None = None,
    retry: RetryPolicy | None = None,
    context_policy: ContextPolicy | None = None,
) -> Tool[Any]:
    """``agent`` as a tool another agent calls with one ``input`` string (see :meth:`Agent.as_tool`)."""
    made: Tool[Any] = agent.as_tool(
        name=name,
        description=description,
        max_turns=max_turns,
        budget=budget,
        retry=retry,
        context_policy=context_policy,
    )
    return made
