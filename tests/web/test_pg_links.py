"""Answer variants and chat links on PostgreSQL, over the real HTTP API: regenerate, fork, subagent chats."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lovia.web import create_app
from lovia.web.store import PostgresChatStore
from tests.pg_support import DSN, drop_schema, new_schema, requires_pg

from .helpers import ThreadServer, scripted_agent, sse, wait_for
from .subagent_helpers import delegating_agent

pytestmark = [pytest.mark.postgres, requires_pg]


@pytest.fixture
def schema() -> Iterator[str]:
    name = new_schema("links")
    yield name
    drop_schema(name)


def _store(schema: str) -> PostgresChatStore:
    return PostgresChatStore(DSN, schema=schema)


def _rows(schema: str, table: str, column: str, value: str) -> int:
    """Rows of one of the store's tables whose ``column`` is ``value``, counted straight in PostgreSQL."""
    import psycopg
    from psycopg import sql

    query = sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(
        sql.Identifier(schema, table), sql.Identifier(column)
    )
    with psycopg.connect(DSN) as conn:
        row = conn.execute(query, (value,)).fetchone()
    assert row is not None
    return int(row[0])


def _detail(base: str, sid: str) -> dict[str, Any]:
    r = httpx.get(f"{base}/api/sessions/{sid}", timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _texts(answers: list[dict[str, Any]]) -> list[str]:
    return [" ".join(e["content"] for e in a["entries"] if e["type"] == "assistant_text") for a in answers]


def _regenerate(base: str, sid: str, turn: int, message: str) -> dict[str, Any]:
    r = httpx.post(f"{base}/api/sessions/{sid}/rewind", json={"user_turn": turn, "keep_answer": True}, timeout=30)
    assert r.status_code == 200, r.text
    sse(base, "/api/chat/stream", {"message": message, "session_id": sid})
    return {k: v for k, v in r.json().items() if k != "entries"}  # the entries left are checked elsewhere


def _children(base: str, sid: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{base}/api/sessions/{sid}/children", timeout=30)
    assert r.status_code == 200, r.text
    return list(r.json()["children"])


def test_regenerate_twice_keeps_every_answer_for_a_new_app(schema: str) -> None:
    with ThreadServer(create_app(scripted_agent(), store=_store(schema))) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        sse(srv.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
        assert _detail(srv.url, sid)["variants"] == []
        assert _regenerate(srv.url, sid, 1, "count two") == {"removed": 2, "keep_entries": 2, "kept_answer": True}
        assert _regenerate(srv.url, sid, 1, "count two")["kept_answer"] is True
        data = _detail(srv.url, sid)
        assert data["transcript"][-1]["content"] == "Answer number 4."
        (turn,) = data["variants"]
        assert turn["user_turn"] == 1 and _texts(turn["answers"]) == ["Answer number 2.", "Answer number 3."]
    # Another app (another replica, or a restart) on the same database sees all three answers.
    with ThreadServer(create_app(scripted_agent(), store=_store(schema))) as srv:
        data = _detail(srv.url, sid)
        assert data["transcript"][-1]["content"] == "Answer number 4."
        (turn,) = data["variants"]
        assert _texts(turn["answers"]) == ["Answer number 2.", "Answer number 3."]
        assert all(a["created_at"] > 0 for a in turn["answers"])
        assert _rows(schema, "web_variants", "session_id", sid) == 2
        assert httpx.delete(f"{srv.url}/api/sessions/{sid}", timeout=30).status_code == 200
        assert _rows(schema, "web_variants", "session_id", sid) == 0


def test_edits_drop_the_variants_they_invalidate(schema: str) -> None:
    with ThreadServer(create_app(scripted_agent(), store=_store(schema))) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        _regenerate(srv.url, sid, 0, "count one")
        sse(srv.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
        _regenerate(srv.url, sid, 1, "count two")
        assert [v["user_turn"] for v in _detail(srv.url, sid)["variants"]] == [0, 1]
        _regenerate(srv.url, sid, 0, "count one")  # drops turn 1 and its answers, keeps turn 0's
        (turn,) = _detail(srv.url, sid)["variants"]
        assert turn["user_turn"] == 0 and _texts(turn["answers"]) == ["Answer number 1.", "Answer number 2."]
        edit = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 0}, timeout=30)
        assert edit.status_code == 200 and edit.json()["kept_answer"] is False
        assert _detail(srv.url, sid)["variants"] == []


def test_a_fork_shows_its_origin_and_its_rows_go_with_it(schema: str) -> None:
    with ThreadServer(create_app(scripted_agent(), store=_store(schema))) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        _regenerate(srv.url, sid, 0, "count one")
        fork = httpx.post(f"{srv.url}/api/sessions/{sid}/fork", json={}, timeout=30)
        assert fork.status_code == 200, fork.text
        new = fork.json()["session_id"]
        title = _detail(srv.url, sid)["title"]
        detail = _detail(srv.url, new)
        origin = {"kind": "fork", "session_id": sid, "user_turn": None, "ref": None, "title": title, "exists": True}
        assert detail["origin"] == origin
        assert detail["variants"] == []  # a branch starts without the earlier answers
        assert detail["transcript"][-1]["content"] == "Answer number 2."
        assert _detail(srv.url, sid)["origin"] is None
        assert _children(srv.url, sid) == []  # a branch is not a child
        # The origin chat goes: the branch still says where it came from, as gone.
        assert httpx.delete(f"{srv.url}/api/sessions/{sid}", timeout=30).status_code == 200
        assert _detail(srv.url, new)["origin"]["exists"] is False
        assert _rows(schema, "web_variants", "session_id", sid) == 0
        assert _rows(schema, "web_origins", "session_id", new) == 1
        assert httpx.delete(f"{srv.url}/api/sessions/{new}", timeout=30).status_code == 200
        assert _rows(schema, "web_origins", "session_id", new) == 0


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_a_subagent_becomes_a_linked_child_chat(schema: str, release: threading.Event) -> None:
    with ThreadServer(create_app(delegating_agent(release), store=_store(schema))) as srv:
        first = sse(srv.url, "/api/chat/stream", {"message": "delegate the sums"})
        assert first.text() == "I started a helper on it."
        parent = first.of("session")[0]["session_id"]
        (child,) = wait_for(lambda: _children(srv.url, parent), timeout=30)
        assert child["kind"] == "subagent" and child["title"] == "job the sums" and child["live"]
        assert _detail(srv.url, child["id"])["origin"] is None
        assert _detail(srv.url, child["id"])["task_of"] == {
            "kind": "subagent",
            "session_id": parent,
            "user_turn": None,
            "ref": None,
            "title": "delegate the sums",
            "exists": True,
        }
        release.set()
        wait_for(lambda: _children(srv.url, parent)[0]["status"] == "completed", timeout=30)
        # Its report started a run of the idle parent chat.
        wait_for(
            lambda: "The helper reported back." in [e.get("content") for e in _detail(srv.url, parent)["transcript"]],
            timeout=30,
        )
        assert _children(srv.url, child["id"]) == []
    # A new app on the database still links them.
    with ThreadServer(create_app(delegating_agent(release), store=_store(schema))) as srv:
        assert [c["id"] for c in _children(srv.url, parent)] == [child["id"]]
        assert _rows(schema, "web_origins", "origin_session_id", parent) == 1
        # Deleting the parent deletes its task chat and the link.
        assert httpx.delete(f"{srv.url}/api/sessions/{parent}", timeout=30).status_code == 200
        assert httpx.get(f"{srv.url}/api/sessions/{child['id']}", timeout=30).json()["entries"] == []  # gone
        assert _rows(schema, "web_origins", "session_id", child["id"]) == 0
        assert httpx.get(f"{srv.url}/api/sessions", timeout=30).json() == []
