"""``AgentLike``: how the run's own types (context, result, events, handoffs) refer to an agent.

:class:`lovia.Agent` is built from those types (its tools receive a ``RunContext``, its handoffs
are ``Handoff`` values), and they hand the agent back (``RunContext.agent``,
``RunResult.final_agent``, ``Handoff.target``, the event fields). Annotating them with the class
itself would make the two sides import each other, if only for type checking; this protocol
sits below both and imports nothing above the provider interface. At run time the value is
always a :class:`lovia.Agent`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .providers.base import ModelSettings, Provider
from .reliability import RetryPolicy

__all__ = ["AgentLike", "Instructions"]

Instructions = str | Callable[[Any], "str | Awaitable[str]"]
"""A system prompt: a string, or a sync/async callable ``(ctx) -> str`` rendered on every turn."""


class AgentLike(Protocol):
    """What the run's types read of an agent (every :class:`lovia.Agent` has it).

    Code that needs the rest of the agent (tools, handoffs, context policy, hooks) holds the
    :class:`lovia.Agent` itself; ``isinstance(ctx.agent, Agent)`` narrows to it.
    """

    @property
    def name(self) -> str:
        """The agent's unique name in its handoff graph."""
        ...

    @property
    def instructions(self) -> Instructions:
        """The agent's own instructions (without the fragments added by ``@agent.instruction``)."""
        ...

    @property
    def model(self) -> str | Provider | None:
        """A ``"vendor:model"`` string, a provider, or ``None`` for the run's default."""
        ...

    @property
    def output_type(self) -> Any:
        """The type the final output is validated against (``str``: plain text)."""
        ...

    @property
    def settings(self) -> ModelSettings:
        """Sampling settings sent with every model call."""
        ...

    @property
    def retry(self) -> RetryPolicy | None:
        """The retry policy of the agent's model calls."""
        ...

    @property
    def workspace(self) -> Any:
        """The agent's workspace, if it has one."""
        ...
