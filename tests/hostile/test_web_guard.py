"""The web server answers only its own names and same-origin state changes; bad numbers are 422."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from lovia.web.auth import HostPolicy, same_origin, split_host
from tests.web.helpers import ThreadServer


def agent() -> Agent:
    return Agent(name="helper", model=ScriptedProvider([text("hello")] * 20))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(agent(), db_path=str(tmp_path / "web.db"))) as srv:
        yield srv


# --------------------------------------------------------------------------- the policy


def test_host_policy_names() -> None:
    loopback = HostPolicy(bind="127.0.0.1")
    for ok in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "localhost.:80", "[::1]:8000", "127.0.0.2"):
        assert loopback.allows(ok), ok
    for bad in (
        "attacker.example",
        "attacker.example.:8000",
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
        "10.0.0.5:8000",
        "",
        ":8000",
        None,
    ):
        assert not loopback.allows(bad), bad
    named = HostPolicy(["chat.example.com", ".corp.test"], bind="10.0.0.5")
    assert named.allows("chat.example.com:443") and named.allows("a.b.corp.test") and named.allows("corp.test")
    assert named.allows("10.0.0.5:8000") and not named.allows("10.0.0.6") and not named.allows("evilcorp.test")
    anywhere = HostPolicy(bind="0.0.0.0")
    assert anywhere.allows("192.168.1.9:8000") and anywhere.allows("[fe80::1]") and not anywhere.allows("evil.test")
    assert HostPolicy(["*"]).allows("whatever.example")


def test_origin_comparison() -> None:
    assert same_origin("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert same_origin("https://chat.example.com", "chat.example.com:443")
    assert not same_origin("http://attacker.test:8000", "127.0.0.1:8000")
    assert not same_origin("null", "127.0.0.1:8000")
    assert not same_origin("http://127.0.0.1:8001", "127.0.0.1:8000")
    assert split_host("[::1]:80") == ("::1", "80") and split_host("::1") == ("::1", None)


# --------------------------------------------------------------------------- over HTTP


def test_a_foreign_host_is_refused_on_every_route(server: ThreadServer) -> None:
    foreign = {"Host": "attacker.example"}
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for method, path in [
            ("GET", "/api/sessions"),
            ("POST", "/api/sessions"),
            ("DELETE", "/api/sessions"),
            ("GET", "/api/info"),
            ("GET", "/api/openapi.json"),
            ("GET", "/api/docs"),
            ("GET", "/"),
            ("GET", "/healthz"),
        ]:
            r = http.request(method, path, headers=foreign, json={} if method == "POST" else None)
            assert r.status_code == 421, (method, path, r.status_code)
            detail = r.json()["detail"]
            assert detail["code"] == "host_not_allowed" and "--allowed-host" in detail["hint"]
        assert http.get("/api/sessions").json() == []  # nothing was created meanwhile
        assert http.get("/api/sessions", headers={"Host": f"localhost:{server.port}"}).status_code == 200


def test_state_changes_need_same_origin_or_no_origin(server: ThreadServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        evil = http.post("/api/sessions", json={"title": "x"}, headers={"Origin": "http://attacker.test"})
        assert evil.status_code == 403 and evil.json()["detail"]["code"] == "cross_origin"
        assert "cross-origin" in evil.json()["detail"]["message"] and evil.json()["detail"]["hint"]
        assert http.post("/api/sessions", json={}, headers={"Origin": "null"}).status_code == 403
        own = http.post("/api/sessions", json={"title": "mine"}, headers={"Origin": server.url})
        assert own.status_code == 200
        assert http.post("/api/sessions", json={"title": "cli"}).status_code == 200  # not a browser
        # Reads with a foreign Origin are answered (the browser keeps the answer from that page).
        assert http.get("/api/sessions", headers={"Origin": "http://attacker.test"}).status_code == 200
        titles = sorted(s["title"] for s in http.get("/api/sessions").json())
    assert titles == ["cli", "mine"]


def test_allowed_host_names_are_answered(tmp_path: Path) -> None:
    app = create_app(agent(), db_path=str(tmp_path / "w.db"), allowed_hosts=["chat.internal"])
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        assert http.get("/api/sessions", headers={"Host": "chat.internal:9"}).status_code == 200
        assert http.get("/api/sessions", headers={"Host": "other.internal"}).status_code == 421


def test_the_cli_flag_reaches_the_server(tmp_path: Path) -> None:
    from tests.web.helpers import ProcessServer

    srv = ProcessServer(
        "--db",
        str(tmp_path / "p.db"),
        "--allowed-host",
        "chat.one",
        "--allowed-host",
        "chat.two",
        env={"LOVIA_ALLOWED_HOSTS": "chat.env, other.env"},
    )
    with srv:
        for name, status in [
            ("chat.one", 200),
            ("chat.two", 200),
            ("chat.env", 200),
            ("other.env", 200),
            ("chat.three", 421),
        ]:
            assert httpx.get(f"{srv.url}/api/sessions", headers={"Host": name}, timeout=10).status_code == status


def test_api_schema_and_docs_follow_the_token(tmp_path: Path) -> None:
    app = create_app(agent(), db_path=str(tmp_path / "w.db"), token="s3cret")
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        for path in ("/api/openapi.json", "/api/docs", "/api/sessions"):
            assert http.get(path).status_code == 401, path
            assert http.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200, path
        schema = http.get("/api/openapi.json", headers={"Authorization": "Bearer s3cret"}).json()
        assert "/api/sessions" in schema["paths"]
        assert http.get("/healthz").status_code == 200


# --------------------------------------------------------------------------- numeric query parameters


@pytest.mark.parametrize(
    ("path", "param", "value"),
    [
        ("/api/sessions", "limit", "-1"),
        ("/api/sessions", "limit", "0"),
        ("/api/sessions", "limit", "501"),
        ("/api/sessions", "limit", "ten"),
        ("/api/sessions", "offset", "-1"),
        ("/api/sessions", "offset", str(2**64)),
        ("/api/runs/history", "limit", "-1"),
        ("/api/runs/history", "offset", "-3"),
        ("/api/runs/history", "since", "nan"),
        ("/api/runs/history", "since", "inf"),
        ("/api/runs/history", "since", "-5"),
    ],
)
def test_bad_numbers_are_refused_with_a_clear_422(server: ThreadServer, path: str, param: str, value: str) -> None:
    r = httpx.get(f"{server.url}{path}", params={param: value}, timeout=10)
    assert r.status_code == 422
    (problem,) = r.json()["detail"]  # FastAPI's validation shape: one item per bad field
    assert problem["loc"] == ["query", param] and problem["msg"] and problem["type"]
    assert "input" not in problem  # the rejected value is not echoed back


def test_good_numbers_still_page(server: ThreadServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for i in range(3):
            http.post("/api/sessions", json={"title": f"c{i}"})
        assert len(http.get("/api/sessions", params={"limit": 2}).json()) == 2
        assert len(http.get("/api/sessions", params={"limit": 2, "offset": 2}).json()) == 1
        assert http.get("/api/runs/history", params={"since": 0, "limit": 500}).status_code == 200
        assert math.isfinite(http.get("/api/sessions").json()[0]["created_at"])


def test_uninject_ids_are_validated(server: ThreadServer) -> None:
    r = httpx.post(f"{server.url}/api/chat/uninject", json={"session_id": "s", "id": -1}, timeout=10)
    assert r.status_code == 422 and [e["loc"] for e in r.json()["detail"]] == [["body", "id"]]


# --------------------------------------------------------------------------- JSON bodies and the text policy


def test_json_bodies_with_lone_surrogate_escapes_follow_the_text_policy(server: ThreadServer) -> None:
    json_type = {"Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        # What a browser's JSON.stringify sends for a string holding a lone surrogate.
        made = http.post("/api/sessions", content=b'{"title": "t\\ud800x"}', headers=json_type)
        assert made.status_code == 200 and made.json()["title"] == "t\ufffdx"
        chat = http.post("/api/chat", content=b'{"message": "hi \\udfff"}', headers=json_type)
        assert chat.status_code == 200
        detail = http.get(f"/api/sessions/{chat.json()['session_id']}").json()
        assert detail["entries"][0]["content"] == "hi \ufffd"
        pair = http.post("/api/sessions", content=b'{"title": "\\ud83d\\ude00"}', headers=json_type)
        assert pair.json()["title"] == "\U0001f600"  # a proper pair is the character it encodes
        broken = http.post("/api/sessions", content=b'{"title": "\\ud800', headers=json_type)
        assert broken.status_code == 422  # not JSON at all: the route's own validation answers
