"""The provider seam: one streaming method, typed deltas, and the sampling settings.

Internal contract: a provider turns a view of the transcript into a stream of
:data:`~lovia.transcript.ModelDelta`. It never sees the run loop and never raises vendor or
driver exceptions raw: failures become :class:`~lovia.exceptions.ProviderError` or
:class:`~lovia.exceptions.ContextOverflowError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..transcript import ModelDelta, TranscriptEntry

__all__ = [
    "ContextWindowDiscovery",
    "ContextWindowProvider",
    "ModelSettings",
    "Provider",
    "TokenEstimator",
    "ToolDefinition",
    "VisionCapable",
    "context_window",
    "discover_context_window",
    "is_provider",
    "provider_model",
    "provider_options",
    "provider_supports_json_schema",
    "request_extras",
    "supports_vision",
]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Sampling knobs; ``None`` means "not sent".

    ``provider_options`` is keyed by vendor (``"openai"``/``"openai-chat"``,
    ``"anthropic"``/``"claude"``) and merged verbatim into the request payload; a ``None``
    value deletes a field the adapter would otherwise send.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    parallel_tool_calls: bool | None = None
    provider_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def options_for(self, *vendor_keys: str) -> dict[str, Any]:
        """The merged ``provider_options`` for these vendor keys (later keys win)."""
        merged: dict[str, Any] = {}
        for key in vendor_keys:
            merged.update(self.provider_options.get(key) or {})
        return merged


def provider_options(settings: ModelSettings | None, *keys: str) -> dict[str, Any]:
    """The merged ``provider_options`` of ``settings`` for these vendor keys (later keys win)."""
    return settings.options_for(*keys) if settings is not None else {}


def request_extras(connection: dict[str, Any] | None, settings: ModelSettings | None, *keys: str) -> dict[str, Any]:
    """The raw request fields for one call: the provider's ``extra_body``, then ``provider_options``.

    Top-level keys only, later layers winning (a nested object replaces the earlier one wholesale);
    a ``None`` value survives the merge so the adapter can delete that field from its payload.
    """
    merged: dict[str, Any] = dict(connection or {})
    merged.update(provider_options(settings, *keys))
    return merged


class ToolDefinition(Protocol):
    """What a provider needs to advertise a tool."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...

    @property
    def strict(self) -> bool: ...


@runtime_checkable
class Provider(Protocol):
    """A model endpoint.

    ``response_format`` (only sent when ``supports_json_schema``) is
    ``{"name": str, "schema": dict, "strict": bool}``.

    At run time only ``name`` and ``stream`` are required: a provider object without ``model``
    reads as ``model=None`` and one without ``supports_json_schema`` as ``False`` (see
    :func:`provider_model` and :func:`provider_supports_json_schema`).
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def supports_json_schema(self) -> bool: ...

    def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one model response."""
        ...


@runtime_checkable
class ContextWindowProvider(Protocol):
    """A provider that knows its context window."""

    def context_window(self) -> int | None: ...


@runtime_checkable
class ContextWindowDiscovery(Protocol):
    """A provider that can ask its endpoint for the context window."""

    async def discover_context_window(self) -> int | None: ...


@runtime_checkable
class TokenEstimator(Protocol):
    """A provider that can count tokens exactly."""

    def estimate_tokens(self, entries: Sequence[TranscriptEntry]) -> int: ...


@runtime_checkable
class VisionCapable(Protocol):
    """A provider that states whether it accepts images."""

    @property
    def supports_vision(self) -> bool: ...


def is_provider(value: object) -> bool:
    """Whether ``value`` can serve as a provider: it has a ``name`` and a callable ``stream``."""
    return hasattr(value, "name") and callable(getattr(value, "stream", None))


def provider_model(provider: object) -> str | None:
    """``provider.model``, or ``None`` for a provider that does not name its model."""
    model = getattr(provider, "model", None)
    return None if model is None else str(model)


def provider_label(provider: object) -> str:
    """``name:model`` for showing a provider, or its ``name`` alone when it does not name a model."""
    name = str(getattr(provider, "name", type(provider).__name__))
    model = provider_model(provider)
    return name if model is None else f"{name}:{model}"


def provider_supports_json_schema(provider: object) -> bool:
    """``provider.supports_json_schema``, or ``False`` for a provider that does not say."""
    return bool(getattr(provider, "supports_json_schema", False))


def supports_vision(provider: object) -> bool:
    """Whether ``provider`` accepts image input: its own ``supports_vision`` answer, else ``True``.

    A provider that says nothing is given the benefit of the doubt, like the bundled adapters,
    which assume vision unless constructed with ``supports_vision=False``.
    """
    if isinstance(provider, VisionCapable):
        return bool(provider.supports_vision)
    return True


def context_window(provider: object) -> int | None:
    """The window ``provider`` reports without I/O, or ``None`` when it cannot tell."""
    if isinstance(provider, ContextWindowProvider):
        return provider.context_window()
    return None


async def discover_context_window(provider: object) -> int | None:
    """The window ``provider``'s endpoint reports (one lookup), or ``None`` when it cannot tell."""
    if isinstance(provider, ContextWindowDiscovery):
        return await provider.discover_context_window()
    return None
