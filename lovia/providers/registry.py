"""``vendor:model`` strings → provider instances.

Lookup order for a prefix: explicit :func:`register_provider` registrations (which may override
the built-ins), then the built-ins (``openai``/``oai``/``openai-chat``, ``anthropic``/``claude``,
``openai-responses``, ``gemini``/``google``),
then the ``lovia.providers`` entry-point group, loaded lazily on the first miss and never allowed
to shadow a built-in. A string without ``:`` is an OpenAI-compatible model name. A string whose
part before the first ``:`` is no known prefix is refused (it is never taken as a bare model
name): write an Ollama-style tag such as ``qwen2.5:7b`` as ``openai:qwen2.5:7b``.

Providers built here belong to whoever built them: the runner closes the ones it made from a
string with ``await provider.aclose()``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any, cast

from ..exceptions import UserError
from .base import Provider, is_provider

__all__ = [
    "ProviderFactory",
    "known_prefixes",
    "model_from_env",
    "provider_from_string",
    "register_provider",
    "resolve_model",
]

logger = logging.getLogger("lovia")

ProviderFactory = Callable[..., Provider]
"""``factory(model, *, api_key=..., base_url=..., supports_vision=...) -> Provider``.

Only the keywords the caller actually set are passed, so a factory taking just ``model`` works.
"""

ENTRY_POINT_GROUP = "lovia.providers"
_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def _openai(model: str, **kwargs: Any) -> Provider:
    from .openai_chat import OpenAIChatProvider

    return OpenAIChatProvider(model, **kwargs)


def _anthropic(model: str, **kwargs: Any) -> Provider:
    from .anthropic import AnthropicProvider

    return AnthropicProvider(model, **kwargs)


def _responses(model: str, **kwargs: Any) -> Provider:
    from .openai_responses import OpenAIResponsesProvider

    return OpenAIResponsesProvider(model, **kwargs)


def _gemini(model: str, **kwargs: Any) -> Provider:
    from .gemini import GeminiProvider

    return GeminiProvider(model, **kwargs)


def entry_points(group: str) -> Any:
    """``importlib.metadata.entry_points``, imported on first use (it is slow to import)."""
    from importlib import metadata

    return metadata.entry_points(group=group)


_BUILTINS: dict[str, ProviderFactory] = {
    "openai": _openai,
    "oai": _openai,
    "openai-chat": _openai,
    "anthropic": _anthropic,
    "claude": _anthropic,
    "openai-responses": _responses,
    "gemini": _gemini,
    "google": _gemini,
}
_registered: dict[str, ProviderFactory] = {}
_entry_points: dict[str, ProviderFactory] | None = None
_lock = threading.Lock()


def register_provider(prefix: str, factory: ProviderFactory) -> None:
    """Make ``"<prefix>:<model>"`` strings build providers with ``factory``.

    An explicit registration wins over a built-in prefix of the same name (and over plugins).

    Args:
        prefix: The vendor prefix, e.g. ``"mygateway"`` (letters, digits, ``-``, ``_``, ``.``).
        factory: Called as ``factory(model, **kwargs)`` with the keywords the caller set.

    Raises:
        UserError: The prefix is not a valid name or the factory is not callable.
    """
    key = prefix.strip().lower()
    if not _PREFIX.match(key):
        raise UserError(f"invalid provider prefix {prefix!r}", hint="use letters, digits, '-', '_' or '.'")
    if not callable(factory):
        raise UserError(f"provider factory for {prefix!r} is not callable")
    with _lock:
        _registered[key] = factory


def _load_entry_points() -> dict[str, ProviderFactory]:
    global _entry_points
    with _lock:
        if _entry_points is None:
            found: dict[str, ProviderFactory] = {}
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                name = ep.name.strip().lower()
                if name in _BUILTINS:
                    logger.warning(
                        "ignoring entry point %r in %s: it would shadow a built-in prefix", ep.name, ENTRY_POINT_GROUP
                    )
                    continue
                found[name] = _lazy_entry_point(ep.name, ep.load)
            _entry_points = found
        return _entry_points


def _lazy_entry_point(name: str, load: Callable[[], Any]) -> ProviderFactory:
    def factory(model: str, **kwargs: Any) -> Provider:
        try:
            target = load()
        except Exception as exc:
            raise UserError(
                f"provider plugin {name!r} failed to load: {exc}", hint="reinstall or fix the plugin package"
            ) from exc
        result: Provider = target(model, **kwargs)
        return result

    return factory


def known_prefixes() -> list[str]:
    """Every prefix :func:`provider_from_string` accepts right now, sorted."""
    return sorted({*_BUILTINS, *_registered, *_load_entry_points()})


def _factory_for(prefix: str) -> ProviderFactory | None:
    key = prefix.lower()
    return _registered.get(key) or _BUILTINS.get(key) or _load_entry_points().get(key)


def provider_from_string(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    supports_vision: bool | None = None,
    extra_body: dict[str, Any] | None = None,
) -> Provider:
    """Build a provider from ``"vendor:model"`` (or a bare OpenAI-compatible model name).

    Only the first ``:`` separates the prefix, so ``"openai:qwen2.5:7b"`` is model ``qwen2.5:7b``;
    ``"qwen2.5:7b"`` alone is refused (``qwen2.5`` is no known prefix). Prefixes ignore case.

    Args:
        spec: ``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``, ``"llama3.1"``...
        api_key: Overrides the vendor's key variable.
        base_url: Overrides the vendor's base-URL variable.
        supports_vision: Whether the model accepts images (passed to the factory when set).
        extra_body: Raw request fields for every call through this provider (passed when set).

    Raises:
        UserError: Empty spec, empty model, or a prefix that is neither built in, nor registered,
            nor an entry point.
    """
    text = (spec or "").strip()
    if not text:
        raise UserError(
            "empty model string",
            hint="use 'openai:<model>', 'anthropic:<model>', 'openai-responses:<model>', 'gemini:<model>' "
            "or set LOVIA_MODEL",
        )
    prefix, sep, model = text.partition(":")
    kwargs = {
        k: v
        for k, v in (
            ("api_key", api_key),
            ("base_url", base_url),
            ("supports_vision", supports_vision),
            ("extra_body", extra_body),
        )
        if v is not None
    }
    if not sep or not _PREFIX.match(prefix.strip()):
        return _bare_model(text, **kwargs)  # "org/model:free" has no prefix: ':' is part of the name
    factory = _factory_for(prefix.strip())
    if factory is None:
        raise _unknown_prefix(prefix.strip(), text)
    if not model.strip():
        raise UserError(f"model string {text!r} names no model", hint=f"write '{prefix}:<model-id>'")
    return factory(model.strip(), **kwargs)


def _unknown_prefix(prefix: str, text: str) -> UserError:
    """The error for ``"<prefix>:<model>"`` whose prefix no registry knows (never a bare name)."""
    import difflib

    close = difflib.get_close_matches(prefix.lower(), known_prefixes(), n=1, cutoff=0.75)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return UserError(
        f"unknown provider prefix {prefix!r} in model string {text!r}{guess}",
        hint=f"known prefixes: {', '.join(known_prefixes())}; add one with "
        f"lovia.providers.register_provider({prefix!r}, factory) or a package entry point in the "
        f"{ENTRY_POINT_GROUP!r} group; to send the whole string as an OpenAI-compatible model name "
        f"write 'openai:{text}'",
    )


def _bare_model(text: str, **kwargs: Any) -> Provider:
    """A string with no prefix: an OpenAI Chat provider (named ``"openai-chat"`` on every host)."""
    if text.lower().startswith("claude"):
        logger.warning(
            "model %r has no vendor prefix and goes to the OpenAI-compatible endpoint; "
            "use 'anthropic:%s' for the Anthropic API",
            text,
            text,
        )
    return _openai(text, **kwargs)


def model_from_env(*, required: bool = True) -> str | None:
    """The model string in ``LOVIA_MODEL``.

    Args:
        required: Raise when the variable is unset or empty (otherwise return ``None``).

    Raises:
        UserError: ``required`` and ``LOVIA_MODEL`` is missing.
    """
    value = os.environ.get("LOVIA_MODEL", "").strip()
    if value:
        return value
    if required:
        raise UserError(
            "no model configured: LOVIA_MODEL is not set",
            hint="export LOVIA_MODEL=openai:gpt-4.1-mini (or anthropic:<model>, openai-responses:<model>, "
            "gemini:<model>, or a local model name with OPENAI_BASE_URL)",
        )
    return None


def resolve_model(model: str | Provider | object | None, *, agent_name: str = "agent") -> Provider:
    """The provider for an ``Agent.model`` value: a provider as is, a string through the registry.

    Raises:
        UserError: ``model`` is ``None`` (there is deliberately no default model) or invalid.
    """
    if model is None:
        raise UserError(
            f"agent {agent_name!r} has no model",
            hint='set Agent(model="openai:gpt-4o-mini") or use lovia.model_from_env() with LOVIA_MODEL',
        )
    if isinstance(model, str):
        return provider_from_string(model)
    return as_provider(model, agent_name=agent_name)


def as_provider(model: object, *, agent_name: str = "agent") -> Provider:
    """``model`` itself when it can serve as a provider (a ``name`` and a ``stream`` method).

    ``model`` and ``supports_json_schema`` are optional on such an object: they are read with
    the defaults ``None`` and ``False``.

    Raises:
        UserError: ``model`` is a list or tuple (one model is expected), or not a provider.
    """
    if isinstance(model, (list, tuple)):
        raise UserError(
            f"agent {agent_name!r}: one model is expected, not a {type(model).__name__} of them",
            hint="to spread calls over several models put a routing gateway behind one model "
            "(or lovia.providers.FailoverProvider([...]) for fallbacks)",
        )
    if not is_provider(model):
        raise UserError(
            f"agent {agent_name!r}: model must be a 'vendor:model' string or a provider, got {type(model).__name__}",
            hint='e.g. model="openai:gpt-4o-mini", or an object with a name and an async stream(...) method',
        )
    return cast(Provider, model)
