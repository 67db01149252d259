"""Every ``/api`` route the app serves, enumerated from the app itself (so a new route is covered
the day it lands): without the server token it answers 401, a state change from another site's
page answers 403, and a foreign ``Host`` gets 421, before any handler runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from lovia.web import create_app

from .config_helpers import make_runtime
from .helpers import ThreadServer, scripted_agent

TOKEN = "tok-every-route"
SAFE = {"GET", "HEAD", "OPTIONS"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadServer, list[tuple[str, str]]]]:
    home = tmp_path_factory.mktemp("every-route")
    runtime = make_runtime(home)  # so the /api/config* routes are mounted too
    app = create_app({"scripted": scripted_agent()}, db_path=str(home / "w.db"), token=TOKEN, config_runtime=runtime)
    routes = sorted(
        (method, re.sub(r"\{[^}]+\}", "x", path))
        for method, path in _walk(app.routes, "")
        if path.startswith("/api") and method != "HEAD"
    )
    with ThreadServer(app) as srv:
        yield srv, routes


def _walk(routes: Any, prefix: str) -> Iterator[tuple[str, str]]:
    """``(method, path)`` of every API route, through included routers (FastAPI may keep those as
    wrappers around the original router, with the prefix on the wrapper)."""
    for route in routes:
        if isinstance(route, APIRoute):
            for method in route.methods:
                yield method, prefix + route.path
        elif hasattr(route, "original_router"):
            context = getattr(route, "include_context", None)
            yield from _walk(route.original_router.routes, prefix + (getattr(context, "prefix", "") or ""))
        elif isinstance(getattr(route, "routes", None), list) and hasattr(route, "path"):
            yield from _walk(route.routes, prefix + route.path)


def _call(srv: ThreadServer, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = None if method in SAFE else {}
    return httpx.request(method, srv.url + path, json=body, headers=headers, timeout=20)


def test_the_app_serves_the_routes_this_test_walks(served: Any) -> None:
    _srv, routes = served
    paths = {path for _, path in routes}
    for expected in ("/api/chat/stream", "/api/sessions/x", "/api/config", "/api/schedules", "/api/workspace/raw"):
        assert expected in paths
    assert len(routes) > 60


def test_every_api_route_needs_the_token(served: Any) -> None:
    srv, routes = served
    for method, path in routes:
        r = _call(srv, method, path, {})
        assert r.status_code == 401, (method, path, r.status_code, r.text[:200])
        assert r.json()["detail"]["code"] == "server_token", (method, path)
        wrong = _call(srv, method, path, {"Authorization": "Bearer nope"})
        assert wrong.status_code == 401, (method, path)
        bad_cookie = _call(srv, method, path, {"Cookie": "lovia_token=nope"})
        assert bad_cookie.status_code == 401, (method, path)


def test_every_state_change_from_another_site_is_refused(served: Any) -> None:
    srv, routes = served
    changing = [(m, p) for m, p in routes if m not in SAFE]
    assert len(changing) > 25
    for method, path in changing:
        headers = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
        r = _call(srv, method, path, headers)
        assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
        assert r.json()["detail"]["code"] == "cross_origin", (method, path)


def test_every_api_route_refuses_a_foreign_host(served: Any) -> None:
    srv, routes = served
    for method, path in routes:
        r = _call(srv, method, path, {"Authorization": f"Bearer {TOKEN}", "Host": "rebound.example"})
        assert r.status_code == 421, (method, path, r.status_code)
        assert r.json()["detail"]["code"] == "host_not_allowed", (method, path)
