# ruff: noqa: F811  (the page/browser fixtures are imported from test_browser and used as arguments)
"""The page in headless Chromium behind a reverse proxy that serves it under ``/lovia/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import ProcessServer, ThreadServer
from .proxy import StripPrefixProxy, proxy_server
from .test_browser import idle, page, pytestmark, send, texts  # noqa: F401  (fixtures, markers)


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[ThreadServer, StripPrefixProxy]]:
    backend = ProcessServer(
        "--root-path", "/lovia", "--app", "tests.web.app_fixture:agent", "--db", str(tmp_path / "b.db")
    )
    with backend:
        server, proxy = proxy_server("/lovia", backend.url)
        with server:
            yield server, proxy


def test_the_page_works_under_a_path_prefix(proxied: tuple[ThreadServer, StripPrefixProxy], page: Any) -> None:
    server, proxy = proxied
    front = server.url + "/lovia/"
    requested: list[str] = []
    failed: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(front)
    send(page, "make the report")
    page.get_by_text("All done").wait_for()
    idle(page)
    assert texts(page, "message-user") == ["make the report"]
    page.reload()
    page.get_by_text("All done").wait_for()
    assert page.get_by_test_id("session-item").count() == 1
    assert failed == []
    assert requested and all(u.startswith(front) for u in requested), [u for u in requested if not u.startswith(front)]
    assert {"/api/info", "/api/chat/stream", "/api/sessions", "/static/app.js"} <= set(proxy.paths)
    # The page's error normalizer reads both documented shapes (and resolves paths under the prefix).
    errors = page.evaluate(
        """async () => {
            const { apiError, url } = await import(new URL('static/api.js', document.baseURI).href);
            // (an unknown chat reads as an empty one, as in 0.9.119: reconnecting to it is an error)
            const one = await apiError(await fetch(url('/api/chat/reconnect?session_id=nope'), { method: 'POST' }));
            const list = await apiError(await fetch(url('/api/sessions?limit=0')));
            return [url('/api/info'), one.status, one.code, one.hint, list.status, list.code, list.message];
        }"""
    )
    assert errors == [
        front + "api/info",
        404,
        "session_not_found",
        "list the chats with GET /api/sessions",
        422,
        "invalid_request",
        "limit: Input should be greater than or equal to 1",
    ]
