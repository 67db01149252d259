"""The page while its chat waits for a free slot (the server at its live-run cap), in real Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app

from .helpers import ThreadServer
from .test_browser import CHROMIUM, idle, send
from .test_run_queue import Held, busy_with, held_agent

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def held() -> Iterator[Held]:
    h = Held()
    yield h
    h.release.set()


@pytest.fixture
def server(tmp_path: Path, held: Held) -> Iterator[ThreadServer]:
    app = create_app(held_agent(held), db_path=str(tmp_path / "b.db"), max_background_runs=1, max_queued_runs=2)
    with ThreadServer(app) as srv:
        yield srv


@pytest.fixture
def page(browser: Any, server: ThreadServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(15_000)
    yield pg
    context.close()
    assert errors == [], errors


def test_a_chat_past_the_cap_shows_the_waiting_line_then_its_answer(
    page: Any, server: ThreadServer, held: Held
) -> None:
    first = busy_with(server, held)  # another client's chat holds the only slot
    page.goto(server.url)
    send(page, "my question")
    waiting = page.locator('[data-part="waiting"]')
    waiting.wait_for()
    assert "Waiting for a free slot" in waiting.inner_text() and "1" in waiting.inner_text()
    assert page.get_by_test_id("working").count() == 0
    assert page.evaluate("document.body.dataset.phase") == "streaming"
    assert page.get_by_text("You said: my question").count() == 0

    held.release.set()
    page.get_by_text("You said: my question").wait_for()
    idle(page)
    assert waiting.count() == 0 and page.get_by_test_id("working").count() == 0
    assert first.ended()[-1] == "done"


def test_the_waiting_line_speaks_the_pages_language(browser: Any, server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    context = browser.new_context(locale="zh-CN")
    try:
        pg = context.new_page()
        pg.set_default_timeout(15_000)
        pg.goto(server.url)
        send(pg, "排队")
        waiting = pg.locator('[data-part="waiting"]')
        waiting.wait_for()
        assert "等待空闲名额" in waiting.inner_text()
        held.release.set()
        pg.get_by_text("You said: 排队").wait_for()
        idle(pg)
    finally:
        context.close()
    assert first.ended()[-1] == "done"


def test_stop_while_waiting_leaves_the_line_and_keeps_the_message(page: Any, server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    page.goto(server.url)
    send(page, "changed my mind")
    page.locator('[data-part="waiting"]').wait_for()
    page.get_by_test_id("stop").click()
    idle(page)
    assert page.locator('[data-part="waiting"]').count() == 0
    page.get_by_test_id("message-user").get_by_text("changed my mind").wait_for()  # kept, as the chat stores it
    assert [r["status"] for r in httpx.get(f"{server.url}/api/runs").json()] == ["running"]  # the first chat only
    held.release.set()
    assert first.ended()[-1] == "done"
    assert page.get_by_text("You said: changed my mind").count() == 0
