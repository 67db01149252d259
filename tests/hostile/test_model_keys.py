"""The write-only model API key, attacked: it only ever reaches the URL it was saved with.

Two real local endpoints record every request's headers: ``home`` is where the profile's key was
saved for, ``attacker`` is a server of the caller's. Whatever the caller sends to the settings
routes, the attacker's server never sees the stored key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.config_helpers import Endpoint, config_server, make_runtime, profile
from tests.web.helpers import ThreadServer

KEY = "sk-stored-secret-0123456789"


@pytest.fixture
def home_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "project")
    for name in ("LOVIA_MODEL", "LOVIA_MAX_TOKENS", "LOVIA_MAX_RETRIES", "LOVIA_INSTRUCTIONS_FILE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def endpoints() -> Iterator[tuple[Endpoint, Endpoint]]:
    with Endpoint("home") as home, Endpoint("attacker") as attacker:
        yield home, attacker


@pytest.fixture
def app(home_dir: Path, endpoints: tuple[Endpoint, Endpoint]) -> Iterator[tuple[ThreadServer, Any]]:
    runtime = make_runtime(home_dir, {"models": [profile("a", endpoints[0], key=KEY)]})
    with config_server(home_dir, runtime) as srv:
        yield srv, runtime


def _saw_key(endpoint: Endpoint) -> bool:
    return any(KEY in value for request in endpoint.server.requests for value in request.headers.values())


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["code"] == "invalid_request" and "key" in detail["message"] and detail["hint"]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"model": "m"},
        {"flavor": "anthropic", "model": "m"},
        {"base_url": "{attacker}/"},
        {"base_url": "{attacker}/v1", "context_window": 4096},
    ],
)
def test_a_connection_test_never_sends_the_stored_key_to_the_callers_url(
    app: tuple[ThreadServer, Any], endpoints: tuple[Endpoint, Endpoint], extra: dict[str, Any]
) -> None:
    srv, _runtime = app
    home, attacker = endpoints
    body = {"profile_id": "a", "base_url": attacker.url, **extra}
    body["base_url"] = str(body["base_url"]).replace("{attacker}", attacker.url)
    _refused(httpx.post(f"{srv.url}/api/config/test", json=body, timeout=30))
    assert not _saw_key(attacker)
    # The stored profile itself is still tested, with its key, at its own URL.
    own = httpx.post(f"{srv.url}/api/config/test", json={"profile_id": "a"}, timeout=30)
    assert own.json()["outcome"] == "ok"
    assert _saw_key(home) and not _saw_key(attacker)


def test_moving_a_profile_to_another_url_needs_the_key_again(
    app: tuple[ThreadServer, Any], endpoints: tuple[Endpoint, Endpoint]
) -> None:
    srv, runtime = app
    home, attacker = endpoints
    for body in (
        {"model": "m", "base_url": attacker.url},
        {"model": "m", "base_url": attacker.url, "api_key": None},
        {"model": "m"},  # no base_url: the vendor's default URL is another URL too
    ):
        _refused(httpx.put(f"{srv.url}/api/config/models/a", json=body, timeout=30))
    assert runtime.config.models[0].base_url == home.url and runtime.config.models[0].api_key == KEY
    # The next chat still goes home, with the key.
    chat = httpx.post(f"{srv.url}/api/chat", json={"message": "hello"}, timeout=60)
    assert chat.status_code == 200 and chat.json()["output"] == "answer from home", chat.text
    assert _saw_key(home) and not _saw_key(attacker)
    # A copy keeps the key server-side, and the same rule holds for it.
    assert httpx.post(f"{srv.url}/api/config/models/a/duplicate", timeout=30).status_code == 201
    _refused(httpx.put(f"{srv.url}/api/config/models/a-copy", json={"model": "m", "base_url": attacker.url}))
    # Renaming, or the same URL written another way, keeps the key.
    same = {"model": "m", "base_url": home.url + "/", "name": "Home"}
    assert httpx.put(f"{srv.url}/api/config/models/a", json=same, timeout=30).status_code == 200
    assert runtime.config.models[0].api_key == KEY
    # With the key typed again a test or a move is the owner's choice, and only that key travels.
    typed = {"profile_id": "a", "base_url": attacker.url, "api_key": "sk-typed-now"}
    assert httpx.post(f"{srv.url}/api/config/test", json=typed, timeout=30).json()["outcome"] == "ok"
    assert attacker.server.requests[-1].headers["authorization"] == "Bearer sk-typed-now"
    moved = {"model": "m", "base_url": attacker.url, "api_key": "sk-new-for-attacker"}
    assert httpx.put(f"{srv.url}/api/config/models/a", json=moved, timeout=30).status_code == 200
    chat = httpx.post(f"{srv.url}/api/chat", json={"message": "again"}, timeout=60)
    assert chat.json()["output"] == "answer from attacker"
    assert not _saw_key(attacker)
