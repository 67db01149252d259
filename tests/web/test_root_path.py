"""``lovia web --root-path /lovia`` behind a reverse proxy that strips the prefix, over real HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lovia.exceptions import UserError
from lovia.web.server import normalize_root_path

from .helpers import ROOT, ProcessServer, ThreadServer, sse
from .proxy import StripPrefixProxy, proxy_server

STATIC = ROOT / "lovia" / "web" / "static"


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[ThreadServer, StripPrefixProxy, ProcessServer]]:
    backend = ProcessServer(
        "--root-path", "/lovia", "--app", "tests.web.app_fixture:agent", "--db", str(tmp_path / "p.db")
    )
    with backend:
        server, proxy = proxy_server("/lovia", backend.url)
        with server:
            yield server, proxy, backend


def test_page_assets_and_api_work_under_the_prefix(
    proxied: tuple[ThreadServer, StripPrefixProxy, ProcessServer],
) -> None:
    server, proxy, backend = proxied
    front = server.url + "/lovia"
    with httpx.Client(base_url=front, timeout=10) as http:
        page = http.get("/")
        assert page.status_code == 200
        refs = re.findall(r'(?:href|src)="([^"]+)"', page.text)
        assert refs and all(r.startswith("static/") or r.startswith("data:") for r in refs), refs
        for ref in refs:
            if ref.startswith("static/"):
                assert http.get("/" + ref).status_code == 200, ref
        assert "import.meta.url" in http.get("/static/api.js").text
        assert http.get("/api/info").json()["agents"] == ["fixture"]
        docs = http.get("/api/docs")
        assert docs.status_code == 200 and "/lovia/api/openapi.json" in docs.text
        assert "/api/sessions" in http.get("/api/openapi.json").json()["paths"]
    # A browser's POST carries the proxy's origin; the proxy keeps the Host, so it is same-origin.
    stream = sse(front, "/api/chat/stream", {"message": "make the report"}, headers={"Origin": server.url})
    assert stream.names()[-1] == "done" and "All done" in stream.text()
    assert "/api/chat/stream" in proxy.paths and all(not p.startswith("/lovia") for p in proxy.paths)
    # The server itself still answers at its root (the proxy strips the prefix).
    assert httpx.get(backend.url + "/api/info", timeout=10).status_code == 200


def test_every_request_of_the_page_goes_through_its_base_url() -> None:
    """Each ``fetch`` in the page's scripts resolves its path with ``url()`` (against the app's base);
    nothing imports or links an absolute path."""
    offenders = []
    for script in sorted(STATIC.glob("*.js")):
        for number, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1):
            bad_fetch = "fetch(" in line and "fetch(url(" not in line and not line.lstrip().startswith("//")
            absolute = re.search(r"""(import\(|src\s*=|href\s*=)\s*["'`]/""", line)
            if bad_fetch or absolute:
                offenders.append(f"{script.name}:{number}: {line.strip()}")
    assert offenders == []


def test_root_path_values() -> None:
    assert normalize_root_path("lovia/") == "/lovia" and normalize_root_path("/a/b") == "/a/b"
    assert normalize_root_path("/") == "" and normalize_root_path(None) == ""
    for bad in ("http://proxy/lovia", "/lovia?x=1", "/with space"):
        with pytest.raises(UserError) as info:
            normalize_root_path(bad)
        assert "--root-path" in (info.value.hint or "")
