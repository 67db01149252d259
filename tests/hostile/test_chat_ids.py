"""Chat ids chosen by an attacker: refused where they enter, and never a way out of the uploads folder.

A chat id names the chat's uploads folder. Before the id rule, ``POST /api/chat`` took any id:
a chat named ``/srv/victim`` made "delete all chats" remove that folder (PostgreSQL store), a chat
named ``..`` put its uploads beside the SQLite database. Each test plays the attacker over real
HTTP against SQLite and PostgreSQL, with the stores' uploads folders inside the test's own
``tmp_path`` so that even the old code could only ever damage the test's folder.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from lovia.web import create_app
from lovia.web.ids import CHAT_ID_MAX_CHARS, PathOutside, check_chat_id, path_inside
from lovia.web.store import ChatStore, UploadRecord
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema
from tests.web.helpers import ThreadServer, scripted_agent

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

HOSTILE_IDS = ["..", ".", "/tmp/x", "a/../../b", "a\x00b", "x" * 150, "y" * 10_000, "a b", ".hidden", "a\\b", ""]
"""Ids an attacker sends; the last one is empty, which a route treats as "no id" or refuses."""


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ThreadServer, Path, Any]]:
    """A served app on one backend: (server, the store's uploads folder, the store)."""
    if request.param == "sqlite":
        store: Any = ChatStore.sqlite(str(tmp_path / "db" / "web.db"))
        uploads = store.uploads_dir
        with ThreadServer(create_app(scripted_agent(), store=store)) as srv:
            yield srv, uploads, store
        return
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    from lovia.web.store import PostgresChatStore

    schema = new_schema("chatids")
    pg = PostgresChatStore(DSN, schema=schema)
    uploads = tmp_path / "db" / "uploads"
    uploads.mkdir(parents=True)
    pg._pg_uploads_dir = uploads  # inside tmp_path: an escape can only reach the test's folders
    try:
        with ThreadServer(create_app(scripted_agent(), store=pg)) as srv:
            yield srv, uploads, pg
    finally:
        drop_schema(schema)


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir(exist_ok=True)
    (victim / "precious.txt").write_text("keep me")
    return victim


def _upload(base: str, sid: str, name: str = "notes.txt", body: bytes = b"hello") -> httpx.Response:
    headers = {"X-Filename": quote(name), "Content-Type": "text/plain"}
    return httpx.post(f"{base}/api/sessions/{quote(sid, safe='')}/uploads", content=body, headers=headers, timeout=30)


def _detail_text(response: httpx.Response) -> str:
    return str(response.json()["detail"])


@pytest.mark.parametrize("sid", HOSTILE_IDS[:-1])
def test_the_rule_refuses_each_hostile_id(sid: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_chat_id(sid)
    assert getattr(caught.value, "hint", None)


@pytest.mark.parametrize(
    "sid", ["chat_0123456789abcdef", "0123456789abcdef0123456789abcdef", "spawned-1", "task-1", "ana@example.com"]
)
def test_the_ids_the_app_makes_stay_valid(sid: str) -> None:
    assert check_chat_id(sid) == sid
    assert check_chat_id("a" * CHAT_ID_MAX_CHARS)


def test_hostile_chat_ids_are_refused_by_every_entry_and_delete_all_spares_the_folder_outside(
    server: tuple[ThreadServer, Path, Any], tmp_path: Path
) -> None:
    srv, uploads, _store = server
    base = srv.url
    victim = _victim(tmp_path)
    # A normal chat with an upload: the store now has an uploads folder that delete cleans.
    ok = httpx.post(f"{base}/api/chat", json={"message": "hi", "session_id": "chat_fine"}, timeout=30)
    assert ok.status_code == 200, ok.text
    assert _upload(base, "chat_fine").status_code == 200
    for sid in [str(victim), *HOSTILE_IDS[:-1]]:
        for path in ("/api/chat", "/api/chat/stream"):
            answer = httpx.post(f"{base}{path}", json={"message": "hi", "session_id": sid}, timeout=30)
            assert answer.status_code == 422, (path, sid, answer.text)
            assert "chat id" in _detail_text(answer)
        schedule = {"input": "x", "trigger_kind": "every", "trigger_expr": "60", "session_id": sid}
        assert httpx.post(f"{base}/api/schedules", json=schedule, timeout=30).status_code == 422, sid
        for route in ("/api/chat/reconnect", "/api/chat/cancel"):
            answer = httpx.post(f"{base}{route}", params={"session_id": sid}, timeout=30)
            assert answer.status_code == 422, (route, sid, answer.text)
            assert "chat id" in answer.json()["detail"]["message"]
        answer = httpx.post(f"{base}/api/chat/answer", json={"session_id": sid, "answer": "y"}, timeout=30)
        assert answer.status_code == 422, sid
    listed = httpx.get(f"{base}/api/sessions", timeout=30).json()
    rows = listed if isinstance(listed, list) else listed["sessions"]
    assert [row["id"] for row in rows] == ["chat_fine"]
    assert httpx.delete(f"{base}/api/sessions", timeout=30).status_code == 200
    assert (victim / "precious.txt").read_text() == "keep me"
    assert uploads.parent.exists() and victim.exists()


def test_an_old_chat_named_dotdot_cannot_put_uploads_beside_the_database(
    server: tuple[ThreadServer, Path, Any],
) -> None:
    srv, uploads, store = server
    assert httpx.get(f"{srv.url}/api/sessions", timeout=30).status_code == 200  # the tables exist
    _legacy_chat(store, "..")  # stored before the id rule existed
    before = sorted(p.name for p in uploads.parent.iterdir())
    answer = httpx.post(
        f"{srv.url}/api/sessions/%2E%2E/uploads", content=b"x", headers={"X-Filename": "a.txt"}, timeout=30
    )
    assert answer.status_code == 422, answer.text
    assert "chat id" in answer.json()["detail"]["message"]
    assert sorted(p.name for p in uploads.parent.iterdir()) == before
    assert not list(uploads.parent.glob("up_*"))


# --------------------------------------------------------------------------- chats stored before the rule


def _legacy_chat(store: Any, sid: str) -> None:
    """Write a chat row with ``sid`` straight into the store's database, as an older version could have."""
    if not hasattr(store, "schema"):
        _legacy_sqlite_chat(store._db.path, sid)
        return
    import psycopg
    from psycopg import sql

    query = sql.SQL("INSERT INTO {} (id, title, created_at, updated_at) VALUES (%s, '', 0, 0)").format(
        sql.Identifier(store.schema, "web_chats")
    )
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(query, (sid,))


def _legacy_sqlite_chat(db: str, sid: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO chat_sessions (id, title, agent, created_at, updated_at) VALUES (?, '', NULL, ?, ?)",
            (sid, time.time(), time.time()),
        )


def test_sqlite_delete_of_an_old_chat_leaves_files_outside_the_uploads_folder(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    db = str(tmp_path / "db" / "web.db")

    async def main() -> None:
        store = ChatStore.sqlite(db)
        await store.create(title="warm-up")  # the schema exists
        _legacy_sqlite_chat(db, "..")
        outside = victim / "precious.txt"
        await store.add_upload(UploadRecord("up_old", "..", "p.txt", "text/plain", 7, str(outside), time.time()))
        await store.delete("..")
        assert await store.get("..") is None
        await store.close()

    asyncio.run(main())
    assert (victim / "precious.txt").read_text() == "keep me"


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["one", "all"])
@pytest.mark.parametrize("sid", ["..", "../../victim", "TMPVICTIM"])
def test_postgres_delete_of_an_old_hostile_chat_spares_every_folder_outside(tmp_path: Path, sid: str, how: str) -> None:
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    import psycopg
    from psycopg import sql

    from lovia.web.store import PostgresChatStore

    victim = _victim(tmp_path)
    sid = str(victim) if sid == "TMPVICTIM" else sid
    uploads = tmp_path / "db" / "uploads"
    uploads.mkdir(parents=True)
    (uploads.parent / "beside.txt").write_text("keep me too")  # the folder that holds the uploads folder
    schema = new_schema("chatids")

    async def main() -> None:
        store = PostgresChatStore(DSN, schema=schema)
        store._pg_uploads_dir = uploads
        try:
            await store.create(title="warm-up")  # the tables exist
            query = sql.SQL("INSERT INTO {} (id, title, created_at, updated_at) VALUES (%s, '', 0, 0)").format(
                sql.Identifier(schema, "web_chats")
            )
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(query, (sid,))
            await (store.delete(sid) if how == "one" else store.delete_all())
            assert await store.get(sid) is None
        finally:
            await store.close()

    try:
        asyncio.run(main())
    finally:
        drop_schema(schema)
    assert (victim / "precious.txt").read_text() == "keep me"
    assert (uploads.parent / "beside.txt").read_text() == "keep me too"


def test_the_stores_refuse_to_create_a_hostile_chat(tmp_path: Path) -> None:
    async def main() -> None:
        store = ChatStore.sqlite(str(tmp_path / "web.db"))
        try:
            for sid in HOSTILE_IDS:
                with pytest.raises(ValueError, match="chat id"):
                    await store.create(session_id=sid)
                with pytest.raises(ValueError, match="chat id"):
                    await store.upsert(sid, title="x")
            assert await store.ids() == []
        finally:
            await store.close()

    asyncio.run(main())


def test_path_inside_refuses_escapes_and_symlinks_out(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "link").symlink_to(tmp_path)
    for parts in ([".."], ["a/../../b"], ["/etc/passwd"], ["a\x00"], [""], ["."], ["link", "victim"], ["sub", ".."]):
        with pytest.raises(PathOutside):
            path_inside(base, *parts)
    assert path_inside(base, "chat_1", "up_1.txt") == (base / "chat_1" / "up_1.txt").resolve()


def test_build_user_input_keeps_client_paths_inside_its_root(tmp_path: Path) -> None:
    from dataclasses import dataclass, field

    from lovia import Agent
    from lovia.testing import ScriptedProvider
    from lovia.web.attachments import build_user_input
    from lovia.web.errors import WebError

    @dataclass
    class Att:
        path: str
        mime: str = "text/plain"
        kind: str = "file"
        name: str | None = None

    @dataclass
    class Req:
        message: str
        attachments: list[Any] = field(default_factory=list)

    root = tmp_path / "uploads"
    root.mkdir()
    (root / "ok.txt").write_text("fine")
    secret = _victim(tmp_path) / "precious.txt"
    (root / "link.txt").symlink_to(secret)
    agent = Agent(name="a", model=ScriptedProvider([]))
    for path in (str(secret), "../victim/precious.txt", "link.txt", "a\x00b"):
        with pytest.raises(WebError) as info:
            build_user_input(Req("x", [Att(path)]), agent, root=root)
        assert info.value.status_code == 403 and info.value.hint, path
    [message] = build_user_input(Req("x", [Att("ok.txt")]), agent, root=str(root))
    assert message.content[1].filename == "ok.txt"
