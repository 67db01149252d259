from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

import httpx
import pytest

from lovia.exceptions import UserError
from lovia.providers import (
    AnthropicProvider,
    OpenAIChatProvider,
    Provider,
    VisionCapable,
    _http,
    known_prefixes,
    model_from_env,
    provider_from_string,
    register_provider,
    registry,
)

from .conftest import track


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registered", {})
    monkeypatch.setattr(registry, "_entry_points", {})


@pytest.mark.parametrize(
    ("spec", "cls", "model"),
    [
        ("openai:gpt-x", OpenAIChatProvider, "gpt-x"),
        ("oai:gpt-x", OpenAIChatProvider, "gpt-x"),
        ("openai-chat:gpt-x", OpenAIChatProvider, "gpt-x"),
        ("OpenAI:qwen2.5:7b", OpenAIChatProvider, "qwen2.5:7b"),
        ("anthropic:claude-x", AnthropicProvider, "claude-x"),
        ("claude:claude-x", AnthropicProvider, "claude-x"),
        ("llama3.1", OpenAIChatProvider, "llama3.1"),
    ],
)
def test_builtin_prefixes(spec: str, cls: type, model: str) -> None:
    provider = track(provider_from_string(spec, api_key="k", base_url="http://127.0.0.1:9/v1"))
    assert type(provider) is cls and provider.model == model
    assert isinstance(provider, Provider) and isinstance(provider, VisionCapable)


def test_keywords_reach_the_provider() -> None:
    provider = track(
        provider_from_string("openai:m", api_key="secret", base_url="http://127.0.0.1:9/v1", supports_vision=False)
    )
    assert provider.base_url == "http://127.0.0.1:9/v1"
    assert provider._api_key == "secret" and provider.supports_vision is False


def test_bare_claude_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lovia"):
        track(provider_from_string("claude-sonnet", base_url="http://127.0.0.1:9/v1"))
    assert any("anthropic:claude-sonnet" in r.getMessage() and r.name == "lovia" for r in caplog.records)


@pytest.mark.parametrize("spec", ["vendorx:model-1", "qwen2.5:7b"])
def test_an_unknown_prefix_is_refused_never_taken_as_a_bare_name(spec: str) -> None:
    with pytest.raises(UserError) as info:
        provider_from_string(spec, base_url="http://127.0.0.1:9/v1")
    hint = info.value.hint or ""
    assert "register_provider" in hint and "lovia.providers" in hint and f"openai:{spec}" in hint


@pytest.mark.parametrize("host", ["http://127.0.0.1:9/v1", "https://api.openai.com/v1"])
def test_a_bare_name_is_an_openai_chat_provider_on_every_host(host: str) -> None:
    provider = track(provider_from_string("my-model", base_url=host))
    assert type(provider) is OpenAIChatProvider and provider.name == "openai-chat"


@pytest.mark.parametrize(
    ("base_url", "explicit", "expected"),
    [
        (None, None, True),
        ("https://api.anthropic.com/v1", None, True),
        ("http://127.0.0.1:9/v1", None, False),
        ("http://127.0.0.1:9/v1", True, True),
        ("https://api.anthropic.com/v1", False, False),
    ],
)
def test_anthropic_vision_defaults_to_the_official_host(
    base_url: str | None, explicit: bool | None, expected: bool
) -> None:
    direct = track(AnthropicProvider("claude-x", api_key="k", base_url=base_url, supports_vision=explicit))
    assert direct.supports_vision is expected
    spec_kwargs = {k: v for k, v in (("base_url", base_url), ("supports_vision", explicit)) if v is not None}
    built = track(provider_from_string("anthropic:claude-x", api_key="k", **spec_kwargs))
    assert built.supports_vision is expected


def test_misspelt_prefix_lists_known_ones() -> None:
    with pytest.raises(UserError) as info:
        provider_from_string("opnai:model")
    hint = info.value.hint or ""
    assert "anthropic" in hint and "openai" in hint and "openai:opnai:model" in hint


@pytest.mark.parametrize("spec", ["", "   ", "openai:", "anthropic:  "])
def test_empty_specs(spec: str) -> None:
    with pytest.raises(UserError):
        provider_from_string(spec)


@dataclass
class Dummy:
    model: str
    kwargs: dict
    name: str = "dummy"
    supports_json_schema: bool = False

    def stream(self, entries, *, tools=None, response_format=None, settings=None):
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


def test_register_provider_and_override_builtin() -> None:
    register_provider("gw", lambda model, **kw: Dummy(model, kw))
    made = provider_from_string("gw:big/model", base_url="http://gw")
    assert isinstance(made, Dummy) and made.model == "big/model" and made.kwargs == {"base_url": "http://gw"}
    register_provider("openai", lambda model, **kw: Dummy(model, kw))
    assert isinstance(provider_from_string("openai:x"), Dummy)
    assert "gw" in known_prefixes()
    with pytest.raises(UserError):
        register_provider("bad prefix!", lambda model: Dummy(model, {}))


def test_entry_points_are_lazy_and_cannot_shadow_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []

    class EP:
        def __init__(self, name: str) -> None:
            self.name = name

        def load(self):
            loaded.append(self.name)
            return lambda model, **kw: Dummy(model, kw)

    monkeypatch.setattr(registry, "_entry_points", None)
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [EP("plug"), EP("anthropic")] if group == "lovia.providers" else []
    )
    assert isinstance(provider_from_string("plug:m"), Dummy)
    assert loaded == ["plug"]  # only the one used is imported
    assert type(track(provider_from_string("anthropic:m"))) is AnthropicProvider


def test_model_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError) as info:
        model_from_env()
    assert "LOVIA_MODEL" in (info.value.hint or "")
    assert model_from_env(required=False) is None
    monkeypatch.setenv("LOVIA_MODEL", " anthropic:claude-x ")
    assert model_from_env() == "anthropic:claude-x"


# --------------------------------------------------------------------------- HTTP env knobs


def test_timeout_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _http.resolve_timeout(None).read == 300.0
    monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", "12.5")
    assert _http.resolve_timeout(None).read == 12.5
    assert _http.resolve_timeout(3).read == 3
    for junk in ("soon", "0", "-5", "nan"):
        monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", junk)
        assert _http.resolve_timeout(None).read == 300.0  # ignored: the default applies


def test_trust_env_and_tls_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    assert _http.resolve_trust_env(None) is False
    monkeypatch.setenv("LOVIA_PROVIDER_TRUST_ENV", "1")
    assert _http.resolve_trust_env(None) is True and _http.resolve_trust_env(False) is False
    monkeypatch.setenv("LOVIA_HTTP_INSECURE", "true")
    assert _http.resolve_verify() is False
    monkeypatch.delenv("LOVIA_HTTP_INSECURE")
    monkeypatch.setenv("LOVIA_HTTP_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(UserError):
        _http.resolve_verify()
    import certifi

    monkeypatch.setenv("LOVIA_HTTP_CA_BUNDLE", certifi.where())
    assert isinstance(_http.resolve_verify(), ssl.SSLContext)


async def test_proxy_env_ignored_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    provider = track(OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(provider._client, httpx.AsyncClient) and provider._client.trust_env is False
