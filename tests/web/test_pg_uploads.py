"""Uploads on PostgreSQL: the bytes live in the database, so any replica sends a chat's files to the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from lovia.web import create_app
from lovia.web.store import PostgresChatStore
from tests.pg_support import DSN, drop_schema, new_schema, requires_pg

from .helpers import ThreadServer, sse
from .test_uploads import PNG, _agent

pytestmark = [pytest.mark.postgres, requires_pg]


@pytest.fixture
def schema() -> Iterator[str]:
    name = new_schema("uploads")
    yield name
    drop_schema(name)


def _upload(base: str, sid: str, name: str, body: bytes, mime: str) -> httpx.Response:
    headers = {"X-Filename": quote(name), "Content-Type": mime}
    return httpx.post(f"{base}/api/sessions/{sid}/uploads", content=body, headers=headers, timeout=60)


def _rows(schema: str, sid: str) -> list[tuple[Any, ...]]:
    import psycopg
    from psycopg import sql

    query = sql.SQL("SELECT name, size, length(content) FROM {} WHERE session_id = %s ORDER BY created_at").format(
        sql.Identifier(schema, "web_uploads")
    )
    with psycopg.connect(DSN) as conn:
        return list(conn.execute(query, (sid,)).fetchall())


def test_a_file_uploaded_on_one_replica_reaches_the_model_on_another(schema: str) -> None:
    one, two = PostgresChatStore(DSN, schema=schema), PostgresChatStore(DSN, schema=schema)
    with ThreadServer(create_app(_agent(), store=one)) as a, ThreadServer(create_app(_agent(), store=two)) as b:
        sid = httpx.post(a.url + "/api/sessions", json={"title": "files"}, timeout=30).json()["id"]
        image = _upload(a.url, sid, "photo.png", PNG, "image/png")
        assert image.status_code == 200, image.text
        doc = _upload(a.url, sid, "notes.txt", b"hello notes", "text/plain").json()
        assert _rows(schema, sid) == [("photo.png", len(PNG), len(PNG)), ("notes.txt", 11, 11)]
        # Replica b has never seen these files: it fetches them from the database for the model.
        listed = httpx.get(f"{b.url}/api/sessions/{sid}/uploads", timeout=30).json()["uploads"]
        assert [u["name"] for u in listed] == ["photo.png", "notes.txt"]
        assert "path" not in listed[0]  # the server's disk path is never sent
        stream = sse(
            b.url,
            "/api/chat/stream",
            {"session_id": sid, "message": "look", "attachments": [image.json()["id"], doc["id"]]},
        )
        assert "text='look' images=1 files=['notes.txt']" in stream.text()
        local = Path(two.uploads_dir) / sid
        assert sorted(p.read_bytes() for p in local.iterdir()) == sorted([PNG, b"hello notes"])
        # Deleting the chat on either replica removes the bytes from the database.
        assert httpx.delete(f"{b.url}/api/sessions/{sid}", timeout=30).status_code == 200
        assert _rows(schema, sid) == []
        assert not local.exists()
        assert httpx.get(f"{a.url}/api/sessions/{sid}/uploads", timeout=30).status_code == 404


def test_refusals_store_nothing_on_postgres(schema: str) -> None:
    app = create_app(_agent(), store=PostgresChatStore(DSN, schema=schema), max_upload_mb=1)
    with ThreadServer(app) as s:
        sid = httpx.post(s.url + "/api/sessions", json={"title": "files"}, timeout=30).json()["id"]
        big = _upload(s.url, sid, "big.png", PNG + b"\x00" * (2 * 1024 * 1024), "image/png")
        assert big.status_code == 413 and big.json()["detail"]["code"] == "file_too_large"
        bad = _upload(s.url, sid, "run.exe", b"MZ", "application/octet-stream")
        assert bad.status_code == 415 and bad.json()["detail"]["code"] == "unsupported_file_type"
        assert _rows(schema, sid) == []
        assert httpx.get(f"{s.url}/api/sessions/{sid}/uploads", timeout=30).json()["uploads"] == []
