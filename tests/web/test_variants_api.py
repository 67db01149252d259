"""Answer variants: a regenerate (rewind with ``keep_answer``) keeps the replaced answer in the store."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx

from lovia.web import create_app

from .helpers import ThreadServer, scripted_agent, sse


def _detail(base: str, sid: str) -> dict[str, Any]:
    response = httpx.get(f"{base}/api/sessions/{sid}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def _texts(answers: list[dict[str, Any]]) -> list[str]:
    return [" ".join(e["content"] for e in a["entries"] if e["type"] == "assistant_text") for a in answers]


def _regenerate(base: str, sid: str, turn: int, message: str) -> dict[str, Any]:
    r = httpx.post(f"{base}/api/sessions/{sid}/rewind", json={"user_turn": turn, "keep_answer": True})
    assert r.status_code == 200, r.text
    sse(base, "/api/chat/stream", {"message": message, "session_id": sid})
    return {k: v for k, v in r.json().items() if k != "entries"}  # the entries left are checked elsewhere


def test_regenerate_keeps_earlier_answers_across_a_restart(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        sse(srv.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
        assert _detail(srv.url, sid)["variants"] == []
        assert _regenerate(srv.url, sid, 1, "count two") == {"removed": 2, "keep_entries": 2, "kept_answer": True}
        _regenerate(srv.url, sid, 1, "count two")
        data = _detail(srv.url, sid)
        assert data["transcript"][-1]["content"] == "Answer number 4."
        (turn,) = data["variants"]
        assert turn["user_turn"] == 1 and _texts(turn["answers"]) == ["Answer number 2.", "Answer number 3."]
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:  # a new process reads them back
        (turn,) = _detail(srv.url, sid)["variants"]
        assert _texts(turn["answers"]) == ["Answer number 2.", "Answer number 3."]


def test_edits_drop_the_variants_they_invalidate(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        _regenerate(srv.url, sid, 0, "count one")  # turn 0 now has one earlier answer
        sse(srv.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
        _regenerate(srv.url, sid, 1, "count two")  # and turn 1 too
        assert [v["user_turn"] for v in _detail(srv.url, sid)["variants"]] == [0, 1]
        # Regenerating turn 0 again drops turn 1 (and its variants) but keeps turn 0's.
        _regenerate(srv.url, sid, 0, "count one")
        (turn,) = _detail(srv.url, sid)["variants"]
        assert turn["user_turn"] == 0 and _texts(turn["answers"]) == ["Answer number 1.", "Answer number 2."]
        # An edit replaces the question itself: its earlier answers no longer belong to it.
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 0})
        assert r.json()["kept_answer"] is False
        assert _detail(srv.url, sid)["variants"] == []


def _edit(base: str, sid: str, turn: int, message: str) -> None:
    r = httpx.post(f"{base}/api/sessions/{sid}/rewind", json={"user_turn": turn, "keep_question": True})
    assert r.status_code == 200, r.text
    sse(base, "/api/chat/stream", {"message": message, "session_id": sid})


def _questions(answers: list[dict[str, Any]]) -> list[str]:
    return [a["entries"][0]["content"] for a in answers if a["entries"][0]["type"] == "input"]


def test_an_edit_keeps_each_earlier_version_of_the_turn(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        _regenerate(srv.url, sid, 0, "count one")  # an earlier answer of the first question
        sse(srv.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
        _edit(srv.url, sid, 0, "count uno")
        (turn,) = _detail(srv.url, sid)["variants"]  # turn 1 went; turn 0 keeps one version
        assert turn["user_turn"] == 0 and _questions(turn["answers"]) == ["count one"]
        assert _texts(turn["answers"]) == ["Answer number 2."]  # the version's answer as it stood
        _edit(srv.url, sid, 0, "count eins")
        (turn,) = _detail(srv.url, sid)["variants"]
        assert _questions(turn["answers"]) == ["count one", "count uno"]  # oldest first, none lost
        assert [e["content"] for e in _detail(srv.url, sid)["transcript"] if e["type"] == "input"] == ["count eins"]


def test_variants_go_with_the_chat_and_stay_out_of_a_branch(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        _regenerate(srv.url, sid, 0, "count one")
        fork = httpx.post(f"{srv.url}/api/sessions/{sid}/fork", json={})
        assert fork.status_code == 200, fork.text
        assert _detail(srv.url, fork.json()["session_id"])["variants"] == []
        assert httpx.delete(f"{srv.url}/api/sessions/{sid}").status_code == 200
        with sqlite3.connect(db) as conn:  # the kept answers went with the chat
            assert conn.execute("SELECT COUNT(*) FROM chat_variants WHERE session_id = ?", (sid,)).fetchone() == (0,)


def test_keep_answer_with_nothing_to_keep_and_bad_turns(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        bad = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"user_turn": 3, "keep_answer": True})
        assert bad.status_code == 404 and bad.json()["detail"]["code"] == "turn_not_found"
        assert _detail(srv.url, sid)["variants"] == []
        missing = httpx.post(f"{srv.url}/api/sessions/nope/rewind", json={"user_turn": 0, "keep_answer": True})
        assert missing.status_code == 404 and missing.json()["detail"]["code"] == "session_not_found"


def test_keep_answer_by_ref(db: str) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv:
        sid = sse(srv.url, "/api/chat/stream", {"message": "count one"}).of("session")[0]["session_id"]
        sse(srv.url, "/api/chat/stream", {"message": "count two", "session_id": sid})
        refs = [m["ref"] for m in _detail(srv.url, sid)["entries"] if m.get("role") == "user"]
        assert len(refs) == 2 and all(refs)
        r = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"ref": refs[1], "keep_answer": True})
        assert r.status_code == 200 and r.json()["kept_answer"] is True, r.text
        (turn,) = _detail(srv.url, sid)["variants"]
        assert turn["user_turn"] == 1 and _texts(turn["answers"]) == ["Answer number 2."]
        gone = httpx.post(f"{srv.url}/api/sessions/{sid}/rewind", json={"ref": refs[1], "keep_answer": True})
        assert gone.status_code == 404  # that message is gone now; nothing more is kept
        assert len(_detail(srv.url, sid)["variants"][0]["answers"]) == 1
