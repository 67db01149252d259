"""The shape of ``config.json``: model profiles, role assignments, search and skill directories.

Every model the web app may talk to is a :class:`ModelProfile` with an id of its own; the
:class:`Roles` say which profile answers the chat (and, optionally, which one handles images and
auxiliary work such as follow-up suggestions). The whole document is one :class:`WebConfig`,
validated as a unit: ids are unique and every role names a profile that exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ANTHROPIC_FLAVOR",
    "DEFAULT_SKILLS_DIR",
    "OPENAI_FLAVOR",
    "RESERVED_BODY_FIELDS",
    "USER_SKILLS_DIR",
    "Connection",
    "FlavorName",
    "ModelProfile",
    "ProviderFlavor",
    "Roles",
    "SearchBackend",
    "SearchConfig",
    "SkillsConfig",
    "VisionMode",
    "WebConfig",
    "flavor_for_model",
    "slugify",
]

FlavorName = Literal["openai", "anthropic"]
"""The wire dialect of an endpoint: OpenAI chat completions (and compatibles) or Anthropic Messages."""

VisionMode = Literal["auto", "on", "off"]
"""Whether images go to the model: ``auto`` trusts the adapter, ``on`` / ``off`` force it."""

SearchBackend = Literal["auto", "tavily", "duckduckgo", "off"]
"""The web search backend: ``auto`` uses Tavily when a key is set, else DuckDuckGo."""

_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
_OPENAI_BASE_URL = "https://api.openai.com/v1"
_ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
_OPENAI_HOSTS = ("api.openai.com",)
_ANTHROPIC_HOSTS = ("api.anthropic.com",)


@dataclass(frozen=True, slots=True)
class ProviderFlavor:
    """One wire dialect: where its official API lives and how a key is sent."""

    name: str
    default_base_url: str
    official_hosts: tuple[str, ...]

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The request headers carrying ``api_key`` in this dialect (none without a key)."""
        if self.name == "anthropic":
            headers = {"anthropic-version": "2023-06-01"}
            if api_key:
                headers["x-api-key"] = api_key
            return headers
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}


OPENAI_FLAVOR = ProviderFlavor("openai", _OPENAI_BASE_URL, _OPENAI_HOSTS)
ANTHROPIC_FLAVOR = ProviderFlavor("anthropic", _ANTHROPIC_BASE_URL, _ANTHROPIC_HOSTS)
_FLAVORS = {"openai": OPENAI_FLAVOR, "anthropic": ANTHROPIC_FLAVOR}


def flavor_for_model(spec: str) -> ProviderFlavor:
    """The dialect of a ``vendor:model`` string (``anthropic:`` / ``claude:``; anything else is OpenAI)."""
    prefix = spec.partition(":")[0].strip().lower() if ":" in spec else ""
    return ANTHROPIC_FLAVOR if prefix in ("anthropic", "claude") else OPENAI_FLAVOR


RESERVED_BODY_FIELDS = frozenset({"model", "messages", "system", "stream", "tools"})
"""Request fields the adapter owns; a profile's ``extra_body`` may not set them."""


