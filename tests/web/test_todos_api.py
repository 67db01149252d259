"""The Todo plugin's list over HTTP: ``todo`` frames live, ``GET /api/sessions/{id}/todos`` rebuilt from the chat."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from lovia.web import create_app

from .agentviews_helpers import todo_agent
from .helpers import ThreadServer, sse, wait_for


def test_todo_frames_and_route(tmp_path: Path) -> None:
    release = threading.Event()
    with ThreadServer(create_app(todo_agent(release), db_path=str(tmp_path / "t.db"))) as srv:
        first = sse(srv.url, "/api/chat/stream", {"message": "plan the report"}, until="todo")
        sid = first.of("session")[0]["session_id"]
        frame = first.of("todo")[0]
        assert frame["name"] == "todo_write" and frame["call_id"].startswith("call_todo_a")
        assert [(t["content"], t["status"]) for t in frame["todos"]] == [
            ("Fetch data", "in_progress"),
            ("Write report", "pending"),
        ]
        # the todo_write result travels as the todo frame, not as a tool_result
        assert not [r for r in first.of("tool_result") if r["name"] == "todo_write"]
        # mid-run the route already sees the live run's list
        live = httpx.get(srv.url + f"/api/sessions/{sid}/todos").json()["todos"]
        assert [t["status"] for t in live] == ["in_progress", "pending"]
        release.set()
        rest = httpx.post(srv.url + "/api/chat/reconnect?session_id=" + sid)  # the run may finish first: 404
        assert rest.status_code in (200, 404)
        wait_for(lambda: httpx.get(srv.url + f"/api/sessions/{sid}").json().get("live") is not True)
        stored = httpx.get(srv.url + f"/api/sessions/{sid}/todos").json()["todos"]
        assert [t["status"] for t in stored] == ["completed", "completed"]
        other = sse(srv.url, "/api/chat/stream", {"message": "hello"})
        empty = httpx.get(srv.url + f"/api/sessions/{other.of('session')[0]['session_id']}/todos")
        assert empty.status_code == 200 and empty.json() == {"todos": []}
        missing = httpx.get(srv.url + "/api/sessions/nope/todos")
        assert missing.status_code == 404
        assert missing.json()["detail"]["code"] == "session_not_found" and missing.json()["detail"]["hint"]
