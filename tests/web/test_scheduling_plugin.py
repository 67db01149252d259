"""The ``Scheduling`` plugin over HTTP: start_session's linked chat, schedule_run's approval, cancel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, Runner
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry
from lovia.web import ChatStore, Scheduling, create_app

from .helpers import ThreadServer, last_user, sse, wait_for


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said, results = last_user(entries)
    word, _, rest = said.partition(" ")
    last = next((e for e in reversed(entries) if isinstance(e, ToolResultEntry)), None)
    if results:
        return text(f"Tool said: {last.output if last else ''}")
    if word == "spin-off":
        return call("start_session", {"instruction": f"work on {rest}", "title": "Side job"}, call_id="c_start")
    if word == "schedule":
        args = {"message": rest, "trigger_kind": "every", "trigger_expr": "3600"}
        return call("schedule_run", args, call_id=f"c_sched_{len(entries)}")
    if word == "bad-schedule":
        args = {"message": rest, "trigger_kind": "cron", "trigger_expr": "61 * * * *"}
        return call("schedule_run", args, call_id=f"c_bad_{len(entries)}")
    if word == "cancel":
        return call("cancel_schedule", {"schedule_id": rest}, call_id=f"c_cancel_{len(entries)}")
    if word == "list":
        return call("list_schedules", {}, call_id=f"c_list_{len(entries)}")
    return text(f"You said: {said}")


@pytest.fixture
def store(tmp_path: Path) -> ChatStore:
    return ChatStore.sqlite(tmp_path / "web.db")


@pytest.fixture
def server(store: ChatStore) -> Iterator[ThreadServer]:
    agent = Agent(name="planner", model=ScriptedProvider(script), plugins=[Scheduling(store)])
    with ThreadServer(create_app(agent, store=store)) as srv:
        yield srv


def _detail(base: str, sid: str) -> dict[str, Any]:
    return dict(httpx.get(f"{base}/api/sessions/{sid}").json())


def _approve(base: str, message: str, session_id: str | None = None) -> str:
    s = sse(base, "/api/chat/stream", {"message": message, "session_id": session_id}, until="approval_required")
    asked = s.of("approval_required")[0]
    sid = str(s.of("session")[0]["session_id"])
    r = httpx.post(f"{base}/api/chat/approve", json={"session_id": sid, "call_id": asked["id"], "decision": "approve"})
    assert r.status_code == 200, r.text
    wait_for(lambda: not _detail(base, sid)["live"], timeout=30)
    return sid


def test_start_session_opens_a_linked_chat_that_runs_at_once(server: ThreadServer) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "spin-off the report"})
    parent = first.of("session")[0]["session_id"]
    started = json.loads(first.text().removeprefix("Tool said: "))
    assert started["title"] == "Side job" and started["status"] == "running"
    child = started["session_id"]
    wait_for(lambda: not _detail(server.url, child)["live"], timeout=30)
    detail = _detail(server.url, child)
    assert [e["content"] for e in detail["entries"]] == ["work on the report", "You said: work on the report"]
    assert detail["origin"]["kind"] == "spawn" and detail["origin"]["session_id"] == parent
    (listed,) = httpx.get(f"{server.url}/api/sessions/{parent}/children").json()["children"]
    assert listed["id"] == child and listed["kind"] == "spawn" and listed["status"] == "completed"
    # It belongs to no one: deleting the chat that started it leaves it.
    assert httpx.delete(f"{server.url}/api/sessions/{parent}").status_code == 200
    assert _detail(server.url, child)["origin"]["exists"] is False


def test_schedule_run_waits_for_approval_then_list_and_cancel(server: ThreadServer) -> None:
    sid = _approve(server.url, "schedule check the log")
    (row,) = httpx.get(f"{server.url}/api/schedules").json()
    assert row["session_id"] == sid and row["input"] == "check the log" and row["active"]
    listed = sse(server.url, "/api/chat/stream", {"message": "list", "session_id": sid}).text()
    assert row["id"] in listed
    cancelled = sse(server.url, "/api/chat/stream", {"message": f"cancel {row['id']}", "session_id": sid}).text()
    assert cancelled == f"Tool said: Cancelled {row['id']}."
    (after,) = httpx.get(f"{server.url}/api/schedules").json()  # kept, but inactive
    assert not after["active"] and after["finished_reason"] == "cancelled"
    other = sse(server.url, "/api/chat/stream", {"message": "cancel sched_nope", "session_id": sid}).text()
    assert "has no schedule 'sched_nope'" in other


def test_a_denied_or_invalid_schedule_creates_nothing(server: ThreadServer) -> None:
    s = sse(server.url, "/api/chat/stream", {"message": "schedule never"}, until="approval_required")
    sid = s.of("session")[0]["session_id"]
    call_id = s.of("approval_required")[0]["id"]
    httpx.post(f"{server.url}/api/chat/approve", json={"session_id": sid, "call_id": call_id, "decision": "deny"})
    wait_for(lambda: not _detail(server.url, sid)["live"], timeout=30)
    _approve(server.url, "bad-schedule never", sid)
    results = [e for e in _detail(server.url, sid)["entries"] if e["type"] == "tool_result"]
    assert all(r["is_error"] for r in results) and "61" in results[-1]["output"]
    assert httpx.get(f"{server.url}/api/schedules").json() == []


async def test_without_a_server_the_tools_say_so(tmp_path: Path) -> None:
    lonely = ChatStore.sqlite(tmp_path / "alone.db")
    agent = Agent(name="planner", model=ScriptedProvider(script), plugins=[Scheduling(lonely)])
    result = await Runner.run(agent, "spin-off anything")
    assert "needs the web server" in str(result.output)
    await lonely.close()
