"""The ``Scheduling`` plugin: the agent proposes a schedule, the user approves it in the web app,
the server fires it on its clock, and a fire cancels its own schedule without any approval."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, Runner
from lovia.exceptions import UserError
from lovia.stores import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import ChatStore, create_app
from lovia.web.scheduler import ManualClock
from lovia.web.scheduling import Scheduling
from lovia.web.store import SQLiteScheduleStore, open_schedule_store

from .helpers import ThreadServer, sse, wait_for

T0 = 1_800_000_000.0


def _last_user(entries: list[TranscriptEntry]) -> str:
    return next(e.text for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user")


def _results(entries: list[TranscriptEntry]) -> list[ToolResultEntry]:
    return [e for e in entries if isinstance(e, ToolResultEntry)]


def _script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said = _last_user(entries)
    since = entries[max(i for i, e in enumerate(entries) if isinstance(e, InputEntry) and e.role == "user") :]
    done = _results(since)
    if said.startswith("watch the log") and not done:
        return call(
            "schedule_run",
            {
                "instruction": "read the log",
                "trigger": "every",
                "value": "60",
                "until": "it says ready",
                "max_fires": 9,
            },
            call_id="c_sched",
        )
    if "[Schedule " in said and not done:  # a fire: the stop condition holds, cancel
        schedule_id = said.split("schedule_id='", 1)[1].split("'", 1)[0]
        return call("cancel_schedule", {"schedule_id": schedule_id}, call_id="c_cancel")
    if said == "what is scheduled?" and not done:
        return call("list_schedules", {}, call_id="c_list")
    return text(f"done: {done[-1].output[:200] if done else 'nothing'}")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ThreadServer, ManualClock, str]]:
    db = str(tmp_path / "chats.db")
    store = ChatStore.sqlite(db)
    clock = ManualClock(T0)
    agent = Agent(name="watcher", model=ScriptedProvider(_script), plugins=[Scheduling(store, clock=clock)])
    app = create_app(agent, store=store, schedules=open_schedule_store(db), scheduler_poll=0.02, clock=clock)
    with ThreadServer(app) as srv:
        yield srv, clock, db


def _schedules(base: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{base}/api/schedules").json())


def test_an_approved_schedule_fires_on_the_clock_and_the_fire_cancels_it(served: Any) -> None:
    srv, clock, _db = served
    asked = sse(
        srv.url, "/api/chat/stream", {"message": "watch the log until it says ready"}, until="approval_required"
    )
    approval = asked.of("approval_required")[0]
    sid = asked.of("session")[0]["session_id"]
    assert approval["name"] == "schedule_run"
    assert _schedules(srv.url) == []  # nothing exists before the user says yes
    r = httpx.post(
        f"{srv.url}/api/chat/approve", json={"session_id": sid, "call_id": approval["id"], "decision": "approve"}
    )
    assert r.status_code == 200, r.text
    rows = wait_for(lambda: _schedules(srv.url) or None)
    assert len(rows) == 1
    row = rows[0]
    assert row["session_id"] == sid and row["trigger_kind"] == "every" and row["next_fire"] == T0 + 60
    assert row["max_fires"] == 9 and row["active"] and "it says ready" in row["until"]
    wait_for(lambda: not httpx.get(f"{srv.url}/api/sessions/{sid}").json()["live"])

    clock.advance(61)  # the slot is due: the server fires it into the same chat
    wait_for(lambda: not _schedules(srv.url)[0]["active"], timeout=20)
    after = _schedules(srv.url)[0]
    assert after["finished_reason"] == "cancelled" and after["fire_count"] == 1
    wait_for(lambda: not httpx.get(f"{srv.url}/api/sessions/{sid}").json()["live"])
    entries = httpx.get(f"{srv.url}/api/sessions/{sid}").json()["transcript"]
    cancel = [e for e in entries if e.get("type") == "tool_result" and e.get("call_id") == "c_cancel"]
    assert len(cancel) == 1 and not cancel[0]["is_error"]  # no approval was asked in the clientless fire
    clock.advance(600)
    assert _schedules(srv.url)[0]["fire_count"] == 1  # cancelled: it never fires again


def test_a_denied_schedule_leaves_nothing(served: Any) -> None:
    srv, _clock, _db = served
    asked = sse(srv.url, "/api/chat/stream", {"message": "watch the log please"}, until="approval_required")
    approval = asked.of("approval_required")[0]
    sid = asked.of("session")[0]["session_id"]
    r = httpx.post(
        f"{srv.url}/api/chat/approve", json={"session_id": sid, "call_id": approval["id"], "decision": "deny"}
    )
    assert r.status_code == 200
    wait_for(lambda: not httpx.get(f"{srv.url}/api/sessions/{sid}").json()["live"])
    assert _schedules(srv.url) == []


async def _run(plugin: Scheduling, script: Any, message: str, *, session_id: str | None = "chat_1") -> Any:
    agent = Agent(name="a", model=ScriptedProvider(script), plugins=[plugin], approval_handler=lambda *_a, **_k: True)
    return await Runner.run(agent, message, session=InMemorySession(), session_id=session_id)


def _one_call(name: str, args: dict[str, Any]) -> Any:
    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        results = _results(entries)
        if not results:
            return call(name, args, call_id="c1")
        return text(json.dumps({"error": results[-1].is_error, "output": results[-1].output}))

    return script


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"instruction": "x", "trigger": "every", "value": "0"}, "interval"),
        ({"instruction": "x", "trigger": "cron", "value": "not a cron"}, "cron"),
        ({"instruction": "x", "trigger": "at", "value": "someday"}, "someday"),
        ({"instruction": "  ", "trigger": "every", "value": "60"}, "empty"),
        ({"instruction": "x", "trigger": "every", "value": "60", "until": "it is done"}, "safety limit"),
        ({"instruction": "x", "trigger": "every", "value": "60", "max_fires": 0}, "max_fires"),
        ({"instruction": "x", "trigger": "every", "value": "60", "expires_at": "tomorrowish"}, "expires_at"),
    ],
)
async def test_bad_proposals_are_tool_errors_the_model_can_fix(
    tmp_path: Path, args: dict[str, Any], needle: str
) -> None:
    store = SQLiteScheduleStore(str(tmp_path / "s.db"))
    result = await _run(Scheduling(store), _one_call("schedule_run", args), "go")
    answer = json.loads(result.output)
    assert answer["error"] is True and needle in answer["output"].lower()
    assert await store.list() == []
    await store.close()


async def test_list_and_cancel_without_a_server(tmp_path: Path) -> None:
    store = SQLiteScheduleStore(str(tmp_path / "s.db"))
    plugin = Scheduling(store, clock=lambda: T0)
    made = await _run(
        plugin, _one_call("schedule_run", {"instruction": "x", "trigger": "at", "value": str(T0 + 5)}), "go"
    )
    created = json.loads(json.loads(made.output)["output"])
    assert created["this_chat"] and created["active"]
    listed = await _run(plugin, _one_call("list_schedules", {}), "list", session_id="chat_2")
    rows = json.loads(json.loads(listed.output)["output"])
    assert [r["schedule_id"] for r in rows] == [created["schedule_id"]] and rows[0]["this_chat"] is False
    gone = await _run(plugin, _one_call("cancel_schedule", {"schedule_id": "sched_nope"}), "cancel")
    assert json.loads(gone.output)["error"] is True
    done = await _run(plugin, _one_call("cancel_schedule", {"schedule_id": created["schedule_id"]}), "cancel")
    assert json.loads(json.loads(done.output)["output"])["finished_reason"] == "cancelled"
    assert (await store.get(created["schedule_id"])).active is False  # type: ignore[union-attr]
    await store.close()


def test_a_store_without_a_location_is_refused_with_a_hint() -> None:
    with pytest.raises(UserError) as info:
        Scheduling(object()).schedules()
    assert info.value.hint


def test_a_chat_store_lends_its_own_schedule_store() -> None:
    store = ChatStore.in_memory()  # no file: the schedules live in the store's own in-memory database
    assert Scheduling(store).schedules() is store.schedule_store
