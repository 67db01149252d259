"""Internal: activating an agent — its provider, plugins, tools and output contract, frozen.

A run activates its entry agent (or the agent a checkpoint names) once, and every handoff target
when the handoff is applied. What activation resolves is an :class:`Active` value; the turn, the
tool phase and the view read it and never change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..agent import Agent
from ..exceptions import UserError
from ..output import OutputSpec
from ..plugins.base import PluginInstance
from ..providers.base import Provider, provider_model, provider_supports_json_schema
from ..providers.registry import as_provider, provider_from_string
from ..run_context import RunContext
from ..tools import Tool
from ..transcript import InputEntry
from .options import RunOptions
from .scope import RunScope
from .setup import merge_tools, setup_plugins

__all__ = ["Active", "activate", "system_entry"]


@dataclass(frozen=True, eq=False, slots=True)
class Active:
    """The active agent with everything it brings to a turn."""

    agent: Agent[Any]
    provider: Provider
    tools: dict[str, Tool[Any]]
    plugins: tuple[PluginInstance, ...]
    output: OutputSpec | None
    """``None`` for plain text answers."""
    native_output: bool
    """The provider enforces the output schema itself (no prompt contract needed)."""

    @property
    def model_key(self) -> str:
        """``"vendor:model"`` (just ``"vendor"`` when the provider names no model): the key of
        this provider's usage (see :mod:`lovia.usage`)."""
        model = provider_model(self.provider)
        return self.provider.name if model is None else f"{self.provider.name}:{model}"

    def response_format(self) -> dict[str, Any] | None:
        """The schema to ask the provider for, when it enforces it natively."""
        return self.output.response_format() if self.output is not None and self.native_output else None


async def activate(
    agent: Agent[Any], options: RunOptions, scope: RunScope, ctx: RunContext[Any] | None = None
) -> Active:
    """Resolve ``agent`` for a run: providers it builds and plugins it sets up belong to ``scope``.

    ``ctx`` is the run's context, handed to plugins whose ``setup`` takes it.
    """
    provider = _provider_for(agent, scope)
    plugins = await setup_plugins(agent, ctx)
    scope.closers.extend(instance.aclose for instance in plugins)
    policy_tools = getattr(options.context_policy, "tools", None)
    tools = merge_tools(agent, plugins, policy_tools() if callable(policy_tools) else [])
    output_type = options.output_type if options.output_type is not None else agent.output_type
    output = None if output_type is str else OutputSpec(output_type)
    native = bool(output and output.is_object and provider_supports_json_schema(provider))
    return Active(agent, provider, tools, tuple(plugins), output, native)


def _provider_for(agent: Agent[Any], scope: RunScope) -> Provider:
    model = agent.model
    if model is None:
        raise UserError(
            f"agent {agent.name!r} has no model",
            hint='set Agent(model="openai:gpt-4o-mini") or use lovia.model_from_env() with LOVIA_MODEL',
        )
    if not isinstance(model, str):
        return as_provider(model, agent_name=agent.name)
    provider = scope.providers.get(model)
    if provider is None:
        provider = provider_from_string(model)
        scope.providers[model] = provider
    return provider


async def system_entry(active: Active, ctx: RunContext[Any], extra_instructions: str | None) -> InputEntry:
    """Render the system prompt of the active agent (and remember it on the context)."""
    blocks = await active.agent.render_instructions(ctx)
    if extra_instructions:
        blocks.append(extra_instructions)
    blocks.extend(p.instructions for p in active.plugins if p.instructions)
    if active.output is not None and not active.native_output:
        blocks.append(active.output.prompt_contract())
    prompt = "\n\n".join(blocks)
    ctx.system_prompt = prompt
    return InputEntry(role="system", content=prompt)
