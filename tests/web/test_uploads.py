"""Uploads and branching over HTTP: limits, types, vision, interrupted bodies, parts reaching the model, forks."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from lovia import Agent
from lovia.parts import FilePart, ImagePart
from lovia.testing import ScriptedProvider, text
from lovia.transcript import InputEntry, TranscriptEntry
from lovia.web import create_app

from .helpers import ThreadServer, inspect_store, sse, wait_for

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _describe(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    for e in reversed(entries):
        if isinstance(e, InputEntry) and e.role == "user":
            parts = e.content if isinstance(e.content, list) else []
            images = sum(isinstance(p, ImagePart) for p in parts)
            files = [p.filename for p in parts if isinstance(p, FilePart)]
            return text(f"text={e.text!r} images={images} files={files}")
    return text("nothing")


class TextOnly(ScriptedProvider):
    """A scripted model that says it cannot read images."""

    model = "text-only-7b"

    @property
    def supports_vision(self) -> bool:
        return False


def _agent(*, vision: bool = True) -> Agent[Any]:
    provider = ScriptedProvider(_describe) if vision else TextOnly(_describe)
    return Agent(name="files", model=provider)


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[ThreadServer]:
    app = create_app(_agent(), db_path=str(tmp_path / "web.db"), max_upload_mb=25)
    with ThreadServer(app) as s:
        yield s


def _chat(base: str) -> str:
    return str(httpx.post(base + "/api/sessions", json={"title": "files"}).json()["id"])


def _upload(base: str, sid: str, name: str, body: bytes, mime: str = "application/octet-stream") -> httpx.Response:
    headers = {"X-Filename": quote(name), "Content-Type": mime}
    return httpx.post(f"{base}/api/sessions/{sid}/uploads", content=body, headers=headers, timeout=60)


def _files(tmp_path: Path) -> list[Path]:
    root = tmp_path / "uploads"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_a_20_mb_image_is_accepted_and_reaches_the_model_as_parts(srv: ThreadServer, tmp_path: Path) -> None:
    sid = _chat(srv.url)
    big = PNG + b"\x01" * (20 * 1024 * 1024)
    image = _upload(srv.url, sid, "photo one.png", big, "image/png")
    assert image.status_code == 200, image.text
    assert image.json()["size"] == len(big) and image.json()["name"] == "photo one.png"
    doc = _upload(srv.url, sid, "notes.txt", b"hello notes", "text/plain").json()
    stream = sse(
        srv.url,
        "/api/chat/stream",
        {"session_id": sid, "message": "look", "attachments": [image.json()["id"], doc["id"]]},
    )
    assert "text='look' images=1 files=['notes.txt']" in stream.text()
    listed = httpx.get(f"{srv.url}/api/sessions/{sid}/uploads").json()["uploads"]
    assert [u["name"] for u in listed] == ["photo one.png", "notes.txt"]


def test_over_the_limit_is_refused_while_reading_and_nothing_is_kept(tmp_path: Path) -> None:
    app = create_app(_agent(), db_path=str(tmp_path / "web.db"), max_upload_mb=1)
    with ThreadServer(app) as s:
        sid = _chat(s.url)
        r = _upload(s.url, sid, "big.png", PNG + b"\x00" * (2 * 1024 * 1024), "image/png")
        assert r.status_code == 413
        assert r.json()["detail"]["code"] == "file_too_large" and "1 MiB" in r.json()["detail"]["message"]
        assert r.json()["detail"]["hint"]

        def chunked() -> Iterator[bytes]:  # no Content-Length: the limit must trip while streaming
            for _ in range(3):
                yield b"\x00" * (512 * 1024)

        headers = {"X-Filename": "stream.bin.txt"}
        r = httpx.post(f"{s.url}/api/sessions/{sid}/uploads", content=chunked(), headers=headers)
        assert r.status_code == 413
        assert httpx.get(f"{s.url}/api/sessions/{sid}/uploads").json()["uploads"] == []
    assert _files(tmp_path) == []


def test_forbidden_type_and_unknown_chat(srv: ThreadServer, tmp_path: Path) -> None:
    sid = _chat(srv.url)
    r = _upload(srv.url, sid, "run.exe", b"MZ")
    assert r.status_code == 415 and r.json()["detail"]["code"] == "unsupported_file_type"
    assert "pdf" in r.json()["detail"]["hint"]
    r = _upload(srv.url, "chat_missing", "a.txt", b"x")
    assert r.status_code == 404 and r.json()["detail"]["code"] == "session_not_found"
    r = httpx.post(f"{srv.url}/api/sessions/{sid}/uploads", content=b"x")
    assert r.status_code == 400 and r.json()["detail"]["code"] == "invalid_request"
    assert _files(tmp_path) == []


def test_allowlist_override_and_star(tmp_path: Path) -> None:
    app = create_app(_agent(), db_path=str(tmp_path / "a.db"), upload_allowed_ext="exe, .bin")
    with ThreadServer(app) as s:
        sid = _chat(s.url)
        assert _upload(s.url, sid, "tool.EXE", b"MZ").status_code == 200
        assert _upload(s.url, sid, "a.pdf", b"%PDF").status_code == 415
    app = create_app(_agent(), db_path=str(tmp_path / "b.db"), upload_allowed_ext="*")
    with ThreadServer(app) as s:
        assert _upload(s.url, _chat(s.url), "anything.weird", b"x").status_code == 200


def test_a_model_without_vision_refuses_images_by_name(tmp_path: Path) -> None:
    app = create_app(_agent(vision=False), db_path=str(tmp_path / "web.db"))
    with ThreadServer(app) as s:
        sid = _chat(s.url)
        r = _upload(s.url, sid, "cat.jpg", PNG, "image/jpeg")
        assert r.status_code == 422
        assert "text-only-7b" in r.json()["detail"]["message"] and r.json()["detail"]["hint"]
        assert _upload(s.url, sid, "ok.md", b"# fine").status_code == 200
        assert [u["name"] for u in httpx.get(f"{s.url}/api/sessions/{sid}/uploads").json()["uploads"]] == ["ok.md"]
    assert [p.suffix for p in _files(tmp_path)] == [".md"]


def test_an_interrupted_upload_leaves_no_file_and_no_row(srv: ThreadServer, tmp_path: Path) -> None:
    sid = _chat(srv.url)
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        head = (
            f"POST /api/sessions/{sid}/uploads HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
            "X-Filename: half.txt\r\nContent-Type: text/plain\r\nContent-Length: 5000000\r\n\r\n"
        )
        sock.sendall(head.encode() + b"a" * 300_000)
        wait_for(lambda: any(p.name.endswith(".partial") for p in _files(tmp_path)))
    wait_for(lambda: _files(tmp_path) == [])
    assert httpx.get(f"{srv.url}/api/sessions/{sid}/uploads").json()["uploads"] == []
    assert _upload(srv.url, sid, "whole.txt", b"all of it").status_code == 200  # the server is fine


def test_uploads_survive_a_restart_and_go_with_the_chat(tmp_path: Path) -> None:
    db = str(tmp_path / "web.db")
    with ThreadServer(create_app(_agent(), db_path=db)) as s:
        sid = _chat(s.url)
        up = _upload(s.url, sid, "keep.csv", b"a,b\n1,2\n", "text/csv").json()
    with ThreadServer(create_app(_agent(), db_path=db)) as s:
        assert [u["id"] for u in httpx.get(f"{s.url}/api/sessions/{sid}/uploads").json()["uploads"]] == [up["id"]]
        stream = sse(s.url, "/api/chat/stream", {"session_id": sid, "message": "", "attachments": [up["id"]]})
        assert "files=['keep.csv']" in stream.text()
        bad = httpx.post(f"{s.url}/api/chat/stream", json={"session_id": sid, "message": "x", "attachments": ["up_x"]})
        assert bad.status_code == 404 and bad.json()["detail"]["code"] == "file_not_found"
        assert httpx.delete(f"{s.url}/api/sessions/{sid}").status_code == 200
    assert _files(tmp_path) == []
    rows = inspect_store(db, lambda store: store.uploads(sid))
    assert rows == []


def _messages(base: str, sid: str) -> list[str]:
    detail = httpx.get(f"{base}/api/sessions/{sid}").json()
    return [e.get("content") if isinstance(e.get("content"), str) else "" for e in detail["transcript"]]


def test_fork_copies_history_and_leaves_the_original_untouched(srv: ThreadServer) -> None:
    sid = _chat(srv.url)
    for word in ("one", "two", "three"):
        sse(srv.url, "/api/chat/stream", {"session_id": sid, "message": word})
    before = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
    r = httpx.post(f"{srv.url}/api/sessions/{sid}/fork", json={"user_turn": 2})
    assert r.status_code == 200, r.text
    branch = r.json()["session_id"]
    copied = httpx.get(f"{srv.url}/api/sessions/{branch}").json()
    assert len(copied["transcript"]) == 4 and copied["transcript"] == before["transcript"][:4]
    ref = next(m["ref"] for m in before["entries"] if m["role"] == "user" and m["content"] == "three")
    origin = {"kind": "fork", "session_id": sid, "user_turn": 2, "ref": ref, "title": "files", "exists": True}
    assert copied["origin"] == origin
    sse(srv.url, "/api/chat/stream", {"session_id": branch, "message": "elsewhere"})
    after = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
    assert after["transcript"] == before["transcript"] and after["runs"] == before["runs"]
    whole = httpx.post(f"{srv.url}/api/sessions/{sid}/fork").json()["session_id"]
    assert httpx.get(f"{srv.url}/api/sessions/{whole}").json()["transcript"] == before["transcript"]
    assert httpx.delete(f"{srv.url}/api/sessions/{sid}").status_code == 200
    assert httpx.get(f"{srv.url}/api/sessions/{branch}").json()["origin"]["exists"] is False
    assert len(httpx.get(f"{srv.url}/api/sessions/{branch}").json()["transcript"]) == 6


def test_fork_errors(srv: ThreadServer) -> None:
    sid = _chat(srv.url)
    r = httpx.post(f"{srv.url}/api/sessions/{sid}/fork")
    assert r.status_code == 409 and r.json()["detail"]["code"] == "nothing_to_fork"
    sse(srv.url, "/api/chat/stream", {"session_id": sid, "message": "hi"})
    r = httpx.post(f"{srv.url}/api/sessions/{sid}/fork", json={"user_turn": 0})
    assert r.status_code == 409 and r.json()["detail"]["code"] == "nothing_to_fork"
    r = httpx.post(f"{srv.url}/api/sessions/{sid}/fork", json={"user_turn": 5})
    assert r.status_code == 404 and r.json()["detail"]["code"] == "turn_not_found"
    r = httpx.post(f"{srv.url}/api/sessions/chat_nope/fork")
    assert r.status_code == 404 and r.json()["detail"]["code"] == "session_not_found"
    assert len(httpx.get(f"{srv.url}/api/sessions").json()) == 1
