"""The workspace file panel over real HTTP: a real app, a real folder on disk, hostile paths, uploads."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import Depends, FastAPI

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import ChatStore, create_app
from lovia.web.api import RouterDeps, build_api_router
from lovia.web.auth import HostOriginGuard, HostPolicy, token_dependency
from lovia.workspace import Workspace

from .helpers import ThreadServer, wait_for

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
TOKEN = "ws-t0ken"


def _model() -> ScriptedProvider:
    return ScriptedProvider(lambda _entries, _tools: text("ok"))


def _tree(tmp_path: Path) -> Path:
    """A workspace with text, images, noise, secrets, and symlinks in and out of it."""
    root = tmp_path / "proj"
    (root / "src" / "__pycache__").mkdir(parents=True)
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "tmp").mkdir()
    (root / "README.md").write_text("# hello\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\x00pyc")
    (root / "img.png").write_bytes(PNG)
    (root / "page.html").write_text("<script>alert(1)</script>")
    (root / "pic.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / "big.txt").write_text("x" * (1024 * 1024 + 10))
    (root / ".env").write_text("SECRET=1\n")
    (root / "server.key").write_text("-----BEGIN KEY-----\n")
    (root / "tmp" / "scratch.txt").write_text("scratch\n")
    (tmp_path / "outside.txt").write_text("outside secret\n")
    os.symlink("/etc", root / "etc_link")
    os.symlink("/etc/passwd", root / "passwd_link")
    os.symlink(tmp_path / "outside.txt", root / "outside_link.txt")
    os.symlink("README.md", root / "readme_link.md")
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _tree(tmp_path)


def _agents(root: Path) -> dict[str, Agent[Any]]:
    coder = Agent(name="coder", model=_model(), workspace=Workspace.local(str(root), denied_paths=("*.key",)))
    return {"coder": coder, "plain": Agent(name="plain", model=_model())}


@pytest.fixture
def srv(tmp_path: Path, root: Path) -> Iterator[ThreadServer]:
    app = create_app(
        _agents(root), db_path=str(tmp_path / "web.db"), max_upload_mb=1, upload_allowed_ext="txt, md, png"
    )
    with ThreadServer(app) as s:
        yield s


def _get(srv: ThreadServer, route: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{srv.url}/api/workspace{route}", params=params, timeout=30)


def _upload(srv: ThreadServer, name: str, body: Any, **headers: str) -> httpx.Response:
    sent = {"X-Filename": quote(name), "Content-Type": "application/octet-stream", **headers}
    return httpx.post(f"{srv.url}/api/workspace/upload", params={"agent": "coder"}, content=body, headers=sent)


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert detail["code"] == code and detail["message"] and detail["hint"], detail


def _uploads(root: Path) -> list[str]:
    folder = root / "uploads"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# --------------------------------------------------------------------------- happy paths


def test_root_info_names_the_folder_mode_and_limits(srv: ThreadServer) -> None:
    info = _get(srv, "").json()
    assert info["available"] is True and info["agent"] == "coder" and info["root"] == "proj"
    assert info["mode"] == "coding" and info["uploads_dir"] == "uploads"
    assert info["limits"]["max_upload_bytes"] == 1 << 20
    assert info["limits"]["upload_allowed_ext"] == ["md", "png", "txt"]
    assert "/" not in info["root"]  # the folder's name, never the server's full path
    assert httpx.get(f"{srv.url}/api/info").json()["features"]["workspace"] is True


def test_no_workspace_unknown_agent_and_unknown_chat_are_404_with_a_hint(srv: ThreadServer) -> None:
    for route in ("", "/files", "/recent", "/file", "/raw"):
        _refused(_get(srv, route, agent="plain", path="README.md"), 404, "feature_unavailable")
    _refused(_get(srv, "", agent="ghost"), 404, "agent_not_found")
    _refused(_get(srv, "/files", session_id="c_missing"), 404, "session_not_found")
    plain = httpx.post(f"{srv.url}/api/workspace/upload?agent=plain", content=b"x", headers={"X-Filename": "a.txt"})
    _refused(plain, 404, "feature_unavailable")


def test_a_chat_picks_its_own_agent(srv: ThreadServer) -> None:
    sid = httpx.post(f"{srv.url}/api/sessions", json={"agent": "plain"}).json()["id"]
    _refused(_get(srv, "", session_id=sid), 404, "feature_unavailable")
    sid = httpx.post(f"{srv.url}/api/sessions", json={"agent": "coder"}).json()["id"]
    assert _get(srv, "", session_id=sid).json()["agent"] == "coder"


def test_listing_hides_noise_secrets_and_links_out_of_the_root(srv: ThreadServer) -> None:
    response = _get(srv, "/files")
    listed = response.json()
    names = [e["name"] for e in listed]
    assert names == [
        "src", "tmp", "big.txt", "blob.bin", "img.png", "latin1.txt", "page.html", "pic.svg", "README.md",
        "readme_link.md",
    ]  # fmt: skip
    by_name = {e["name"]: e for e in listed}
    assert by_name["src"]["kind"] == "dir" and by_name["src"]["size"] is None
    assert by_name["img.png"] == {**by_name["img.png"], "kind": "file", "size": len(PNG), "symlink": False}
    assert by_name["readme_link.md"]["symlink"] is True and by_name["readme_link.md"]["size"] == len("# hello\n")
    assert response.headers["X-Total-Count"] == "10" and response.headers["X-Truncated"] == "0"
    src = _get(srv, "/files", path="src").json()
    assert [e["path"] for e in src] == ["src/app.py"]  # __pycache__ left out


def test_listing_pages(srv: ThreadServer) -> None:
    first = _get(srv, "/files", limit=3)
    rest = _get(srv, "/files", limit=3, offset=3).json()
    assert [e["name"] for e in first.json()] == ["src", "tmp", "big.txt"] and first.headers["X-Total-Count"] == "10"
    assert [e["name"] for e in rest] == ["blob.bin", "img.png", "latin1.txt"]
    last = _get(srv, "/files", limit=3, offset=9).json()
    assert [e["name"] for e in last] == ["readme_link.md"]
    assert _get(srv, "/files", limit=0).status_code == 422
    _refused(_get(srv, "/files", path="README.md"), 400, "invalid_request")


def test_recent_is_newest_first_without_scratch_noise_or_links(srv: ThreadServer, root: Path) -> None:
    base = 1_700_000_000
    for age, name in enumerate(["src/app.py", "README.md", "img.png"]):
        os.utime(root / name, (base - age, base - age + 1000))
    os.utime(root / "tmp" / "scratch.txt", (base + 5000, base + 5000))
    for other in ("big.txt", "blob.bin", "latin1.txt", "page.html", "pic.svg"):
        os.utime(root / other, (base - 100, base - 100))
    files = _get(srv, "/recent", limit=3).json()
    assert [f["path"] for f in files] == ["src/app.py", "README.md", "img.png"]
    everything = [f["path"] for f in _get(srv, "/recent", limit=50).json()]
    assert len(everything) == 8 and not any(p.startswith("tmp/") or "link" in p for p in everything)
    assert "server.key" not in everything and ".env" not in everything


def test_file_returns_text_and_refuses_big_or_binary(srv: ThreadServer) -> None:
    doc = _get(srv, "/file", path="src/app.py").json()
    assert doc["content"] == "print('hi')\n" and doc["name"] == "app.py" and doc["size"] == 12
    assert doc["mime_type"] in ("text/x-python", "text/x-script.python")
    assert _get(srv, "/file", path="readme_link.md").json()["content"] == "# hello\n"
    assert _get(srv, "/file", path="src/../README.md").json()["path"] == "README.md"
    big = _get(srv, "/file", path="big.txt").json()  # past the preview size: its head
    assert big["truncated"] is True and len(big["content"]) <= 1024 * 1024 and big["size"] == 1024 * 1024 + 10
    for binary in ("blob.bin", "latin1.txt"):  # not UTF-8 text: no content
        doc = _get(srv, "/file", path=binary).json()
        assert doc["binary"] is True and doc["content"] == "", binary
    _refused(_get(srv, "/file", path="src"), 404, "file_not_found")


def test_raw_serves_bytes_that_never_run_in_the_page(srv: ThreadServer) -> None:
    image = _get(srv, "/raw", path="img.png")
    assert image.status_code == 200 and image.content == PNG
    assert image.headers["content-type"] == "image/png" and image.headers["x-content-type-options"] == "nosniff"
    assert image.headers["content-disposition"].startswith("inline;")
    assert "sandbox" in image.headers["content-security-policy"]
    for name, mime in (("page.html", "text/html"), ("pic.svg", "image/svg+xml"), ("blob.bin", "application/")):
        _refused(_get(srv, "/raw", path=name), 415, "unsupported_file_type")  # only raster images inline
        got = _get(srv, "/raw", path=name, download=True)
        assert got.status_code == 200 and got.headers["content-type"].startswith(mime), got.headers
        assert got.headers["content-disposition"].startswith("attachment;"), name
        assert got.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in got.headers["content-security-policy"]
    assert _get(srv, "/raw", path="page.html", download=True).content == b"<script>alert(1)</script>"
    big = _get(srv, "/raw", path="big.txt", download=True)
    assert len(big.content) == 1024 * 1024 + 10 and big.headers["content-type"] == "text/plain; charset=utf-8"
    forced = _get(srv, "/raw", path="img.png", download=True)
    assert forced.headers["content-disposition"] == "attachment; filename=\"img.png\"; filename*=UTF-8''img.png"


# --------------------------------------------------------------------------- hostile paths

HOSTILE = [
    ("../outside.txt", 403, "path_denied"),
    ("src/../../outside.txt", 403, "path_denied"),
    ("../../../../../../etc/passwd", 403, "path_denied"),
    ("/etc/passwd", 403, "path_denied"),
    ("~/.bashrc", 403, "path_denied"),
    ("C:\\Windows\\win.ini", 403, "path_denied"),
    ("etc_link/passwd", 403, "path_denied"),
    ("etc_link", 403, "path_denied"),
    ("passwd_link", 403, "path_denied"),
    ("outside_link.txt", 403, "path_denied"),
    ("README.md\x00.png", 400, "invalid_request"),
    ("a" * 300, 400, "invalid_request"),
    ("src/" * 1100, 400, "invalid_request"),
    (".env", 403, "path_denied"),
    ("src/../.env", 403, "path_denied"),
    ("server.key", 403, "path_denied"),
    ("SERVER.KEY", 403, "path_denied"),
    ("missing.txt", 404, "file_not_found"),
    ("src/missing/deeper.txt", 404, "file_not_found"),
]


@pytest.mark.parametrize(("path", "status", "code"), HOSTILE, ids=[repr(h[0])[:30] for h in HOSTILE])
def test_hostile_paths_are_refused_by_every_route(srv: ThreadServer, path: str, status: int, code: str) -> None:
    for route in ("/file", "/raw", "/files"):
        got = _get(srv, route, path=path)
        _refused(got, status, code)
        assert b"root:" not in got.content and b"outside secret" not in got.content
        assert b"SECRET" not in got.content and b"BEGIN KEY" not in got.content


# --------------------------------------------------------------------------- uploads


def test_upload_saves_under_uploads_and_never_overwrites(srv: ThreadServer, root: Path) -> None:
    first = _upload(srv, "notes.txt", b"first")
    assert first.status_code == 200, first.text
    assert first.json() == {**first.json(), "path": "uploads/notes.txt", "size": 5, "renamed": False}
    second = _upload(srv, "notes.txt", b"second")
    assert second.json()["path"] == "uploads/notes (2).txt" and second.json()["renamed"] is True
    assert (root / "uploads" / "notes.txt").read_bytes() == b"first"
    assert (root / "uploads" / "notes (2).txt").read_bytes() == b"second"
    assert _get(srv, "/file", path="uploads/notes (2).txt").json()["content"] == "second"
    sneaky = _upload(srv, "../../escape.txt", b"inside")
    assert sneaky.json()["path"] == "uploads/escape.txt" and not (root.parent / "escape.txt").exists()
    assert _uploads(root) == ["escape.txt", "notes (2).txt", "notes.txt"]


def test_refused_uploads_leave_nothing_behind(srv: ThreadServer, root: Path) -> None:
    big = b"x" * ((1 << 20) + 1)
    _refused(_upload(srv, "big.txt", big), 413, "file_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is enforced while reading
        for _ in range(20):
            yield b"y" * 65536

    _refused(_upload(srv, "streamed.txt", chunks()), 413, "file_too_large")
    _refused(_upload(srv, "tool.exe", b"MZ"), 415, "unsupported_file_type")
    _refused(_upload(srv, ".bashrc.txt", b"x"), 400, "invalid_request")
    _refused(_upload(srv, "", b"x"), 400, "invalid_request")
    assert _uploads(root) == []  # no file, no partial
    assert _upload(srv, "noext", b"x").status_code == 200  # a name without an extension is a plain file


def test_an_uploads_folder_that_leads_out_is_refused(srv: ThreadServer, root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "uploads")
    _refused(_upload(srv, "notes.txt", b"x"), 403, "path_denied")
    assert list(elsewhere.iterdir()) == []


def test_denied_paths_cover_uploads(tmp_path: Path, root: Path) -> None:
    agent = Agent(name="coder", model=_model(), workspace=Workspace.local(str(root), denied_paths=("uploads",)))
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "d.db"))) as s:
        assert httpx.get(f"{s.url}/api/info").json()["features"]["workspace"] is True
        _refused(_upload(s, "notes.txt", b"x"), 403, "path_denied")
    assert not (root / "uploads").exists()


# --------------------------------------------------------------------------- auth and CSRF


def test_token_host_and_origin_guards_apply(tmp_path: Path, root: Path) -> None:
    app = create_app(_agents(root), db_path=str(tmp_path / "t.db"), token=TOKEN)
    with ThreadServer(app) as s:
        _refused(_get(s, "/files"), 401, "server_token")
        _refused(_get(s, "/raw", path="img.png"), 401, "server_token")
        _refused(_upload(s, "notes.txt", b"x"), 401, "server_token")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{s.url}/api/workspace/files", headers=auth).status_code == 200
        cross = _upload(s, "notes.txt", b"x", Origin="http://evil.example", **auth)
        _refused(cross, 403, "cross_origin")
        foreign = httpx.get(f"{s.url}/api/workspace/files", headers={**auth, "Host": "evil.example"})
        _refused(foreign, 421, "host_not_allowed")
        same = _upload(s, "ok.txt", b"x", Origin=s.url, **auth)
        assert same.status_code == 200, same.text
    assert _uploads(root) == ["ok.txt"]


def test_the_bare_router_serves_the_panel_behind_its_own_auth(tmp_path: Path, root: Path) -> None:
    deps = RouterDeps(agents=_agents(root), store=ChatStore.sqlite(tmp_path / "r.db"))
    app = FastAPI(lifespan=deps.lifespan)
    app.add_middleware(HostOriginGuard, policy=HostPolicy())
    app.include_router(build_api_router(deps), prefix="/lovia", dependencies=[Depends(token_dependency(TOKEN))])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with ThreadServer(app) as s:
            base = f"{s.url}/lovia/api/workspace"
            _refused(httpx.get(f"{base}/files"), 401, "server_token")
            assert httpx.get(base, headers=auth).json()["root"] == "proj"
            listed = httpx.get(f"{base}/files", headers=auth).json()
            assert "README.md" in [e["name"] for e in listed]
            _refused(httpx.get(f"{base}/file", params={"path": "passwd_link"}, headers=auth), 403, "path_denied")
            up = httpx.post(f"{base}/upload", content=b"hi", headers={**auth, "X-Filename": "a.md"})
            assert up.status_code == 200 and (root / "uploads" / "a.md").read_bytes() == b"hi"
            cross = httpx.post(
                f"{base}/upload", content=b"x", headers={**auth, "X-Filename": "b.md", "Origin": "http://evil.example"}
            )
            _refused(cross, 403, "cross_origin")
    finally:
        asyncio.run(deps.store.close())
    assert _uploads(root) == ["a.md"]


def test_info_says_when_no_agent_has_a_workspace(tmp_path: Path) -> None:
    with ThreadServer(create_app(Agent(name="plain", model=_model()), db_path=str(tmp_path / "n.db"))) as s:
        assert httpx.get(f"{s.url}/api/info").json()["features"]["workspace"] is False
        _refused(httpx.get(f"{s.url}/api/workspace"), 404, "feature_unavailable")


def test_an_interrupted_upload_leaves_nothing(srv: ThreadServer, root: Path) -> None:
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        head = (
            f"POST /api/workspace/upload HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
            "X-Filename: half.txt\r\nContent-Type: text/plain\r\nContent-Length: 900000\r\n\r\n"
        )
        sock.sendall(head.encode() + b"a" * 300_000)
        wait_for(lambda: any(name.endswith(".partial") for name in _uploads(root)))
    wait_for(lambda: _uploads(root) == [])
    assert _upload(srv, "whole.txt", b"all of it").status_code == 200  # the server is fine
    assert _uploads(root) == ["whole.txt"]


def test_concurrent_uploads_of_one_name_never_replace_each_other(srv: ThreadServer, root: Path) -> None:
    bodies = [f"body {i}".encode() for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda body: _upload(srv, "same.txt", body), bodies))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    stored = {a.json()["path"] for a in answers}
    assert len(stored) == 8 and "uploads/same.txt" in stored
    assert sorted((root / p).read_bytes() for p in stored) == sorted(bodies)
