"""The server token as the ``lovia_token`` cookie: set when the page is opened with the token,
accepted next to the ``Authorization`` header, never for another site's state changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from lovia.web import create_app
from lovia.web.auth import TOKEN_COOKIE, token_dependency

from .helpers import ThreadServer, scripted_agent

TOKEN = "tok-cookie-path"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    home = tmp_path_factory.mktemp("cookie")
    app = create_app({"scripted": scripted_agent()}, db_path=str(home / "c.db"), token=TOKEN)
    with ThreadServer(app) as server:
        yield server


def test_opening_the_page_with_the_token_sets_a_strict_httponly_cookie(srv: ThreadServer) -> None:
    r = httpx.get(srv.url + "/", params={"token": TOKEN})
    assert r.status_code == 200
    header = r.headers["set-cookie"]
    assert header.startswith(f"{TOKEN_COOKIE}={TOKEN};")
    lowered = header.lower()
    assert "httponly" in lowered and "samesite=strict" in lowered and "path=/" in lowered
    assert "secure" not in lowered  # plain HTTP here


def test_a_wrong_or_missing_token_sets_no_cookie(srv: ThreadServer) -> None:
    assert "set-cookie" not in httpx.get(srv.url + "/", params={"token": "nope"}).headers
    assert "set-cookie" not in httpx.get(srv.url + "/").headers


def test_the_cookie_authenticates_reads_and_same_origin_changes(srv: ThreadServer) -> None:
    with httpx.Client(base_url=srv.url) as client:
        assert client.get("/api/sessions").status_code == 401
        client.get("/", params={"token": TOKEN})  # the jar keeps the cookie
        assert client.cookies.get(TOKEN_COOKIE) == TOKEN
        assert client.get("/api/sessions").status_code == 200
        created = client.post("/api/sessions", json={"agent": "scripted"}, headers={"Origin": srv.url})
        assert created.status_code in (200, 201), created.text
        foreign = client.post("/api/sessions", json={"agent": "scripted"}, headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403
        assert foreign.json()["detail"]["code"] == "cross_origin"


def test_a_wrong_cookie_is_a_401(srv: ThreadServer) -> None:
    r = httpx.get(srv.url + "/api/sessions", cookies={TOKEN_COOKIE: "nope"})
    assert r.status_code == 401
    assert r.json()["detail"]["code"] == "server_token"


def test_the_cookie_path_follows_the_root_path(tmp_path: Path) -> None:
    app = create_app({"scripted": scripted_agent()}, db_path=str(tmp_path / "r.db"), token=TOKEN)
    with TestClient(app, root_path="/lovia") as client:
        r = client.get("/", params={"token": TOKEN})
        assert "path=/lovia/" in r.headers["set-cookie"].lower()


def _bare_app() -> FastAPI:
    """``token_dependency`` on its own, without create_app's Origin guard in front."""
    app = FastAPI()

    @app.get("/read", dependencies=[Depends(token_dependency(TOKEN))])
    async def read() -> dict[str, Any]:
        return {"ok": True}

    @app.post("/change", dependencies=[Depends(token_dependency(TOKEN))])
    async def change() -> dict[str, Any]:
        return {"changed": True}

    return app


def test_token_dependency_alone_refuses_a_cross_site_change_by_cookie() -> None:
    with TestClient(_bare_app()) as client:
        client.cookies.set(TOKEN_COOKIE, TOKEN)
        assert client.get("/read", headers={"Origin": "https://evil.example"}).status_code == 200
        assert client.post("/change").status_code == 200  # no Origin: not a browser page
        assert client.post("/change", headers={"Origin": "http://testserver"}).status_code == 200
        forged = client.post("/change", headers={"Origin": "https://evil.example"})
        assert forged.status_code == 403
        assert forged.json()["detail"]["code"] == "cross_origin" and forged.json()["detail"]["hint"]
        client.cookies.clear()
        bearer = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
        assert client.post("/change", headers=bearer).status_code == 200  # a header is never forged
        assert client.post("/change").status_code == 401
