"""The HTTP API over a real uvicorn server with a scripted model."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from lovia.stores import InMemoryCheckpointer, InMemorySession
from lovia.web import ChatStore, create_app

from .helpers import Gate, NoRewindSession, ThreadServer, inspect_store, scripted_agent, sse, wait_for


def session(server: ThreadServer, sid: str) -> dict[str, Any]:
    r = httpx.get(f"{server.url}/api/sessions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [e["type"] if e["type"] != "input" else e["role"] for e in entries]


def test_stream_frames_and_stored_transcript(server: ThreadServer) -> None:
    s = sse(server.url, "/api/chat/stream", {"message": "hello there"})
    names = s.names()
    assert names[:3] == ["session", "snapshot", "turn_started"]
    assert names[-1] == "done"
    assert "text_delta" in names and "message_completed" in names
    assert s.text() == "You said: hello there"
    snap = s.of("snapshot")[0]
    assert snap["status"] == "running" and kinds(snap["transcript"]) == ["user"]
    sid = s.of("session")[0]["session_id"]
    done = s.of("done")[0]
    assert done["output"] == "You said: hello there" and done["usage"]["input_tokens"] > 0

    data = session(server, sid)
    assert kinds(data["transcript"]) == ["user", "assistant_text"]
    assert data["title"] == "hello there" and data["active_run_id"] is None and data["live"] is False
    assert data["runs"][0]["usage"] == done["usage"] and data["runs"][0]["count"] == 2

    # a second message continues the same chat with history
    s2 = sse(server.url, "/api/chat/stream", {"message": "again", "session_id": sid})
    assert kinds(s2.of("snapshot")[0]["transcript"]) == ["user", "assistant_text", "user"]
    assert kinds(session(server, sid)["transcript"]) == ["user", "assistant_text"] * 2


def test_tool_call_and_result_frames(server: ThreadServer, gate: Gate) -> None:
    s = sse(server.url, "/api/chat/stream", {"message": "tool please"})
    call = s.of("tool_call")[0]
    result = s.of("tool_result")[0]
    assert call["name"] == "lookup" and call["id"] == result["id"]
    assert result["result"] == {"q": "tool please", "answer": 42} and result["is_error"] is False
    assert s.names().index("tool_call") < s.names().index("tool_result") < s.names().index("done")
    sid = s.of("session")[0]["session_id"]
    assert kinds(session(server, sid)["transcript"]) == ["user", "tool_call", "tool_result", "assistant_text"]
    assert gate.runs == {"lookup": 1}


def test_disconnect_is_not_cancel_and_streams_attach(server: ThreadServer, gate: Gate) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call")
    sid = first.of("session")[0]["session_id"]
    wait_for(lambda: gate.runs.get("slow"))  # the client left; the run is still going
    assert session(server, sid)["live"] is True
    assert httpx.get(f"{server.url}/api/runs").json()[0]["session_id"] == sid

    results: dict[str, Any] = {}
    attached = {"a": threading.Event(), "b": threading.Event()}

    def attach(key: str) -> None:
        results[key] = sse(server.url, f"/api/chat/reconnect?session_id={sid}", on_frame=lambda _: attached[key].set())

    threads = [threading.Thread(target=attach, args=(k,)) for k in ("a", "b")]
    for t in threads:
        t.start()
    assert all(event.wait(10) for event in attached.values())  # both hold the live run's snapshot
    gate.release.set()
    for t in threads:
        t.join(10)
    for key in ("a", "b"):
        s = results[key]
        snap = s.of("snapshot")[0]
        assert snap["status"] == "running"
        # prologue: completed turns in the snapshot, then the in-flight turn's frames, then the tail
        assert kinds(snap["transcript"]) == ["user", "tool_call", "tool_result"]
        assert s.names()[2] == "turn_started" and s.of("tool_call")[0]["name"] == "slow"
        assert s.names()[-1] == "done" and s.text().startswith("Done:")
    entries = session(server, sid)["transcript"]
    assert kinds(entries) == ["user", "tool_call", "tool_result", "tool_call", "tool_result", "assistant_text"]
    assert gate.runs == {"lookup": 1, "slow": 1}


def test_message_to_a_live_run_is_injected(server: ThreadServer, gate: Gate) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call")
    sid = first.of("session")[0]["session_id"]
    wait_for(lambda: gate.runs.get("slow"))
    box: dict[str, Any] = {}
    answered = threading.Event()
    t = threading.Thread(
        target=lambda: box.update(
            s=sse(
                server.url,
                "/api/chat/stream",
                {"message": "also this", "session_id": sid},
                on_frame=lambda _: answered.set(),
            )
        )
    )
    t.start()
    assert answered.wait(10)  # the server took the message (its stream has begun) before the run moves on
    gate.release.set()
    t.join(10)
    s = box["s"]
    assert s.of("user_injected")[0]["content"] == "also this"
    entries = session(server, sid)["transcript"]
    assert [e.get("content") for e in entries if e["type"] == "input"] == ["slow run", "also this"]


def test_stop_keeps_completed_turns_and_clears_checkpoint(server: ThreadServer, gate: Gate, db: str) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call")
    sid = first.of("session")[0]["session_id"]
    run_id = first.of("snapshot")[0]["run_id"]
    wait_for(lambda: gate.runs.get("slow"))
    assert inspect_store(db, lambda st: st.checkpointer.load(run_id)) is not None
    r = httpx.post(f"{server.url}/api/chat/cancel", params={"session_id": sid}, timeout=15)
    assert r.json() == {"stopped": True}
    data = session(server, sid)
    # the finished lookup turn is kept; the interrupted slow call (no result) is dropped
    assert kinds(data["transcript"]) == ["user", "tool_call", "tool_result"]
    assert data["transcript"][1]["name"] == "lookup"
    assert data["active_run_id"] is None and data["live"] is False and data["runs"][0]["stopped"] is True
    assert inspect_store(db, lambda st: st.checkpointer.load(run_id)) is None
    # the chat goes on from there
    s = sse(server.url, "/api/chat/stream", {"message": "after stop", "session_id": sid})
    assert s.text() == "You said: after stop"


def test_rewind_edit_and_regenerate(server: ThreadServer) -> None:
    sid = sse(server.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
    sse(server.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
    assert [e.get("content") for e in session(server, sid)["transcript"]] == [
        "count one",
        "Answer number 1.",
        "count two",
        "Answer number 2.",
    ]
    # regenerate = rewind to before the last user message, resend it
    r = httpx.post(f"{server.url}/api/sessions/{sid}/rewind", json={"user_turn": 1})
    body = r.json()
    assert body == {**body, "removed": 2, "keep_entries": 2, "kept_answer": False}
    assert [m["role"] for m in body["entries"]] == ["user", "assistant"]  # what the rewind left
    sse(server.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
    assert session(server, sid)["transcript"][-1]["content"] == "Answer number 3."
    # edit the first message: everything from it on is replaced
    httpx.post(f"{server.url}/api/sessions/{sid}/rewind", json={"user_turn": 0})
    sse(server.url, "/api/chat/stream", {"message": "count edited", "session_id": sid})
    assert [e.get("content") for e in session(server, sid)["transcript"]] == ["count edited", "Answer number 4."]
    assert httpx.post(f"{server.url}/api/sessions/{sid}/rewind", json={"user_turn": 5}).status_code == 404


def test_rewind_conflicts_with_a_live_run(server: ThreadServer, gate: Gate) -> None:
    sid = sse(server.url, "/api/chat/stream", {"message": "slow run"}, until="tool_call").of("session")[0]["session_id"]
    wait_for(lambda: gate.runs.get("slow"))
    assert httpx.post(f"{server.url}/api/sessions/{sid}/rewind", json={"user_turn": 0}).status_code == 409
    assert httpx.post(f"{server.url}/api/chat", json={"message": "x", "session_id": sid}).status_code == 409


def test_store_without_rewind_reports_it() -> None:
    store = ChatStore(NoRewindSession(InMemorySession()), checkpointer=InMemoryCheckpointer(), meta_path=":memory:")
    with ThreadServer(create_app(scripted_agent(), store=store)) as srv:
        assert httpx.get(f"{srv.url}/api/info").json()["features"]["rewind"] is False
        sid = httpx.post(f"{srv.url}/api/chat", json={"message": "hi"}).json()["session_id"]
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 0})
        assert r.status_code == 501


def test_blocking_chat_and_sessions_crud(server: ThreadServer) -> None:
    r = httpx.post(f"{server.url}/api/chat", json={"message": "alpha chat"}, timeout=15)
    assert r.status_code == 200 and r.json()["output"] == "You said: alpha chat"
    a = r.json()["session_id"]
    b = httpx.post(f"{server.url}/api/chat", json={"message": "beta chat"}).json()["session_id"]
    listed = httpx.get(f"{server.url}/api/sessions").json()
    assert [s["id"] for s in listed] == [b, a]
    assert [s["id"] for s in httpx.get(f"{server.url}/api/sessions", params={"q": "ALPHA"}).json()] == [a]
    assert httpx.patch(f"{server.url}/api/sessions/{a}", json={"title": "Renamed"}).json()["title"] == "Renamed"
    assert [s["id"] for s in httpx.get(f"{server.url}/api/sessions", params={"q": "renam"}).json()] == [a]
    md = httpx.get(f"{server.url}/api/sessions/{a}/export").text
    assert md.startswith("# Renamed") and "You said: alpha chat" in md
    assert httpx.delete(f"{server.url}/api/sessions/{a}").status_code == 200
    gone = httpx.get(f"{server.url}/api/sessions/{a}")
    assert gone.status_code == 200 and gone.json()["entries"] == [] and gone.json()["title"] is None
    assert httpx.post(f"{server.url}/api/chat/reconnect", params={"session_id": a}).status_code == 404
    assert [s["id"] for s in httpx.get(f"{server.url}/api/sessions").json()] == [b]


def test_token_auth(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db, token="s3cret")) as srv:
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
        assert httpx.get(f"{srv.url}/").status_code == 200  # the page itself holds no data
        assert httpx.get(f"{srv.url}/api/info").status_code == 401
        assert httpx.get(f"{srv.url}/api/info", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.post(f"{srv.url}/api/chat/stream", json={"message": "x"}).status_code == 401
        ok = httpx.get(f"{srv.url}/api/info", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["configured"] is True


def test_unconfigured_server_offers_the_labelled_demo_model(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOVIA_MODEL", raising=False)
    with ThreadServer(create_app(db_path=db)) as srv:
        info = httpx.get(f"{srv.url}/api/info").json()
        assert info["configured"] is False and info["demo"] is True
        assert httpx.get(f"{srv.url}/api/agents").json()[0]["model"] == "offline-demo"
        s = sse(srv.url, "/api/chat/stream", {"message": "what time is it?"})
        assert s.of("tool_call")[0]["name"] == "clock"
        assert "offline demo model" in s.text().lower() or "Offline demo model" in s.text()
        page = httpx.get(f"{srv.url}/").text
        assert 'data-testid="composer"' in page and "cdn" not in page.lower()


def test_graceful_shutdown_ends_streams_and_keeps_the_checkpoint(db: str) -> None:
    gate = Gate()
    srv = ThreadServer(create_app(scripted_agent(gate), db_path=db)).__enter__()
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.update(s=sse(srv.url, "/api/chat/stream", {"message": "slow run"})))
    t.start()
    wait_for(lambda: gate.runs.get("slow"))
    started = time.monotonic()
    srv.stop()  # the open stream must not hold the shutdown hostage
    t.join(10)
    assert time.monotonic() - started < 8
    s = box["s"]
    assert s.of("error")[-1]["type"] == "ServerShutdown" and "done" not in s.names()
    sid, run_id = s.of("session")[0]["session_id"], s.of("snapshot")[0]["run_id"]
    meta = inspect_store(db, lambda st: st.get(sid))
    snap = inspect_store(db, lambda st: st.checkpointer.load(run_id))
    assert meta.active_run_id == run_id
    assert snap is not None and snap.status == "interrupted"
    assert [e.type for e in snap.entries] == ["input", "tool_call", "tool_result", "tool_call"]
    assert inspect_store(db, lambda st: st.session.load(sid)) == []  # not finalized: it will resume


def test_approve_endpoint_decides_a_gated_call(server: ThreadServer, gate: Gate) -> None:
    url = f"{server.url}/api/chat/approve"
    # Nothing is live in this chat yet.
    r = httpx.post(url, json={"session_id": "nope", "call_id": "x", "decision": "approve"})
    assert r.status_code == 404 and "no live run" in r.text
    # A stream that leaves at the approval request: the run waits for a decision regardless.
    s = sse(server.url, "/api/chat/stream", {"message": "remove a.txt"}, until="approval_required")
    asked = s.of("approval_required")[0]
    sid = s.of("session")[0]["session_id"]
    assert asked["name"] == "remove" and gate.runs.get("remove") is None
    r = httpx.post(url, json={"session_id": sid, "call_id": "not-waiting", "decision": "approve"})
    assert r.status_code == 404 and "not waiting" in r.text
    r = httpx.post(url, json={"session_id": sid, "call_id": asked["id"], "decision": "maybe"})
    assert r.status_code == 422  # only approve / deny
    r = httpx.post(url, json={"session_id": sid, "call_id": asked["id"], "decision": "deny"})
    assert r.status_code == 200 and r.json() == {"ok": True}
    wait_for(lambda: not session(server, sid)["live"])
    entries = session(server, sid)["transcript"]
    result = next(e for e in entries if e["type"] == "tool_result")
    assert result["is_error"] and gate.runs.get("remove") is None
