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
from .failover import FailoverProvider
from .gemini import GeminiProvider
from .openai_chat import OpenAIChatProvider
from .openai_responses import OpenAIResponsesProvider
from .registry import ProviderFactory, known_prefixes, model_from_env, provider_from_string, register_provider

__all__ = [
    "AnthropicProvider",
    "ContextWindowDiscovery",
    "ContextWindowProvider",
    "FailoverProvider",
    "GeminiProvider",
    "ModelSettings",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
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
