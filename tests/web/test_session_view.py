"""The chat detail as http-api.md describes it: ``entries`` are messages (role, content, ref,
tool_calls, durations), user messages carry refs that rewind and fork accept, and a live stream
ends with ``refs`` and ``timing`` before ``done``. Also: in-process clients (``TestClient``) reach
the app without opening the Host guard to any name."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from lovia import Agent, tool
from lovia.parts import ImagePart
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import create_app

from .helpers import ThreadServer, scripted_agent, sse, wait_for

FIELDS = {
    "role",
    "content",
    "ref",
    "reasoning",
    "tool_call_id",
    "name",
    "tool_calls",
    "timestamp",
    "duration",
    "is_error",
    "images",
    "compaction",
}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


def _script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said = next(e.text for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")
    last = entries[-1]
    if said.startswith("add") and not isinstance(last, ToolResultEntry):
        return call("add", {"a": 1, "b": 2}, call_id=f"c_add_{len(entries)}")
    if said.startswith("explode") and not isinstance(last, ToolResultEntry):
        return call("explode", {}, call_id=f"c_x_{len(entries)}")
    return text(f"answer to {said}")


def _agent() -> Agent[Any]:
    return Agent(name="calc", model=ScriptedProvider(_script), tools=[add, explode])


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(_agent(), db_path=str(tmp_path / "c.db"))) as c:
        yield c


def _chat(c: TestClient, message: str, sid: str | None = None) -> str:
    r = c.post("/api/chat", json={"message": message, **({"session_id": sid} if sid else {})})
    assert r.status_code == 200, r.text
    return str(r.json()["session_id"])


def test_testclient_reaches_the_app_but_a_foreign_host_does_not(client: TestClient) -> None:
    assert client.get("/api/info").status_code == 200
    refused = client.get("/api/info", headers={"host": "evil.example"})
    assert refused.status_code == 421 and refused.json()["detail"]["code"] == "host_not_allowed"


def test_entries_are_messages_with_refs_tool_calls_and_the_closing_duration(client: TestClient) -> None:
    sid = _chat(client, "add please")
    sid = _chat(client, "explode now", sid)
    detail = client.get(f"/api/sessions/{sid}").json()
    msgs = detail["entries"]
    assert all(set(m) == FIELDS for m in msgs)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"] * 2
    user1, call1, result1, answer1, user2, _call2, result2, answer2 = msgs
    runs = [r["run_id"] for r in detail["runs"]]
    assert user1["ref"] == f"{runs[0]}:0" and user2["ref"] == f"{runs[1]}:0"
    assert call1["tool_calls"] == [{"id": result1["tool_call_id"], "name": "add", "arguments": '{"a": 1, "b": 2}'}]
    assert result1["name"] == "add" and result1["content"] == "3" and result1["is_error"] is False
    assert result2["name"] == "explode" and result2["is_error"] is True and "boom" in result2["content"]
    assert answer1["content"] == "answer to add please" and answer2["content"] == "answer to explode now"
    for answer, run in ((answer1, detail["runs"][0]), (answer2, detail["runs"][1])):
        timing = run["timing"]
        assert answer["duration"] == pytest.approx(timing["finished_at"] - timing["started_at"], abs=0.002)
        assert answer["timestamp"] == timing["finished_at"]
    assert user1["timestamp"] == detail["runs"][0]["timing"]["started_at"]
    assert all(m["duration"] is None for m in msgs if m not in (answer1, answer2))
    # The page's own view of the same chat: the stored entries.
    assert [e["type"] for e in detail["transcript"]][:4] == ["input", "tool_call", "tool_result", "assistant_text"]


def test_rewind_and_fork_by_ref(client: TestClient) -> None:
    sid = _chat(client, "first")
    sid = _chat(client, "second", sid)
    sid = _chat(client, "third", sid)
    refs = [m["ref"] for m in client.get(f"/api/sessions/{sid}").json()["entries"] if m["role"] == "user"]
    assert len(refs) == 3 and len(set(refs)) == 3
    branch = client.post(f"/api/sessions/{sid}/fork", json={"ref": refs[2]})
    assert branch.status_code == 200, branch.text
    copied = client.get(f"/api/sessions/{branch.json()['session_id']}").json()["entries"]
    assert [m["content"] for m in copied if m["role"] == "user"] == ["first", "second"]
    missing = client.post(f"/api/sessions/{sid}/fork", json={"ref": "run_gone:0"})
    assert missing.status_code == 404 and missing.json()["detail"]["code"] == "turn_not_found"
    # Rewind at the second message: refs of what is kept do not move.
    r = client.post(f"/api/sessions/{sid}/rewind", json={"ref": refs[1]})
    assert r.status_code == 200, r.text
    kept = client.get(f"/api/sessions/{sid}").json()["entries"]
    assert [(m["content"], m["ref"]) for m in kept if m["role"] == "user"] == [("first", refs[0])]
    gone = client.post(f"/api/sessions/{sid}/rewind", json={"ref": refs[2]})
    assert gone.status_code == 404 and gone.json()["detail"]["code"] == "turn_not_found"
    both = client.post(f"/api/sessions/{sid}/rewind", json={"ref": refs[0], "user_turn": 0})
    neither = client.post(f"/api/sessions/{sid}/rewind", json={})
    assert both.status_code == 422 and neither.status_code == 422
    assert client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 0}).status_code == 200


def test_a_stream_ends_with_refs_and_timing_before_done(tmp_path: Path) -> None:
    with ThreadServer(create_app(_agent(), db_path=str(tmp_path / "s.db"))) as srv:
        s = sse(srv.url, "/api/chat/stream", {"message": "add it"})
        names = s.names()
        assert names[-3:] == ["refs", "timing", "done"]
        run_id = s.of("done")[0]["run_id"]
        assert s.of("refs")[0] == {"refs": [f"{run_id}:0"]}
        timing = s.of("timing")[0]
        assert timing["duration"] >= 0 and timing["finished_at"] > 0
        sid = s.of("session")[0]["session_id"]
        detail = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
        assert detail["entries"][0]["ref"] == f"{run_id}:0"
        assert detail["entries"][-1]["duration"] == timing["duration"]
        # A second stream on the idle chat starts with a snapshot in both forms.
        s2 = sse(srv.url, "/api/chat/stream", {"message": "again", "session_id": sid}, until="snapshot")
        snap = s2.of("snapshot")[0]
        assert [m["role"] for m in snap["entries"]][:4] == ["user", "assistant", "tool", "assistant"]
        assert snap["entries"][0]["ref"] == f"{run_id}:0" and snap["entries"][-1]["ref"] is None  # not finished
        assert [e["type"] for e in snap["transcript"]][-1] == "input"


PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@tool(returns_images=True)
def snapshot_tool(kind: str) -> Any:
    """A picture (or a script-capable one, which is never served)."""
    if kind == "svg":
        return ImagePart(data=base64.b64encode(b"<svg onload='alert(1)'/>").decode(), mime_type="image/svg+xml")
    return ImagePart(data=base64.b64encode(PNG).decode(), mime_type="image/png")


def test_tool_images_are_served_by_index_and_unservable_ones_are_404(tmp_path: Path) -> None:
    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said = next(e.text for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")
        if isinstance(entries[-1], ToolResultEntry):
            return text("here")
        return call("snapshot_tool", {"kind": said}, call_id=f"c_{said}")

    agent = Agent(name="pics", model=ScriptedProvider(script), tools=[snapshot_tool])
    with TestClient(create_app(agent, db_path=str(tmp_path / "i.db"))) as c:
        sid = _chat(c, "png")
        sid = _chat(c, "svg", sid)
        msgs = c.get(f"/api/sessions/{sid}").json()["entries"]
        tool_msgs = [m for m in msgs if m["role"] == "tool"]
        assert [m["images"] for m in tool_msgs] == [
            [{"index": 0, "mime_type": "image/png"}],
            [{"index": 0, "mime_type": "image/svg+xml"}],
        ]
        got = c.get(f"/api/sessions/{sid}/tool-images/c_png/0")
        assert got.status_code == 200 and got.content == PNG
        assert got.headers["content-type"] == "image/png" and got.headers["x-content-type-options"] == "nosniff"
        for path in ("c_svg/0", "c_png/1", "c_nope/0"):
            r = c.get(f"/api/sessions/{sid}/tool-images/{path}")
            assert r.status_code == 404 and r.json()["detail"]["code"] == "image_not_found", path
        assert c.get("/api/sessions/nope/tool-images/c_png/0").json()["detail"]["code"] == "session_not_found"


def test_live_runs_report_status_turns_source_and_start(tmp_path: Path) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "r.db"))) as srv:
        asked = sse(srv.url, "/api/chat/stream", {"message": "remove a.txt"}, until="approval_required")
        sid = asked.of("session")[0]["session_id"]
        approval = asked.of("approval_required")[0]
        (run,) = httpx.get(f"{srv.url}/api/runs").json()
        assert run["session_id"] == sid and run["status"] == "blocked_on_approval"
        assert run["turns"] == 1 and run["source"] == "user" and run["agent"] == "scripted"
        assert run["started_at"] <= time.time() and run["run_id"] == asked.of("snapshot")[0]["run_id"]
        decided = {"session_id": sid, "call_id": approval["id"], "decision": "deny"}
        assert httpx.post(f"{srv.url}/api/chat/approve", json=decided).status_code == 200
        wait_for(lambda: httpx.get(f"{srv.url}/api/runs").json() == [])
