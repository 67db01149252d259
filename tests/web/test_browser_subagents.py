"""Background subagents in real Chromium: the parent lists its task, the task links back and streams live."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app

from .helpers import ThreadServer
from .subagent_helpers import delegating_agent
from .test_browser import CHROMIUM, IMG, idle, page, send, texts

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def server(tmp_path: Path, release: threading.Event) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(delegating_agent(release), db_path=str(tmp_path / "web.db"))) as srv:
        yield srv


def test_parent_and_child_chats_link_and_follow_live(server: ThreadServer, page: Any, release: threading.Event) -> None:
    page.goto(server.url)
    send(page, "delegate the weekly report")
    page.get_by_text("I started a helper on it.").wait_for()
    idle(page)
    child = page.get_by_test_id("child-chat")
    child.wait_for(timeout=30_000)  # drawn on the child's session_created event, late on a busy machine
    assert child.get_attribute("data-status") == "running"
    assert "job the weekly report" in child.inner_text() and "subagent" in child.inner_text()
    assert page.get_by_test_id("origin").count() == 0  # the parent came from nowhere
    page.screenshot(path=str(IMG / "web-subagents.png"))

    # The task's own view: linked back to the parent, its run followed live.
    child.get_by_role("button").first.click()
    origin = page.get_by_test_id("origin")
    origin.wait_for()
    assert origin.inner_text() == "Background task of delegate the weekly report"
    page.get_by_test_id("tool-call").filter(has_text="wait_for_go").wait_for()
    assert page.get_by_test_id("stop").is_visible()  # live: the page is attached to the running task
    release.set()
    page.get_by_text("Child finished: job the weekly report.").wait_for(timeout=30_000)
    idle(page)

    # Back in the parent: the task shows as done and its report started a reply.
    page.get_by_test_id("origin-link").click()
    page.get_by_text("The helper reported back.").wait_for(timeout=30_000)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=child-chat]')?.dataset.status === 'completed'", timeout=30_000
    )
    assert page.get_by_test_id("child-status").inner_text() == "done"
    assert texts(page, "message-assistant")[0].endswith("I started a helper on it.")


def test_a_task_started_while_the_event_stream_was_down_shows_once_it_is_back(
    server: ThreadServer, page: Any, release: threading.Event
) -> None:
    # /api/events has no replay: what the agent started while the page was not listening (a
    # stream still connecting on a busy machine, or reconnecting after a blip) must still show,
    # not only at the task's end. The page looks again when it learns its new chat's id and when
    # the stream opens (its `hello`); without either, this task would appear only once released.
    page.route("**/api/events", lambda route: route.abort())
    page.goto(server.url)
    send(page, "delegate the weekly report")
    page.get_by_text("I started a helper on it.").wait_for()
    idle(page)
    page.unroute("**/api/events")  # the page retries every 2 s
    child = page.get_by_test_id("child-chat")
    child.wait_for(timeout=15_000)
    assert child.get_attribute("data-status") == "running"
    release.set()


def test_a_branch_links_back_until_its_origin_is_deleted(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "plain question")
    page.get_by_text("You said: plain question").wait_for()
    idle(page)
    original = page.evaluate("decodeURIComponent(location.hash.slice('#/chat/'.length))")
    page.get_by_test_id("branch").click()
    origin = page.get_by_test_id("origin")
    origin.wait_for()
    assert origin.inner_text() == "Branched from plain question"
    assert page.get_by_test_id("child-chat").count() == 0  # a branch is not listed as started by its origin
    page.get_by_test_id("origin-link").click()
    page.wait_for_function(f"() => location.hash === '#/chat/{original}'")
    page.get_by_test_id("origin").wait_for(state="detached")  # drawn once the chat's detail is in
    branch = [s["id"] for s in httpx.get(server.url + "/api/sessions").json() if s["id"] != original][0]
    assert httpx.delete(f"{server.url}/api/sessions/{original}").status_code == 200
    page.evaluate(f"() => {{ location.hash = '#/chat/{branch}'; location.reload(); }}")
    page.get_by_text("You said: plain question").wait_for()
    origin.wait_for()
    assert origin.inner_text() == "Branched from plain question (deleted)"
    assert page.get_by_test_id("origin-link").count() == 0