def slugify(text: str, taken: set[str] | None = None) -> str:
    """A profile id made from ``text`` (lower case, ``[a-z0-9._-]``), suffixed ``-2``, ``-3``... when taken."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-._")[:56] or "model"
    if not slug[0].isalnum():
        slug = f"m{slug}"
    taken = taken or set()
    candidate, n = slug, 2
    while candidate in taken:
        candidate, n = f"{slug}-{n}", n + 1
    return candidate


def _check_base_url(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"base_url {value!r} is not an http(s) URL (e.g. http://127.0.0.1:11434/v1)")
    return value


class ModelProfile(BaseModel):
    """One model on one endpoint, with the key and the request fields that go with it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=_ID_PATTERN, max_length=64)
    name: str | None = None
    model: str = Field(min_length=1)
    flavor: FlavorName = "openai"
    base_url: str | None = None
    api_key: str | None = None
    context_window: int | None = Field(default=None, ge=1)
    vision: VisionMode = "auto"
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @field_validator("model")
    @classmethod
    def _model_text(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("model must not be blank")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _check_base_url(value)

    @field_validator("api_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(RESERVED_BODY_FIELDS & set(value))
        if reserved:
            raise ValueError(f"extra_body may not set {', '.join(reserved)} (the adapter sends them)")
        return value

    @property
    def display_name(self) -> str:
        """The name shown in the page: ``name``, else the model id."""
        return self.name or self.model

    def spec(self) -> str:
        """The ``vendor:model`` string of this profile (``openai:gpt-4.1-mini``)."""
        return f"{self.flavor}:{self.model}"

    def vision_override(self) -> bool | None:
        """``True`` / ``False`` when the profile forces image support, ``None`` for ``auto``."""
        return None if self.vision == "auto" else self.vision == "on"


class Roles(BaseModel):
    """Which profile does what: ``chat`` answers (default: the first profile), ``vision`` and
    ``aux`` (follow-ups, titles) are optional."""

    model_config = ConfigDict(extra="forbid")

    chat: str | None = None
    vision: str | None = None
    aux: str | None = None


class SearchConfig(BaseModel):
    """The web search backend and its key."""

    model_config = ConfigDict(extra="forbid")

    backend: SearchBackend = "auto"
    tavily_api_key: str | None = None


DEFAULT_SKILLS_DIR = ".agents/skills"
"""The project's skill directory (relative to the folder ``lovia web`` runs in)."""

USER_SKILLS_DIR = "~/.agents/skills"
"""The user's skill directory."""


class SkillsConfig(BaseModel):
    """The skill directories, in order (on a duplicate skill name the earlier one wins)."""

    model_config = ConfigDict(extra="forbid")

    dirs: list[str] = Field(default_factory=lambda: [DEFAULT_SKILLS_DIR, USER_SKILLS_DIR])

    @field_validator("dirs")
    @classmethod
    def _dirs(cls, value: list[str]) -> list[str]:
        cleaned: list[str] = []
        for item in value:
            item = item.strip()
            if not item:
                raise ValueError("a skill directory must not be blank")
            if item not in cleaned:
                cleaned.append(item)
        return cleaned


class WebConfig(BaseModel):
    """The whole ``config.json`` document, validated as one."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    models: list[ModelProfile] = Field(default_factory=list)
    roles: Roles = Field(default_factory=Roles)
    search: SearchConfig = Field(default_factory=SearchConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)

    @model_validator(mode="after")
    def _consistent(self) -> WebConfig:
        ids = [m.id for m in self.models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate model id(s): {', '.join(dupes)}")
        for role in ("chat", "vision", "aux"):
            target = getattr(self.roles, role)
            if target is not None and target not in ids:
                raise ValueError(f"roles.{role} names {target!r}, which is not a model profile")
        return self

    def profile(self, profile_id: str | None) -> ModelProfile | None:
        """The profile with this id (``None`` for an unknown or missing id)."""
        return next((m for m in self.models if m.id == profile_id), None) if profile_id else None

    def default_profile(self) -> ModelProfile | None:
        """The chat model: ``roles.chat``, else the first profile, else ``None``."""
        return self.profile(self.roles.chat) or (self.models[0] if self.models else None)

    def vision_profile(self) -> ModelProfile | None:
        """The profile assigned to images, if any."""
        return self.profile(self.roles.vision)

    def aux_profile(self) -> ModelProfile | None:
        """The profile assigned to auxiliary calls (follow-ups, titles), if any."""
        return self.profile(self.roles.aux)


@dataclass(slots=True)
class Connection:
    """What it takes to reach one model: ``vendor:model``, endpoint, key, and what a probe learned."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    context_window: int | None = None
    window_from_endpoint: bool = False
    available_models: list[str] | None = field(default=None)

    @property
    def flavor(self) -> ProviderFlavor | None:
        """The dialect of ``model`` (``None`` without a model)."""
        return flavor_for_model(self.model) if self.model else None

    @property
    def model_id(self) -> str | None:
        """The model id without its ``vendor:`` prefix."""
        if not self.model:
            return None
        prefix, sep, rest = self.model.partition(":")
        return rest if sep and prefix.lower() in ("openai", "anthropic", "claude", "oai", "openai-chat") else self.model

    @property
    def root(self) -> str:
        """The API root the requests go to."""
        flavor = self.flavor or OPENAI_FLAVOR
        url = (self.base_url or flavor.default_base_url).strip().rstrip("/")
        return url if urlparse(url).path not in ("", "/") else f"{url}/v1"

    @classmethod
    def from_profile(cls, profile: ModelProfile) -> Connection:
        """The connection of a stored profile."""
        return cls(
            model=profile.spec(),
            base_url=profile.base_url or _FLAVORS[profile.flavor].default_base_url,
            api_key=profile.api_key,
            context_window=profile.context_window,
        )

    def needs_api_key(self) -> bool:
        """Whether the endpoint is a vendor's official API (which refuses calls without a key)."""
        flavor = self.flavor
        if flavor is None:
            return False
        host = urlparse(self.base_url or flavor.default_base_url).hostname
        return host in flavor.official_hosts

    def missing(self) -> list[str]:
        """What is still needed before a call can be made (``[]`` when complete)."""
        gaps: list[str] = []
        if not self.model_id:
            gaps.append("model")
        if self.needs_api_key() and not self.api_key:
            gaps.append("api_key")
        return gaps
