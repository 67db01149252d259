"""The Schedules dialog in real Chromium: create, invalid triggers, pause, run now, history, delete."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app

from .helpers import Gate, ThreadServer, scripted_agent, wait_for
from .test_browser import CHROMIUM, IMG, idle, page, send, texts

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    app = create_app(scripted_agent(Gate()), db_path=str(tmp_path / "web.db"), scheduler_poll=0.05)
    with ThreadServer(app) as srv:
        yield srv


def _user_messages(base: str, sid: str) -> list[str]:
    entries = httpx.get(f"{base}/api/sessions/{sid}").json()["transcript"]
    return [str(e["content"]) for e in entries if e.get("role") == "user"]


def _create(page: Any, kind: str, expr: str, message: str, target: str | None = None) -> None:
    page.get_by_test_id("schedule-kind").select_option(kind)
    page.get_by_test_id("schedule-expr").fill(expr)
    page.get_by_test_id("schedule-message").fill(message)
    if target is not None:
        page.get_by_test_id("schedule-target").select_option(target)
    page.get_by_test_id("schedule-create").click()


def test_schedule_lifecycle_in_the_dialog(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "hello there")
    idle(page)
    sid = page.evaluate("decodeURIComponent(location.hash.slice('#/chat/'.length))")
    page.get_by_test_id("schedules-open").click()
    dialog = page.get_by_test_id("schedules-dialog")
    dialog.wait_for()
    assert page.get_by_test_id("schedule-target").input_value() == sid  # defaults to the open chat

    # An invalid cron expression: nothing is created and the server's own words are shown.
    expected = httpx.post(
        server.url + "/api/schedules", json={"input": "x", "trigger_kind": "cron", "trigger_expr": "61 * * * *"}
    ).json()["detail"]
    _create(page, "cron", "61 * * * *", "count the logs")
    error = page.get_by_test_id("schedules-error")
    error.wait_for()
    assert error.inner_text() == f"{expected['message']} ({expected['hint']})"
    assert httpx.get(server.url + "/api/schedules").json() == []
    _create(page, "every", "0", "count the logs")  # no interval at all
    page.wait_for_function(
        "() => document.querySelector('[data-testid=schedules-error]').textContent.includes('out of range')"
    )

    _create(page, "every", "3600", "count the logs")
    item = page.get_by_test_id("schedule-item")
    item.wait_for()
    assert error.is_hidden()  # a success clears the last error
    assert "every 3600 s" in item.inner_text() and "next " in item.inner_text()
    assert item.get_by_test_id("schedule-chat").inner_text() == "in its chat"  # bound: a link to it
    assert page.get_by_test_id("schedule-message").input_value() == ""

    # Pause, then run it now anyway: a manual fire works while paused and leaves it paused.
    item.get_by_test_id("schedule-toggle").click()
    page.wait_for_function("() => document.querySelector('[data-testid=schedule-status]').textContent === 'paused'")
    assert item.get_by_test_id("schedule-toggle").inner_text() == "Resume"
    item.get_by_test_id("schedule-run").click()
    wait_for(lambda: _user_messages(server.url, sid) == ["hello there", "count the logs"], timeout=30)
    item.get_by_test_id("schedule-history-open").click()
    page.get_by_test_id("schedule-fire").first.wait_for()
    (row,) = httpx.get(server.url + "/api/schedules").json()
    assert not row["active"] and row["finished_reason"] == "paused"
    assert page.get_by_test_id("schedule-status").inner_text() == "paused"

    # A second schedule that opens a new chat at each fire, then resumed and screenshotted.
    _create(page, "cron", "0 9 * * 1-5", "morning summary", target="")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=schedule-item]').length === 2")
    page.get_by_test_id("schedule-item").first.get_by_test_id("schedule-toggle").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=schedule-status]')]"
        ".every((s) => s.textContent.startsWith('next'))"
    )
    page.screenshot(path=str(IMG / "web-schedules.png"))

    # The history's link opens the chat the fire ran in.
    page.get_by_test_id("schedule-fire-open").first.click()
    dialog.wait_for(state="hidden")
    page.wait_for_function(f"() => location.hash === '#/chat/{sid}'")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=message-user]').length === 2")
    assert texts(page, "message-user") == ["hello there", "count the logs"]

    # Delete takes a second click.
    page.get_by_test_id("schedules-open").click()
    morning = page.get_by_test_id("schedule-item").filter(has_text="morning summary")
    morning.get_by_test_id("schedule-delete").click()
    assert morning.get_by_test_id("schedule-delete").inner_text() == "Delete?"
    assert len(httpx.get(server.url + "/api/schedules").json()) == 2
    morning.get_by_test_id("schedule-delete").click()
    page.wait_for_function("() => document.querySelectorAll('[data-testid=schedule-item]').length === 1")
    assert [r["input"] for r in httpx.get(server.url + "/api/schedules").json()] == ["count the logs"]


def test_actions_on_a_schedule_deleted_elsewhere_show_the_error(server: ThreadServer, page: Any) -> None:
    made = httpx.post(
        server.url + "/api/schedules", json={"input": "ping", "trigger_kind": "every", "trigger_expr": "600"}
    ).json()
    page.goto(server.url)
    page.get_by_test_id("schedules-open").click()
    item = page.get_by_test_id("schedule-item")
    item.wait_for()
    assert "new chat each fire" in item.inner_text()
    assert httpx.delete(f"{server.url}/api/schedules/{made['id']}").status_code == 200  # another tab
    item.get_by_test_id("schedule-run").click()
    error = page.get_by_test_id("schedules-error")
    error.wait_for()
    assert re.search(r"no schedule 'sched_\w+'", error.inner_text())
    page.get_by_text("No schedules yet.").wait_for()  # and the list caught up
    page.get_by_test_id("schedules-close").click()
    page.get_by_test_id("schedules-dialog").wait_for(state="hidden")


def test_a_timed_fire_shows_up_in_the_open_dialog(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    page.get_by_test_id("schedules-open").click()
    _create(page, "at", f"{time.time() + 2:.0f}", "one-off check", target="")
    item = page.get_by_test_id("schedule-item")
    item.wait_for()
    assert "fired 0×" in item.inner_text()
    # No click: the server's schedule_fired / run_finished events refresh the open list.
    page.wait_for_function(
        "() => document.querySelector('[data-testid=schedule-item]')?.textContent.includes('fired 1×')",
        timeout=30_000,
    )
    assert page.get_by_test_id("schedule-toggle").inner_text() == "Resume"  # a one-off is done once fired
    item.get_by_test_id("schedule-history-open").click()
    page.get_by_test_id("schedule-fire-open").click()  # the fire opened a chat of its own
    page.get_by_text("You said: one-off check").wait_for(timeout=30_000)
    sessions = httpx.get(server.url + "/api/sessions").json()
    assert [s["title"] for s in sessions] == ["one-off check"]


def test_a_message_a_schedule_sent_is_marked_as_such(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "hello there")
    idle(page)
    sid = page.evaluate("location.hash").split("/")[-1]
    made = httpx.post(
        server.url + "/api/schedules",
        json={"input": "count the logs", "trigger_kind": "every", "trigger_expr": "3600", "session_id": sid},
    ).json()
    assert httpx.post(f"{server.url}/api/schedules/{made['id']}/run").status_code == 200
    wait_for(lambda: _user_messages(server.url, sid) == ["hello there", "count the logs"], timeout=30)
    page.reload()
    marks = page.get_by_test_id("scheduled-mark")
    marks.first.wait_for()
    turns = page.get_by_test_id("message-user")
    assert marks.count() == 1 and turns.nth(1).get_by_test_id("scheduled-mark").count() == 1
    assert turns.nth(0).get_by_test_id("scheduled-mark").count() == 0  # the typed one is not marked
