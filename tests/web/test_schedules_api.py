"""``/api/schedules``: every route, its errors, fires that run in their chat, and a SIGKILLed server."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app
from lovia.web.scheduler import ManualClock

from .helpers import Gate, ProcessServer, ThreadServer, scripted_agent, sse, wait_for

T0 = 1_800_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def api(db: str, gate: Gate, clock: ManualClock) -> Iterator[ThreadServer]:
    app = create_app(scripted_agent(gate), db_path=db, scheduler_poll=0.02, clock=clock)
    with ThreadServer(app) as srv:
        yield srv


def _chat(base: str, message: str = "hello") -> str:
    stream = sse(base, "/api/chat/stream", {"message": message}, until="done")
    return str(stream.of("session")[0]["session_id"])


def _answers(base: str, sid: str) -> list[str]:
    entries = httpx.get(f"{base}/api/sessions/{sid}").json()["transcript"]
    return [json.dumps(e) for e in entries if e.get("role") == "assistant" or e.get("kind") == "assistant_text"]


def _inputs(base: str, sid: str) -> list[str]:
    entries = httpx.get(f"{base}/api/sessions/{sid}").json()["transcript"]
    return [str(e.get("content")) for e in entries if e.get("role") == "user"]


def test_create_list_get_patch_delete(api: ThreadServer) -> None:
    base = api.url + "/api/schedules"
    sid = _chat(api.url)
    made = httpx.post(base, json={"input": "ping", "trigger_kind": "every", "trigger_expr": "60", "session_id": sid})
    assert made.status_code == 200, made.text
    row = made.json()
    assert row["next_fire"] == T0 + 60 and row["active"] and row["session_id"] == sid
    assert [r["id"] for r in httpx.get(base).json()] == [row["id"]]
    assert [r["id"] for r in httpx.get(base, params={"session_id": "other"}).json()] == []
    assert httpx.get(f"{base}/{row['id']}").json()["input"] == "ping"
    paused = httpx.patch(f"{base}/{row['id']}", json={"active": False}).json()
    assert not paused["active"] and paused["finished_reason"] == "paused"
    retimed = httpx.patch(f"{base}/{row['id']}", json={"trigger_kind": "cron", "trigger_expr": "0 9 * * *"}).json()
    assert retimed["trigger_kind"] == "cron" and retimed["next_fire"] > T0
    resumed = httpx.patch(f"{base}/{row['id']}", json={"active": True, "input": "pong"}).json()
    assert resumed["active"] and resumed["input"] == "pong" and resumed["finished_reason"] is None
    assert httpx.delete(f"{base}/{row['id']}").json() == {"deleted": row["id"]}
    assert httpx.get(base).json() == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"input": "x", "trigger_kind": "every", "trigger_expr": "0"}, 422, "invalid_request"),
        ({"input": "x", "trigger_kind": "cron", "trigger_expr": "bad"}, 422, "invalid_request"),
        ({"input": "x", "trigger_kind": "at", "trigger_expr": "someday"}, 422, "invalid_request"),
        ({"input": "x", "trigger_kind": "every", "trigger_expr": "60", "agent": "nobody"}, 404, "agent_not_found"),
        ({"input": "x", "trigger_kind": "every", "trigger_expr": "60", "session_id": "nope"}, 404, "session_not_found"),
        ({"input": "x", "trigger_kind": "weekly", "trigger_expr": "60"}, 422, None),
        ({"input": "", "trigger_kind": "every", "trigger_expr": "60"}, 422, None),
        ({"input": "x", "trigger_kind": "every", "trigger_expr": "60", "max_fires": 0}, 422, None),
    ],
)
def test_create_errors(api: ThreadServer, body: dict[str, Any], status: int, code: str | None) -> None:
    response = httpx.post(api.url + "/api/schedules", json=body)
    assert response.status_code == status, response.text
    if code is not None:
        detail = response.json()["detail"]
        assert detail["code"] == code and detail["hint"]


def test_unknown_schedule_is_404_on_every_item_route(api: ThreadServer) -> None:
    base = api.url + "/api/schedules/sched_missing"
    for response in (
        httpx.get(base),
        httpx.patch(base, json={"active": False}),
        httpx.delete(base),
        httpx.post(base + "/run"),
        httpx.get(base + "/runs"),
    ):
        assert response.status_code == 404
        assert response.json()["detail"]["code"] == "schedule_not_found"


def test_patch_with_a_bad_trigger_is_refused_and_changes_nothing(api: ThreadServer) -> None:
    base = api.url + "/api/schedules"
    row = httpx.post(base, json={"input": "x", "trigger_kind": "every", "trigger_expr": "60"}).json()
    bad = httpx.patch(f"{base}/{row['id']}", json={"trigger_expr": "soon"})
    assert bad.status_code == 422 and bad.json()["detail"]["code"] == "invalid_request"
    assert httpx.get(f"{base}/{row['id']}").json()["trigger_expr"] == "60"


def test_due_slot_runs_in_its_chat_and_history_lists_it(api: ThreadServer, clock: ManualClock) -> None:
    base = api.url + "/api/schedules"
    sid = _chat(api.url)
    row = httpx.post(base, json={"input": "count me", "trigger_kind": "every", "trigger_expr": "60", "session_id": sid})
    sched = row.json()
    clock.advance(61)
    # A claim is listed as soon as it is made; its run id and chat follow once the run started.
    runs = wait_for(lambda: [r for r in httpx.get(f"{base}/{sched['id']}/runs").json() if r["run_id"]])
    assert runs[0]["session_id"] == sid and runs[0]["run_id"] and runs[0]["error"] is None
    wait_for(
        lambda: "count me" in _inputs(api.url, sid) and not httpx.get(f"{api.url}/api/sessions/{sid}").json()["live"]
    )
    got = httpx.get(f"{base}/{sched['id']}").json()
    assert got["fire_count"] == 1 and got["next_fire"] == T0 + 120 and got["last_run_id"] == runs[0]["run_id"]


def test_run_now_and_a_schedule_without_chat_opens_one(api: ThreadServer) -> None:
    base = api.url + "/api/schedules"
    row = httpx.post(base, json={"input": "fresh start", "trigger_kind": "every", "trigger_expr": "3600"}).json()
    fired = httpx.post(f"{base}/{row['id']}/run")
    assert fired.status_code == 200, fired.text
    sid = fired.json()["session_id"]
    assert sid and fired.json()["run_id"]
    wait_for(lambda: "fresh start" in _inputs(api.url, sid))
    assert httpx.get(f"{base}/{row['id']}").json()["next_fire"] == row["next_fire"]  # timing untouched


def test_run_now_into_a_deleted_chat_is_409(api: ThreadServer, db: str) -> None:
    base = api.url + "/api/schedules"
    sid = _chat(api.url)
    row = httpx.post(base, json={"input": "x", "trigger_kind": "every", "trigger_expr": "60", "session_id": sid}).json()
    with sqlite3.connect(db) as conn:  # the chat row vanishes behind the app's back
        conn.execute("DELETE FROM chat_sessions WHERE id = ?", (sid,))
    fired = httpx.post(f"{base}/{row['id']}/run")
    assert fired.status_code == 409 and fired.json()["detail"]["code"] == "schedule_not_fired"
    assert httpx.get(f"{base}/{row['id']}/runs").json()[0]["error"]


def test_deleting_a_chat_deletes_its_schedules(api: ThreadServer) -> None:
    base = api.url + "/api/schedules"
    keep, drop = _chat(api.url, "one"), _chat(api.url, "two")
    for sid in (keep, drop):
        httpx.post(base, json={"input": "x", "trigger_kind": "every", "trigger_expr": "60", "session_id": sid})
    assert httpx.delete(f"{api.url}/api/sessions/{drop}").status_code == 200
    assert [r["session_id"] for r in httpx.get(base).json()] == [keep]
    assert httpx.delete(f"{api.url}/api/sessions").status_code == 200
    assert httpx.get(base).json() == []


def test_token_protects_the_schedule_routes(db: str) -> None:
    app = create_app(scripted_agent(), db_path=db, token="s3cret")
    with ThreadServer(app) as srv:
        assert httpx.get(srv.url + "/api/schedules").status_code == 401
        ok = httpx.get(srv.url + "/api/schedules", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json() == []


def test_sigkilled_server_neither_loses_nor_repeats_slots(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    args = ("--app", "tests.web.app_fixture:agent", "--db", db)
    with ProcessServer(*args) as first:
        sid = httpx.post(first.url + "/api/chat", json={"message": "go"}, timeout=30).json()["session_id"]
        body = {"input": "tick", "trigger_kind": "every", "trigger_expr": "1", "session_id": sid}
        sched = httpx.post(first.url + "/api/schedules", json=body).json()
        wait_for(lambda: len(httpx.get(f"{first.url}/api/schedules/{sched['id']}/runs").json()) >= 1, timeout=20)
        first.kill()
    time.sleep(2.5)  # a couple of slots pass while no server runs
    with ProcessServer(*args) as second:
        runs_url = f"{second.url}/api/schedules/{sched['id']}/runs"
        before = len(httpx.get(runs_url).json())
        wait_for(lambda: len(httpx.get(runs_url).json()) >= before + 1, timeout=20)
        claims = httpx.get(runs_url, params={"limit": 500}).json()
        row = httpx.get(f"{second.url}/api/schedules/{sched['id']}").json()
    slots = [c["slot"] for c in claims]
    assert len(slots) == len(set(slots)) == row["fire_count"]
    assert all(c["run_id"] or c["error"] for c in claims if c["fired_at"])
    unfinished = [c for c in claims if not c["fired_at"]]
    assert len(unfinished) <= 1  # at most the slot in flight at the kill: reclaimed after reclaim_after
    gaps = sorted(b - a for a, b in zip(sorted(slots), sorted(slots)[1:], strict=False))
    assert gaps[-1] >= 2  # the downtime coalesced into one fire instead of a burst
