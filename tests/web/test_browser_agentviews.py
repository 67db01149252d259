"""The agent's own views in real Chromium: an ``ask_human`` question answered in the page."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia.tools import HumanChannel
from lovia.web import create_app

from .agentviews_helpers import asking_agent, todo_agent
from .helpers import ThreadServer
from .test_browser import CHROMIUM, IMG, idle, page, send

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def asking_server(tmp_path: Path) -> Iterator[ThreadServer]:
    channel = HumanChannel()
    app = create_app(asking_agent(channel), db_path=str(tmp_path / "web.db"), question_channel=channel)
    with ThreadServer(app) as srv:
        yield srv


def test_question_answered_in_the_page_resumes_the_run(asking_server: ThreadServer, page: Any) -> None:
    page.goto(asking_server.url)
    send(page, "ask me something")
    prompt = page.get_by_test_id("question")
    prompt.wait_for()
    assert "Which colour?" in prompt.inner_text()
    assert page.get_by_test_id("question-option").all_inner_texts() == ["Red", "Blue"]
    page.reload()  # the pending question survives a reload: the re-attached stream asks again
    page.get_by_test_id("question").wait_for()
    page.screenshot(path=str(IMG / "web-question.png"))
    page.get_by_test_id("question-option").filter(has_text="Blue").click()
    page.get_by_text("You picked Blue.").wait_for()
    idle(page)
    assert page.get_by_test_id("question").count() == 0

    send(page, "ask again")
    page.get_by_test_id("question-input").fill("Green, actually")
    page.get_by_test_id("question-input").press("Enter")
    page.get_by_text("You picked Green, actually.").wait_for()
    idle(page)


def test_todo_list_updates_live(tmp_path: Path, page: Any) -> None:
    release = threading.Event()
    with ThreadServer(create_app(todo_agent(release), db_path=str(tmp_path / "t.db"))) as srv:
        page.goto(srv.url)
        send(page, "plan the report")
        page.get_by_test_id("todo-panel").get_by_text("Fetching data").wait_for()
        assert [i.get_attribute("data-status") for i in page.get_by_test_id("todo-item").all()] == [
            "in_progress",
            "pending",
        ]
        page.screenshot(path=str(IMG / "web-todos.png"))
        release.set()
        page.get_by_text("All done.").wait_for()
        idle(page)
        assert "Todo 2/2" in page.get_by_test_id("todo-panel").inner_text()
        page.reload()  # rebuilt from the stored chat
        page.get_by_test_id("todo-panel").get_by_text("Todo 2/2").wait_for()
        page.get_by_test_id("new-chat").click()
        assert page.get_by_test_id("todo-panel").is_hidden()
