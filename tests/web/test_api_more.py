"""The rest of the HTTP API over a real server: pinning, clear-all, agents, steering queue, /api/events."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from lovia.web import ChatStore, create_app

from .helpers import Frame, Gate, ThreadServer, iter_frames, scripted_agent, sse, wait_for


def sessions(server: ThreadServer) -> list[dict[str, Any]]:
    return httpx.get(f"{server.url}/api/sessions").json()  # type: ignore[no-any-return]


def new_chat(server: ThreadServer, message: str) -> str:
    return str(sse(server.url, "/api/chat/stream", {"message": message}).of("session")[0]["session_id"])


class EventReader:
    """``GET /api/events`` read on a background thread."""

    def __init__(self, server: ThreadServer) -> None:
        self.frames: list[Frame] = []
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(server.url,), daemon=True)
        self._thread.start()
        wait_for(lambda: self.names()[:1] == ["hello"])

    def _read(self, url: str) -> None:
        try:
            with httpx.Client(timeout=30) as client, client.stream("GET", url + "/api/events") as response:
                assert response.status_code == 200
                for frame in iter_frames(response):
                    self.frames.append(frame)
        finally:
            self.ended.set()

    def names(self) -> list[str]:
        return [f.event for f in self.frames]

    def of(self, event: str) -> list[dict[str, Any]]:
        return [f.data for f in self.frames if f.event == event]


def test_pinned_chats_list_first_and_stay_pinned_through_a_rename(server: ThreadServer) -> None:
    first = new_chat(server, "first chat")
    time.sleep(0.01)
    new_chat(server, "second chat")
    assert [s["id"] for s in sessions(server)][1] == first  # newest first
    r = httpx.patch(f"{server.url}/api/sessions/{first}", json={"pinned": True})
    assert r.status_code == 200 and r.json()["pinned"] is True and r.json()["title"] == "first chat"
    new_chat(server, "third chat")  # newer, but not pinned
    listed = sessions(server)
    assert listed[0]["id"] == first and listed[0]["pinned"] and not listed[1]["pinned"]
    r = httpx.patch(f"{server.url}/api/sessions/{first}", json={"title": "renamed"})
    assert r.json()["pinned"] is True and r.json()["title"] == "renamed"
    httpx.patch(f"{server.url}/api/sessions/{first}", json={"pinned": False})
    assert sessions(server)[-1]["id"] == first


def test_an_older_chat_index_gains_the_pinned_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE chat_sessions (id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', agent TEXT, "
            "created_at REAL NOT NULL, updated_at REAL NOT NULL, active_run_id TEXT)"
        )
        conn.execute("INSERT INTO chat_sessions VALUES ('chat_old', 'from before pins', NULL, 1.0, 1.0, NULL)")
    with ThreadServer(create_app(scripted_agent(), store=ChatStore.sqlite(path))) as srv:
        assert sessions(srv) == [
            {
                "id": "chat_old",
                "title": "from before pins",
                "agent": None,
                "created_at": 1.0,
                "updated_at": 1.0,
                "active_run_id": None,
                "pinned": False,
                "parent_id": None,
                "origin_kind": None,
                "origin_session_id": None,
                "origin_ref": None,
                "last_run_status": None,
                "live": False,
            }
        ]


def test_delete_all_stops_live_runs_and_forgets_every_chat(server: ThreadServer, gate: Gate) -> None:
    new_chat(server, "a finished chat")
    live = sse(server.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call").of("session")[0][
        "session_id"
    ]
    wait_for(lambda: gate.runs.get("slow"))
    r = httpx.delete(f"{server.url}/api/sessions", timeout=20)
    assert r.json() == {"ok": True}
    assert sessions(server) == [] and httpx.get(f"{server.url}/api/runs").json() == []
    assert httpx.get(f"{server.url}/api/sessions/{live}").json()["entries"] == []  # gone


def test_agents_introspection(server: ThreadServer) -> None:
    listed = httpx.get(f"{server.url}/api/agents").json()
    assert listed == [
        {
            "name": "scripted",
            "model": None,  # the provider's own model name: a ScriptedProvider names none
            "tools": ["lookup", "slow", "remove"],
            "memory": False,
            "workspace": False,
            "instructions": "",
            "context_window": None,
        }
    ]
    one = httpx.get(f"{server.url}/api/agents/scripted").json()
    tools = {t["name"]: t for t in one["tool_details"]}
    assert tools["remove"]["needs_approval"] is True and tools["lookup"]["needs_approval"] is False
    assert tools["lookup"]["parameters"]["properties"]["q"]["type"] == "string"
    assert one["handoffs"] == [] and one["context_policy"] == "Compaction"
    missing = httpx.get(f"{server.url}/api/agents/nobody")
    assert missing.status_code == 404 and "scripted" in missing.text


def test_steering_queue_inject_and_take_back(server: ThreadServer, gate: Gate) -> None:
    url = server.url
    r = httpx.post(f"{url}/api/chat/inject", json={"session_id": "none", "message": "x"})
    assert r.status_code == 200 and r.json() == {"accepted": False}  # nothing live to steer
    blank = httpx.post(f"{url}/api/chat/inject", json={"session_id": "none", "message": "  "})
    assert blank.status_code == 422 and blank.json()["detail"]["code"] == "invalid_request"
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.update(s=sse(url, "/api/chat/stream", {"message": "slow run"})))
    t.start()
    wait_for(lambda: gate.runs.get("slow"))
    sid = httpx.get(f"{url}/api/runs").json()[0]["session_id"]
    queued = httpx.post(f"{url}/api/chat/inject", json={"session_id": sid, "message": "keep this"}).json()
    assert queued["accepted"] is True
    kept = queued["id"]
    dropped = httpx.post(f"{url}/api/chat/inject", json={"session_id": sid, "message": "never mind"}).json()["id"]
    assert httpx.post(f"{url}/api/chat/uninject", json={"session_id": sid, "id": dropped}).json() == {"removed": True}
    assert httpx.post(f"{url}/api/chat/uninject", json={"session_id": sid, "id": dropped}).json() == {"removed": False}
    assert kept != dropped
    gate.release.set()
    t.join(15)
    assert [f["content"] for f in box["s"].of("user_injected")] == ["keep this"]
    entries = httpx.get(f"{url}/api/sessions/{sid}").json()["transcript"]
    assert [e["content"] for e in entries if e["type"] == "input"] == ["slow run", "keep this"]
    r = httpx.post(f"{url}/api/chat/uninject", json={"session_id": sid, "id": kept})
    assert r.status_code == 200 and r.json() == {"removed": False}  # the run is over


def test_events_stream_reports_chats_and_runs(server: ThreadServer) -> None:
    events = EventReader(server)
    sid = new_chat(server, "hello events")
    wait_for(lambda: events.of("run_finished"))
    assert events.of("session_created")[0]["session"]["id"] == sid
    started, finished = events.of("run_started")[0], events.of("run_finished")[0]
    assert started["session_id"] == sid and started["agent"] == "scripted"
    assert finished == {
        "session_id": sid,
        "run_id": started["run_id"],
        "status": "completed",
        "error": None,
        "source": "user",
    }
    httpx.patch(f"{server.url}/api/sessions/{sid}", json={"title": "renamed", "pinned": True})
    httpx.delete(f"{server.url}/api/sessions/{sid}")
    wait_for(lambda: events.of("session_deleted"))
    assert events.of("session_updated")[-1]["session"]["title"] == "renamed"
    assert events.of("session_deleted") == [{"session_id": sid}]
    names = events.names()
    assert names.index("session_created") < names.index("run_started") < names.index("run_finished")


def test_events_stream_ends_at_shutdown(tmp_path: Path) -> None:
    srv = ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "w.db"))).__enter__()
    events = EventReader(srv)
    started = time.monotonic()
    srv.stop()  # an open notification stream must not hold the shutdown up
    assert events.ended.wait(10) and time.monotonic() - started < 8


def test_run_history_and_text_export(server: ThreadServer, gate: Gate) -> None:
    first = new_chat(server, "tool lookup please")
    second = new_chat(server, "hello there")
    sse(server.url, "/api/chat/stream", {"message": "again", "session_id": second})
    history = httpx.get(f"{server.url}/api/runs/history").json()["runs"]
    assert [r["session_id"] for r in history] == [second, second, first]  # newest first
    assert all(r["status"] == "completed" and r["usage"]["input_tokens"] > 0 for r in history)
    only = httpx.get(f"{server.url}/api/runs/history", params={"session_id": first}).json()["runs"]
    assert [r["run_id"] for r in only] == [history[-1]["run_id"]]
    later = httpx.get(f"{server.url}/api/runs/history", params={"since": history[0]["started_at"]}).json()["runs"]
    assert [r["run_id"] for r in later] == [history[0]["run_id"]]
    assert len(httpx.get(f"{server.url}/api/runs/history", params={"limit": 1, "offset": 1}).json()["runs"]) == 1

    text = httpx.get(f"{server.url}/api/sessions/{first}/export", params={"format": "txt"})
    assert text.headers["content-type"].startswith("text/plain")
    assert text.text.splitlines()[:3] == ["tool lookup please", "", "User: tool lookup please"]
    assert '[tool call] lookup {"q": "tool lookup please"}' in text.text
    assert "Assistant: Done:" in text.text
    assert httpx.get(f"{server.url}/api/sessions/{first}/export", params={"format": "pdf"}).status_code == 422
