"""Answer variants in real Chromium: regenerate keeps earlier answers behind "‹ 1/2 ›", across reloads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia.web import create_app

from .helpers import Gate, ThreadServer, scripted_agent
from .test_browser import CHROMIUM, IMG, idle, page, send, texts

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(scripted_agent(Gate()), db_path=str(tmp_path / "web.db"))) as srv:
        yield srv


def visible_answer(page: Any) -> str:
    """The text of the one answer on screen for the last user message (latest or an earlier one)."""
    return str(
        page.evaluate(
            """() => [...document.querySelectorAll('.msg.assistant')]
                .filter((m) => m.checkVisibility())
                .map((m) => m.querySelector('.body').innerText.trim()).pop()"""
        )
    )


def regenerate(page: Any, expected: str) -> None:
    page.get_by_test_id("regenerate").click()
    page.get_by_test_id("message-assistant").filter(has_text=expected).wait_for()
    idle(page)
    page.get_by_test_id("regenerate").wait_for()


def test_regenerated_answers_stay_reachable(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "count please")
    page.get_by_text("Answer number 1.").wait_for()
    idle(page)
    assert page.get_by_test_id("variant-pager").count() == 0  # one answer: no arrows

    regenerate(page, "Answer number 2.")
    count = page.get_by_test_id("variant-count").locator("visible=true")
    assert count.inner_text() == "2/2"
    assert texts(page, "message-assistant") == ["Answer number 2."]  # the earlier one is not the transcript
    assert page.get_by_test_id("variant-next").locator("visible=true").is_disabled()
    page.get_by_test_id("variant-prev").locator("visible=true").click()
    assert visible_answer(page) == "Answer number 1." and count.inner_text() == "1/2"
    assert page.get_by_test_id("regenerate").is_hidden()  # only the latest answer regenerates
    assert page.get_by_test_id("variant-prev").locator("visible=true").is_disabled()
    page.get_by_test_id("variant-next").locator("visible=true").click()
    assert visible_answer(page) == "Answer number 2." and count.inner_text() == "2/2"

    # The server keeps them: a reload shows the same arrows.
    page.reload()
    page.get_by_text("Answer number 2.").wait_for()
    page.get_by_test_id("variant-pager").first.wait_for(state="attached")
    assert count.inner_text() == "2/2"
    page.get_by_test_id("variant-prev").locator("visible=true").click()
    assert visible_answer(page) == "Answer number 1."
    page.get_by_test_id("variant-next").locator("visible=true").click()

    regenerate(page, "Answer number 3.")
    assert count.inner_text() == "3/3"
    page.get_by_test_id("variant-prev").locator("visible=true").click()
    assert visible_answer(page) == "Answer number 2." and count.inner_text() == "2/3"
    page.screenshot(path=str(IMG / "web-variants.png"))

    # A follow-up message continues from the latest answer; the turn keeps its arrows.
    page.get_by_test_id("variant-next").locator("visible=true").click()
    send(page, "hello again")
    page.get_by_text("You said: hello again").wait_for()
    idle(page)
    assert texts(page, "message-assistant") == ["Answer number 3.", "You said: hello again"]
    assert page.get_by_test_id("variant-pager").count() == 3  # three answers of the first message

    # Editing the first message replaces the question: its earlier answers go, but the earlier
    # version of the turn (the message as it was, with its latest answer) stays a click away.
    page.get_by_test_id("edit").first.click()
    page.get_by_test_id("edit-box").fill("count anew")
    page.get_by_test_id("save-edit").click()
    page.get_by_text("Answer number 4.").wait_for()
    idle(page)
    page.reload()
    page.get_by_text("Answer number 4.").wait_for()
    assert page.get_by_test_id("variant-pager").count() == 0
    users = page.locator(".msg.user").locator("visible=true")  # the turn's version on screen
    assert [u.locator(".body").inner_text().strip() for u in users.all()] == ["count anew"]
    assert page.get_by_test_id("edit-count").locator("visible=true").inner_text() == "2/2"
    page.get_by_test_id("edit-prev").locator("visible=true").click()
    assert [u.locator(".body").inner_text().strip() for u in users.all()] == ["count please"]
    assert visible_answer(page) == "Answer number 3."
    assert page.get_by_test_id("edit-count").locator("visible=true").inner_text() == "1/2"
    page.get_by_test_id("edit-next").locator("visible=true").click()
    assert visible_answer(page) == "Answer number 4."
