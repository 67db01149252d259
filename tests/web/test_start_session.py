"""``Scheduling``'s start_session over HTTP: a linked 'spawn' chat that runs at once and belongs to no one."""

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
    if word == "empty-spin-off":
        return call("start_session", {"instruction": "  "}, call_id="c_empty")
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


def test_start_session_opens_a_linked_chat_that_runs_at_once(server: ThreadServer) -> None:
    first = sse(server.url, "/api/chat/stream", {"message": "spin-off the report"})
    parent = first.of("session")[0]["session_id"]
    started = json.loads(first.text().removeprefix("Tool said: "))
    assert started["title"] == "Side job" and started["status"] == "running"
    child = started["session_id"]
    wait_for(lambda: not _detail(server.url, child)["live"], timeout=30)
    detail = _detail(server.url, child)
    assert [e["content"] for e in detail["transcript"]] == ["work on the report", "You said: work on the report"]
    assert detail["origin"]["kind"] == "spawn" and detail["origin"]["session_id"] == parent
    (listed,) = httpx.get(f"{server.url}/api/sessions/{parent}/children").json()["children"]
    assert listed["id"] == child and listed["kind"] == "spawn" and listed["status"] == "completed"
    # It belongs to no one: deleting the chat that started it leaves it.
    assert httpx.delete(f"{server.url}/api/sessions/{parent}").status_code == 200
    assert _detail(server.url, child)["origin"]["exists"] is False


def test_an_empty_instruction_leaves_no_chat(server: ThreadServer) -> None:
    reply = sse(server.url, "/api/chat/stream", {"message": "empty-spin-off"}).text()
    assert "the instruction is empty" in reply
    assert len(httpx.get(f"{server.url}/api/sessions").json()) == 1


async def test_without_a_server_the_tool_says_so(tmp_path: Path) -> None:
    lonely = ChatStore.sqlite(tmp_path / "alone.db")
    agent = Agent(name="planner", model=ScriptedProvider(script), plugins=[Scheduling(lonely)])
    result = await Runner.run(agent, "spin-off anything")
    assert "needs the web server" in str(result.output)
    await lonely.close()


def test_at_the_run_cap_the_call_fails_and_leaves_no_chat(tmp_path: Path) -> None:
    store = ChatStore.sqlite(tmp_path / "capped.db")
    agent = Agent(name="planner", model=ScriptedProvider(script), plugins=[Scheduling(store)])
    with ThreadServer(create_app(agent, store=store, max_background_runs=1)) as srv:
        reply = sse(srv.url, "/api/chat/stream", {"message": "spin-off more"}).text()
        assert "limit of 1 concurrent runs" in reply  # the calling run holds the only slot
        assert len(httpx.get(f"{srv.url}/api/sessions").json()) == 1
