"""Model providers: the protocol, the vendor adapters and the ``vendor:model`` registry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
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

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .failover import FailoverProvider
    from .gemini import GeminiProvider
    from .openai_chat import OpenAIChatProvider
    from .openai_responses import OpenAIResponsesProvider
    from .registry import ProviderFactory, known_prefixes, model_from_env, provider_from_string, register_provider

_LAZY = {
    "AnthropicProvider": ".anthropic",
    "FailoverProvider": ".failover",
    "GeminiProvider": ".gemini",
    "OpenAIChatProvider": ".openai_chat",
    "OpenAIResponsesProvider": ".openai_responses",
    "ProviderFactory": ".registry",
    "known_prefixes": ".registry",
    "model_from_env": ".registry",
    "provider_from_string": ".registry",
    "register_provider": ".registry",
}

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

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
