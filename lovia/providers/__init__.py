"""Model providers: the protocol, the vendor adapters and the ``vendor:model`` registry."""

from __future__ import annotations

from .anthropic import AnthropicProvider
from .base import (
    ContextWindowDiscovery,
    ContextWindowProvider,
    ModelSettings,
    Provider,
    TokenEstimator,
    ToolDefinition,
    VisionCapable,
    supports_vision,
)
from .openai_chat import OpenAIChatProvider
from .registry import ProviderFactory, known_prefixes, model_from_env, provider_from_string, register_provider

__all__ = [
    "AnthropicProvider",
    "ContextWindowDiscovery",
    "ContextWindowProvider",
    "ModelSettings",
    "OpenAIChatProvider",
    "Provider",
    "ProviderFactory",
    "TokenEstimator",
    "ToolDefinition",
    "VisionCapable",
    "known_prefixes",
    "model_from_env",
    "provider_from_string",
    "register_provider",
    "supports_vision",
]
