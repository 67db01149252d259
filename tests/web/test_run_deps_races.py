"""Messages, fires, reconnects, stops and deletes racing a run's start or end, over real HTTP.

Each race is put in order by the test itself: the ``run_deps`` hook and the model wait on
threading events the test sets, so nothing depends on timing.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import create_app
from lovia.web.run_deps import RunTrigger

from .helpers import ThreadServer, sse, wait_for
from .test_browser import CHROMIUM, idle, page, send, texts

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

SID = "chat_race"
WAIT = 20.0


class Stage:
    """Where the test holds the server: in the ``run_deps`` hook, or in a model call."""

    def __init__(self, *, hold_hook: int = 0, hold_model: tuple[str, ...] = (), refuse_unasked: bool = False) -> None:
        self.hold_hook = hold_hook  # the n-th hook call (1-based) waits for hook_go; 0: none
        self.refuse_unasked = refuse_unasked  # refuse a run nobody requested (a resume at start-up)
        self.hold_model = set(hold_model)  # a model call answering one of these messages waits for model_go
        self.hook_in, self.hook_go = threading.Event(), threading.Event()
        self.model_in, self.model_go = threading.Event(), threading.Event()
        self.triggers: list[RunTrigger] = []
        self.model_calls = 0

    async def hook(self, trigger: RunTrigger) -> str:
        if self.refuse_unasked and trigger.request is None:
            raise RuntimeError("no request: not resumed here")
        self.triggers.append(trigger)
        if len(self.triggers) == self.hold_hook:
            self.hook_in.set()
            await _until(self.hook_go)
        return "deps"

    def release(self) -> None:
        self.hook_go.set()
        self.model_go.set()


async def _until(event: threading.Event) -> None:
    """Wait for the test to set ``event`` (cancellable, unlike a thread blocked on it)."""
    for _ in range(int(WAIT / 0.01)):
        if event.is_set():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("the test never released the server")


def _last_user(entries: list[TranscriptEntry]) -> tuple[str, int]:
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if isinstance(entry, InputEntry) and entry.role == "user":
            return entry.text, sum(1 for e in entries[i:] if isinstance(e, ToolResultEntry))
    return "", 0


def _agent(stage: Stage) -> Agent[Any]:
    """Answers ``answer: <the last user message>``; a held message first calls ``note``, so the
    run has a second turn, and that turn reads what joined meanwhile."""

    @tool
    def note() -> str:
        """Take a note."""
        return "noted"

    async def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        stage.model_calls += 1
        said, results = _last_user(entries)
        if said.startswith("via tool") and results == 0:
            if said in stage.hold_model:
                stage.model_in.set()
                await _until(stage.model_go)
            return call("note", {}, call_id=f"call_{len(entries)}")
        if said in stage.hold_model:
            stage.model_in.set()
            await _until(stage.model_go)
        return text(f"answer: {said}")

    return Agent(name="bot", model=ScriptedProvider(script), tools=[note])


def _server(tmp_path: Path, stage: Stage) -> ThreadServer:
    app = create_app(_agent(stage), db_path=str(tmp_path / "race.db"), run_deps=stage.hook, titles=False)
    return ThreadServer(app)


def _in_background(target: Any, *args: Any, **kwargs: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, kwargs=kwargs, daemon=True)
    thread.start()
    return thread


def _said(base: str, sid: str = SID) -> list[tuple[str, str]]:
    """``(role, text)`` of the chat's user and assistant messages, as stored."""
    entries = httpx.get(f"{base}/api/sessions/{sid}", timeout=WAIT).json()["entries"]
    return [(m["role"], str(m["content"])) for m in entries if m["role"] in ("user", "assistant") and m["content"]]


