# ruff: noqa: F811  (the page/browser fixtures are imported from test_browser and used as arguments)
"""Attachments and branching in the page, in real headless Chromium: attach, drag-and-drop, paste, refusals, branch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app

from .helpers import ThreadServer
from .test_attachments import PNG as REAL_PNG  # a 1x1 picture a browser can draw
from .test_browser import IMG, idle, page, pytestmark, send, texts  # noqa: F401  (shared fixtures)
from .test_uploads import PNG, _agent


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[ThreadServer]:
    app = create_app(_agent(), db_path=str(tmp_path / "web.db"), max_upload_mb=1)
    with ThreadServer(app) as s:
        yield s


def _drop(page: Any, selector: str, name: str, mime: str, data: bytes, pad: int = 0) -> None:
    """Dispatch a real DragEvent carrying a File (``data`` then ``pad`` zero bytes) on ``selector``."""
    page.evaluate(
        """([selector, name, mime, bytes, pad]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([new Uint8Array(bytes), new Uint8Array(pad)], name, { type: mime }));
            const target = document.querySelector(selector);
            for (const type of ["dragover", "drop"]) {
                target.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
            }
        }""",
        [selector, name, mime, list(data), pad],
    )


def _paste(page: Any, name: str, mime: str, data: bytes) -> None:
    page.evaluate(
        """([name, mime, bytes]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([new Uint8Array(bytes)], name, { type: mime }));
            const event = new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true });
            document.getElementById("composer").dispatchEvent(event);
        }""",
        [name, mime, list(data)],
    )


def test_attach_drop_and_paste_reach_the_model(page: Any, srv: ThreadServer, tmp_path: Path) -> None:
    page.goto(srv.url)
    doc = tmp_path / "report.md"
    doc.write_text("# report\n")
    with page.expect_file_chooser() as chooser:
        page.get_by_test_id("attach").click()
    chooser.value.set_files(str(doc))
    _drop(page, "#composer-form", "dropped.png", "image/png", REAL_PNG)
    _paste(page, "pasted.txt", "text/plain", b"from the clipboard")
    page.locator(".attachment.ready").nth(2).wait_for()
    assert page.locator(".attachment.ready").count() == 3
    page.screenshot(path=str(IMG / "web-attachments.png"))
    send(page, "what is in these")
    idle(page)
    answer = texts(page, "message-assistant")[-1]
    assert "images=1" in answer and "'report.md'" in answer and "'pasted.txt'" in answer
    assert page.get_by_test_id("sent-attachment").count() == 3
    thumb = page.locator('img[data-kind="thumbnail"]')
    assert thumb.count() == 1  # the picture shows as itself; the two documents keep their named chips
    page.wait_for_function("() => document.querySelector('img[data-kind=thumbnail]').naturalWidth > 0")
    assert "image/png" in (thumb.get_attribute("alt") or "")
    thumb.click()
    assert "expanded" in (thumb.get_attribute("class") or "")
    assert page.get_by_test_id("attachment").count() == 0  # the composer is clear again
    page.reload()
    page.get_by_test_id("sent-attachment").nth(2).wait_for()


def test_a_refused_upload_shows_why_and_is_not_sent(page: Any, srv: ThreadServer) -> None:
    page.goto(srv.url)
    _drop(page, "#composer-form", "tool.exe", "application/octet-stream", b"MZ")
    _drop(page, "#composer-form", "huge.png", "image/png", PNG, pad=1024 * 1024 + 10)
    errors = page.get_by_test_id("attachment-error")
    errors.nth(1).wait_for()
    shown = " ".join(errors.all_inner_texts())
    assert "may not be .exe" in shown and "1 MiB limit" in shown
    # the hints name what exists: the environment variables and create_app's arguments, no flags
    assert "LOVIA_UPLOAD_ALLOWED_EXT" in shown and "LOVIA_MAX_UPLOAD_MB" in shown and " --" not in shown
    send(page, "hello")
    idle(page)
    assert "files=[]" in texts(page, "message-assistant")[-1]
    assert errors.count() == 0  # a message went out: the refusals were read, their chips go


def test_branch_in_new_chat_copies_up_to_that_reply(page: Any, srv: ThreadServer) -> None:
    page.goto(srv.url)
    send(page, "first")
    idle(page)
    send(page, "second")
    idle(page)
    original = page.evaluate("location.hash")
    page.get_by_test_id("branch").first.click()
    page.wait_for_function("h => location.hash !== h", arg=original)
    # The branch's chat loads after the hash changes: wait until the old transcript is replaced.
    page.wait_for_function("() => document.querySelectorAll('[data-testid=message-user]').length === 1")
    assert texts(page, "message-user") == ["first"]
    page.screenshot(path=str(IMG / "web-branch.png"))
    send(page, "another way")
    idle(page)
    assert texts(page, "message-user") == ["first", "another way"]
    sid = original.split("/")[-1]
    kept = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
    assert [e["content"] for e in kept["transcript"] if e["type"] == "input"] == ["first", "second"]


def test_a_branch_of_a_long_titled_chat_is_told_apart_in_the_sidebar(page: Any, srv: ThreadServer) -> None:
    page.goto(srv.url)
    send(page, "first")
    idle(page)
    sid = page.evaluate("location.hash").split("/")[-1]
    long_title = "Quarterly planning notes for the platform team " * 2
    assert httpx.patch(f"{srv.url}/api/sessions/{sid}", json={"title": long_title}).status_code == 200
    page.reload()
    page.get_by_test_id("message-user").first.wait_for()
    page.get_by_test_id("branch").first.click()
    rows = page.get_by_test_id("session-item")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=session-item]').length === 2")
    marks = page.get_by_test_id("session-branch")
    marks.first.wait_for()
    assert marks.count() == 1 and marks.first.is_visible()  # in view, however much of the name is cut
    branch_row = rows.filter(has=marks)
    assert "(branch)" in (branch_row.locator(".name").get_attribute("title") or "")
