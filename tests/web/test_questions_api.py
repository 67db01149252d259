"""``ask_human`` over HTTP: the ``question`` frame, GET /api/chat/question, POST /api/chat/answer, restarts."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from lovia.tools import HumanChannel
from lovia.web import create_app

from .agentviews_helpers import asking_agent
from .helpers import Stream, ThreadServer, iter_frames, sse, wait_for


def _stream_in_thread(url: str, path: str, body: dict[str, object] | None, out: Stream) -> threading.Thread:
    def run() -> None:
        with httpx.Client(timeout=30) as client, client.stream("POST", url + path, json=body) as res:
            for frame in iter_frames(res):
                out.frames.append(frame)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_question_answered_resumes_the_run(tmp_path: Path) -> None:
    channel = HumanChannel()
    app = create_app(asking_agent(channel), db_path=str(tmp_path / "q.db"), question_channel=channel)
    with ThreadServer(app) as srv:
        out = Stream()
        thread = _stream_in_thread(srv.url, "/api/chat/stream", {"message": "ask me"}, out)
        wait_for(lambda: out.of("question"))
        q = out.of("question")[0]
        assert q["question"] == "Which colour?"
        assert [o["label"] for o in q["options"]] == ["Red", "Blue"]
        sid = out.of("session")[0]["session_id"]
        assert q["session_id"] == sid
        got = httpx.get(srv.url + "/api/chat/question", params={"session_id": sid}).json()
        assert got["question"]["id"] == q["id"]
        res = httpx.post(srv.url + "/api/chat/answer", json={"session_id": sid, "answer": "Blue"})
        assert res.status_code == 200 and res.json() == {"ok": True}
        thread.join(20)
        assert out.names()[-1] == "done"
        assert "You picked Blue." in [f["message"]["content"] for f in out.of("message_completed")]
        # answered: nothing pending any more, a second answer is refused with the documented body
        assert httpx.get(srv.url + "/api/chat/question", params={"session_id": sid}).json() == {"question": None}
        again = httpx.post(srv.url + "/api/chat/answer", json={"session_id": sid, "answer": "Red"})
        assert again.status_code == 404
        assert again.json()["detail"]["code"] == "question_not_found" and again.json()["detail"]["hint"]


def test_pending_question_replays_on_reconnect_and_times_out(tmp_path: Path) -> None:
    channel = HumanChannel()
    app = create_app(
        asking_agent(channel), db_path=str(tmp_path / "q.db"), question_channel=channel, question_timeout=1.5
    )
    with ThreadServer(app) as srv:
        first = sse(srv.url, "/api/chat/stream", {"message": "ask me"}, until="question")
        sid = first.of("session")[0]["session_id"]
        # a page reload: the reconnect prologue carries the same question
        again = sse(srv.url, "/api/chat/reconnect?session_id=" + sid, until="question")
        assert again.of("question")[0]["id"] == first.of("question")[0]["id"]
        # nobody answers: after the timeout the tool fails and the model carries on
        rest = sse(srv.url, "/api/chat/reconnect?session_id=" + sid, timeout=20)
        assert rest.names()[-1] == "done"
        result = [r for r in rest.of("tool_result") if r["name"] == "ask_human"]
        assert result and result[0]["is_error"]
        assert "1.5 seconds" in str(result[0]["output"])


def test_pending_question_survives_a_server_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    channel = HumanChannel()
    with ThreadServer(create_app(asking_agent(channel), db_path=db, question_channel=channel)) as srv:
        first = sse(srv.url, "/api/chat/stream", {"message": "ask me"}, until="question")
        sid = first.of("session")[0]["session_id"]
    # graceful shutdown: the run stopped inside ask_human and its checkpoint was kept
    channel = HumanChannel()
    with ThreadServer(create_app(asking_agent(channel), db_path=db, question_channel=channel)) as srv:
        assert httpx.get(srv.url + f"/api/sessions/{sid}").status_code == 200
        out = Stream()
        thread = _stream_in_thread(srv.url, "/api/chat/reconnect?session_id=" + sid, None, out)
        wait_for(lambda: out.of("question"))
        assert out.of("question")[0]["question"] == "Which colour?"
        res = httpx.post(srv.url + "/api/chat/answer", json={"session_id": sid, "answer": "Red"})
        assert res.status_code == 200
        thread.join(20)
        assert out.names()[-1] == "done"
        assert "You picked Red." in [f["message"]["content"] for f in out.of("message_completed")]


def test_question_routes_unhappy_paths(tmp_path: Path) -> None:
    channel = HumanChannel()
    with ThreadServer(create_app(asking_agent(channel), db_path=str(tmp_path / "q.db"), question_channel=channel)) as s:
        res = httpx.post(s.url + "/api/chat/answer", json={"session_id": "nope", "answer": "x"})
        assert res.status_code == 404 and res.json()["detail"]["code"] == "question_not_found"
        assert httpx.get(s.url + "/api/chat/question", params={"session_id": "nope"}).json() == {"question": None}
        assert httpx.post(s.url + "/api/chat/answer", json={"answer": "x"}).status_code == 422
    with ThreadServer(create_app(asking_agent(channel), db_path=str(tmp_path / "n.db"))) as s:
        res = httpx.post(s.url + "/api/chat/answer", json={"session_id": "x", "answer": "x"})
        assert res.status_code == 501
        assert res.json()["detail"]["code"] == "feature_unavailable" and res.json()["detail"]["hint"]
        assert httpx.get(s.url + "/api/chat/question", params={"session_id": "x"}).status_code == 501