def _runs(base: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{base}/api/runs/history", timeout=WAIT).json()["runs"])


@pytest.mark.parametrize("how", ["inject", "join"])
def test_a_message_that_joins_a_run_in_its_last_turn_starts_the_next_run(tmp_path: Path, how: str) -> None:
    stage = Stage(hold_model=("first",))
    with _server(tmp_path, stage) as srv:
        first = _in_background(sse, srv.url, "/api/chat/stream", {"message": "first", "session_id": SID})
        assert stage.model_in.wait(WAIT)  # the run read its mailbox and is giving its last answer
        if how == "inject":
            sent = httpx.post(f"{srv.url}/api/chat/inject", json={"session_id": SID, "message": "second"})
            assert sent.status_code == 200 and sent.json()["accepted"] is True
        else:  # a second message sent while the run is live joins it
            sse(srv.url, "/api/chat/stream", {"message": "second", "session_id": SID}, until="session")
        stage.model_go.set()
        first.join(WAIT)
        wait_for(lambda: ("assistant", "answer: second") in _said(srv.url), timeout=WAIT)
        assert _said(srv.url) == [
            ("user", "first"),
            ("assistant", "answer: first"),
            ("user", "second"),
            ("assistant", "answer: second"),
        ]
        wait_for(lambda: not httpx.get(f"{srv.url}/api/runs").json())
        runs = _runs(srv.url)
        assert [r["status"] for r in runs] == ["completed", "completed"]
        assert [t.source for t in stage.triggers] == ["user"]  # the next run keeps the deps the message joined


def test_a_stop_drops_what_is_still_queued(tmp_path: Path) -> None:
    stage = Stage(hold_model=("first",))
    with _server(tmp_path, stage) as srv:
        first = _in_background(sse, srv.url, "/api/chat/stream", {"message": "first", "session_id": SID})
        assert stage.model_in.wait(WAIT)
        sent = httpx.post(f"{srv.url}/api/chat/inject", json={"session_id": SID, "message": "second"})
        assert sent.json()["accepted"] is True
        stopped = httpx.post(f"{srv.url}/api/chat/cancel", params={"session_id": SID}, timeout=WAIT)
        assert stopped.json() == {"stopped": True}
        stage.model_go.set()
        first.join(WAIT)
        # Were "second" handed on, its run would hold the chat by now and this would be refused (409).
        third = httpx.post(f"{srv.url}/api/chat", json={"message": "third", "session_id": SID}, timeout=WAIT)
        assert third.status_code == 200 and third.json()["output"] == "answer: third"
        assert sorted(r["status"] for r in _runs(srv.url)) == ["cancelled", "completed"]
        assert ("user", "second") not in _said(srv.url)
        assert stage.model_calls == 2


def test_a_message_sent_while_the_first_ones_hook_runs_joins_that_run(tmp_path: Path) -> None:
    stage = Stage(hold_hook=1, hold_model=("via tool first",))
    with _server(tmp_path, stage) as srv:
        first = _in_background(sse, srv.url, "/api/chat/stream", {"message": "via tool first", "session_id": SID})
        assert stage.hook_in.wait(WAIT)
        body = {"message": "second", "session_id": SID}
        second = _in_background(sse, srv.url, "/api/chat/stream", body, until="session")
        stage.hook_go.set()
        second.join(WAIT)  # it has joined the run: held in its first model call, or not yet in it
        stage.model_go.set()  # (a join before that call is read by it: the same run either way)
        first.join(WAIT)
        wait_for(lambda: not httpx.get(f"{srv.url}/api/runs").json())
        assert len(_runs(srv.url)) == 1 and len(stage.triggers) == 1  # one run, one hook call
        assert _said(srv.url) == [("user", "via tool first"), ("user", "second"), ("assistant", "answer: second")]


def test_a_fire_into_a_busy_chat_joins_its_run(tmp_path: Path) -> None:
    stage = Stage(hold_model=("via tool first",))
    with _server(tmp_path, stage) as srv:
        first = _in_background(sse, srv.url, "/api/chat/stream", {"message": "via tool first", "session_id": SID})
        assert stage.model_in.wait(WAIT)
        live = httpx.get(f"{srv.url}/api/runs").json()
        body = {"input": "fired", "trigger_kind": "every", "trigger_expr": "3600", "session_id": SID}
        row = httpx.post(f"{srv.url}/api/schedules", json=body).json()
        fired = httpx.post(f"{srv.url}/api/schedules/{row['id']}/run", timeout=WAIT)
        assert fired.status_code == 200, fired.text
        assert fired.json()["run_id"] == live[0]["run_id"]  # no second run: the fire joined this one
        stage.model_go.set()
        first.join(WAIT)
        wait_for(lambda: not httpx.get(f"{srv.url}/api/runs").json())
        assert len(_runs(srv.url)) == 1 and [t.source for t in stage.triggers] == ["user"]
        assert _said(srv.url)[-2:] == [("user", "fired"), ("assistant", "answer: fired")]


def test_a_chat_deleted_while_a_fires_hook_runs_stays_deleted(tmp_path: Path) -> None:
    stage = Stage(hold_hook=2, hold_model=("fired",))  # the first hook call is the message that makes the chat
    with _server(tmp_path, stage) as srv:
        sse(srv.url, "/api/chat/stream", {"message": "hello", "session_id": SID})
        body = {"input": "fired", "trigger_kind": "every", "trigger_expr": "3600", "session_id": SID}
        row = httpx.post(f"{srv.url}/api/schedules", json=body).json()
        fire = _in_background(httpx.post, f"{srv.url}/api/schedules/{row['id']}/run", timeout=WAIT)
        assert stage.hook_in.wait(WAIT)
        assert stage.triggers[-1].source == f"schedule:{row['id']}"
        deleting = _in_background(httpx.delete, f"{srv.url}/api/sessions/{SID}", timeout=WAIT)
        stage.hook_go.set()
        fire.join(WAIT)
        deleting.join(WAIT)
        stage.model_go.set()  # a run the fire started, were it still going, would now write its answer
        wait_for(lambda: not httpx.get(f"{srv.url}/api/runs").json())
        assert _runs(srv.url) == []  # the fire's run went with the chat
        assert httpx.get(f"{srv.url}/api/sessions").json() == []
        assert httpx.get(f"{srv.url}/api/sessions/{SID}").json()["entries"] == []
        assert httpx.get(f"{srv.url}/api/schedules").json() == []


def test_a_stop_while_a_reconnects_hook_runs_keeps_the_run_from_resuming(tmp_path: Path) -> None:
    held = Stage(hold_model=("via tool first",))
    first = _server(tmp_path, held).__enter__()
    try:
        _in_background(sse, first.url, "/api/chat/stream", {"message": "via tool first", "session_id": SID})
        assert held.model_in.wait(WAIT)
    finally:
        first.stop()  # a shutdown: the run is interrupted, its checkpoint kept for a resume
    stage = Stage(hold_hook=1, refuse_unasked=True)  # start-up leaves it to the reconnect
    with _server(tmp_path, stage) as srv:
        assert httpx.get(f"{srv.url}/api/sessions/{SID}").json()["active_run_id"]
        box: dict[str, Any] = {}
        reconnect = _in_background(
            lambda: box.update(stream=sse(srv.url, f"/api/chat/reconnect?session_id={SID}", None))
        )
        assert stage.hook_in.wait(WAIT) and stage.triggers[0].resumed
        stopped = httpx.post(f"{srv.url}/api/chat/cancel", params={"session_id": SID}, timeout=WAIT)
        assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
        stage.hook_go.set()
        reconnect.join(WAIT)
        assert [f["status"] for f in box["stream"].of("snapshot")] == ["idle"]
        assert httpx.get(f"{srv.url}/api/runs").json() == []
        assert httpx.get(f"{srv.url}/api/sessions/{SID}").json()["active_run_id"] is None
        assert _said(srv.url)[0] == ("user", "via tool first")  # what the run had done is kept
        assert stage.model_calls == 0  # the run did not go on


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)")
def test_the_page_shows_the_next_run_a_late_message_started(tmp_path: Path, page: Any) -> None:
    stage = Stage(hold_model=("first",))
    with _server(tmp_path, stage) as srv:
        page.goto(srv.url)
        send(page, "first")
        assert stage.model_in.wait(WAIT)  # the run is giving its last answer
        joined = "/api/chat/stream"
        with page.expect_response(lambda r: joined in r.url and "second" in (r.request.post_data or "")):
            send(page, "second")  # sent while the run is live: it joins it
        stage.model_go.set()
        page.get_by_test_id("message-assistant").get_by_text("answer: second", exact=True).wait_for()
        idle(page)
        assert texts(page, "message-user") == ["first", "second"]
        assert texts(page, "message-assistant") == ["answer: first", "answer: second"]
