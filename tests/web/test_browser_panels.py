"""The Files panel, the Memory dialog and follow-up chips in real Chromium, against real servers."""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lovia import Agent
from lovia.plugins.memory import Memory
from lovia.testing import ScriptedProvider, text
from lovia.transcript import TranscriptEntry
from lovia.web import FollowupRequest, create_app
from lovia.workspace import Workspace

from .helpers import ThreadServer, scripted_agent
from .test_browser import CHROMIUM, IMG, idle, page, send, texts

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

HOSTILE = '<img src=x onerror="window.__pwned=1">.txt'
"""A legal file name that is also markup: the panel must show it as these characters."""

README = (
    '# Project\n\nRaw markup stays text: <script>window.__pwned=2</script> <img src=x onerror="window.__pwned=3">\n\n'
    "```python\nimport os\n```\n"
)
CODE = 'def greet(name):\n    """Say hello."""\n    return f"hello {name}"\n'


def png(width: int = 8, height: int = 6) -> bytes:
    """A real (decodable) solid-colour PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x3a\x5b\xd9" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def reply_ok() -> ScriptedProvider:
    return ScriptedProvider(lambda _entries, _tools: text("ok"))


# --------------------------------------------------------------------------- the Files panel


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(CODE)
    (root / "README.md").write_text(README)
    (root / "pic.png").write_bytes(png())
    (root / HOSTILE).write_text("harmless text")
    (root / "secret.key").write_text("k")  # denied: never listed
    (root / ".env").write_text("X=1")  # a dotfile: never listed
    return root


@pytest.fixture
def ws_server(tmp_path: Path, root: Path) -> Iterator[ThreadServer]:
    agent = Agent(name="coder", model=reply_ok(), workspace=Workspace.local(str(root), denied_paths=("*.key",)))
    app = create_app(agent, db_path=str(tmp_path / "web.db"), upload_allowed_ext="txt, md, png")
    with ThreadServer(app) as srv:
        yield srv


def entry_names(page: Any, testid: str = "files-list") -> list[str]:
    return [t.strip() for t in page.get_by_test_id(testid).locator(".file-name").all_inner_texts()]


def open_files(page: Any, url: str) -> Any:
    page.goto(url)
    page.get_by_test_id("files-toggle").click()
    panel = page.get_by_test_id("files-panel")
    panel.get_by_test_id("file-entry").first.wait_for()
    return panel


def test_file_list_preview_and_a_hostile_name_shown_as_text(ws_server: ThreadServer, page: Any) -> None:
    panel = open_files(page, ws_server.url)
    assert page.get_by_test_id("files-toggle").get_attribute("aria-pressed") == "true"
    assert "proj" in panel.get_by_test_id("files-root").inner_text()
    # folders first, then by name; dotfiles and denied files are left out
    assert entry_names(page) == ["src", HOSTILE, "pic.png", "README.md"]
    assert set(entry_names(page, "files-recent")) == {"src/app.py", "README.md", "pic.png", HOSTILE}
    assert panel.locator("img").count() == 0  # the hostile name made no element
    assert page.evaluate("window.__pwned") is None

    panel.get_by_test_id("file-entry").filter(has_text=HOSTILE).first.click()
    assert panel.get_by_test_id("file-preview-name").inner_text() == HOSTILE
    panel.get_by_test_id("file-preview-text").get_by_text("harmless text").wait_for()
    panel.get_by_test_id("file-preview-back").click()

    panel.get_by_test_id("files-list").locator('[data-path="src"] button').click()
    panel.get_by_test_id("files-list").locator('[data-path="src/app.py"]').wait_for()
    assert [c.strip() for c in panel.get_by_test_id("files-crumb").all_inner_texts()] == ["proj", "src"]
    panel.get_by_test_id("files-list").locator('[data-path="src/app.py"] button').click()
    code = panel.get_by_test_id("file-preview-text")
    code.wait_for()
    assert code.text_content() == CODE
    assert code.locator(".hljs-keyword").first.inner_text() == "def"  # highlighted as Python
    page.screenshot(path=str(IMG / "web-workspace.png"))

    panel.get_by_test_id("file-preview-back").click()
    panel.get_by_test_id("files-up").click()
    panel.get_by_test_id("files-list").locator('[data-path="pic.png"] button').click()
    image = panel.get_by_test_id("file-preview-image")
    image.wait_for()
    page.wait_for_function("() => document.querySelector('[data-testid=file-preview-image]').naturalWidth === 8")
    assert (image.get_attribute("src") or "").startswith("data:image/png;base64,")

    page.get_by_test_id("files-close").click()
    assert panel.is_hidden()
    assert page.get_by_test_id("files-toggle").get_attribute("aria-pressed") == "false"
    assert page.evaluate("window.__pwned") is None


def test_markdown_preview_is_rendered_safely_and_flips_to_source(ws_server: ThreadServer, page: Any) -> None:
    panel = open_files(page, ws_server.url)
    panel.get_by_test_id("files-list").locator('[data-path="README.md"] button').click()
    doc = panel.get_by_test_id("file-preview-markdown")
    doc.locator("h1").get_by_text("Project").wait_for()
    assert "<script>window.__pwned=2</script>" in doc.inner_text()  # shown, not run
    assert doc.locator("script, img").count() == 0
    assert doc.locator("pre code .hljs-keyword").first.inner_text() == "import"
    panel.get_by_test_id("file-preview-source").click()
    assert panel.get_by_test_id("file-preview-text").text_content() == README
    assert panel.get_by_test_id("file-preview-source").inner_text() == "Rendered"
    panel.get_by_test_id("file-preview-source").click()
    doc.locator("h1").wait_for()
    assert page.evaluate("window.__pwned") is None


def test_binary_file_refused_in_preview_but_downloadable(ws_server: ThreadServer, root: Path, page: Any) -> None:
    blob = b"\x00\xff\xfe binary \x00"
    (root / "data.bin").write_bytes(blob)
    panel = open_files(page, ws_server.url)
    panel.get_by_test_id("files-list").locator('[data-path="data.bin"] button').click()
    refusal = panel.get_by_test_id("file-preview-error")
    refusal.wait_for()
    assert "is not UTF-8 text" in refusal.inner_text() and "/raw" in refusal.inner_text()  # message and hint
    with page.expect_download() as saved:
        panel.get_by_test_id("file-download").click()
    assert saved.value.suggested_filename == "data.bin"
    assert Path(saved.value.path()).read_bytes() == blob


def test_narrow_window_shows_the_panel_over_the_chat(ws_server: ThreadServer, page: Any) -> None:
    page.set_viewport_size({"width": 390, "height": 760})
    panel = open_files(page, ws_server.url)
    box = panel.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.get_by_test_id("files-close").click()
    assert panel.is_hidden() and page.get_by_test_id("composer").is_visible()


def test_upload_refused_type_shows_the_error_and_lists_nothing(
    ws_server: ThreadServer, root: Path, page: Any, tmp_path: Path
) -> None:
    panel = open_files(page, ws_server.url)
    refused = tmp_path / "tool.exe"
    refused.write_bytes(b"MZ\x90\x00")
    panel.get_by_test_id("files-upload-input").set_input_files(str(refused))
    status = panel.get_by_test_id("files-status")
    page.wait_for_function("() => document.querySelector('[data-testid=files-status]').dataset.kind === 'error'")
    assert "uploads may not be .exe files" in status.inner_text()
    assert "allowed: md, png, txt" in status.inner_text()  # the server's hint rides along
    assert not (root / "uploads").exists() or list((root / "uploads").iterdir()) == []
    assert "uploads" not in entry_names(page) and "tool.exe" not in " ".join(entry_names(page, "files-recent"))

    fine = tmp_path / "notes.txt"
    fine.write_text("first")
    panel.get_by_test_id("files-upload-input").set_input_files(str(fine))
    panel.get_by_test_id("files-status").get_by_text("Uploaded uploads/notes.txt").wait_for()
    panel.get_by_test_id("files-recent").locator('[data-path="uploads/notes.txt"]').wait_for()
    assert "uploads" in entry_names(page)
    panel.get_by_test_id("files-upload-input").set_input_files(str(fine))  # same name: kept apart, said so
    panel.get_by_test_id("files-status").get_by_text("Uploaded as uploads/notes (2).txt").wait_for()
    assert sorted(p.name for p in (root / "uploads").iterdir()) == ["notes (2).txt", "notes.txt"]


def test_no_workspace_and_no_memory_means_no_buttons(tmp_path: Path, page: Any) -> None:
    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "w.db"))) as srv:
        page.goto(srv.url)
        send(page, "hello")
        page.get_by_text("You said: hello").wait_for()
        idle(page)
        assert page.get_by_test_id("files-toggle").is_hidden()
        assert page.get_by_test_id("memory-open").is_hidden()
        assert page.get_by_test_id("files-panel").is_hidden()


PANEL_PARTS = ("memory", "files-toggle", "schedules", "settings", "tasks", "todo-panel", "files-panel")


def test_the_served_regions_are_filled_in_place_not_drawn_twice(tmp_path: Path, root: Path, page: Any) -> None:
    agent = Agent(
        name="coder",
        model=reply_ok(),
        workspace=Workspace.local(str(root)),
        plugins=[Memory(tmp_path / "memory", index=None, auto_curate=False)],
    )
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "web.db"))) as srv:
        page.goto(srv.url)
        page.evaluate("window.lovia.ready")
        page.get_by_test_id("files-toggle").wait_for()
        page.get_by_test_id("memory-open").wait_for()
        page.get_by_test_id("schedules-open").wait_for()
        send(page, "hello")
        page.get_by_test_id("message-assistant").get_by_text("ok", exact=True).wait_for()
        idle(page)
        for part in PANEL_PARTS:
            assert page.locator(f'[data-part="{part}"]').count() == 1, part
        # where the scripts used to put them: the openers in the top bar, in this order
        openers = page.locator(".topbar > .panel-buttons > button")
        assert [b.get_attribute("data-part") for b in openers.all()] == ["memory", "files-toggle", "schedules"]
        assert page.locator(".topbar > .settings-open").is_hidden()  # no model settings on this server
        order = "[...document.querySelector('main').children].map((n) => n.dataset.part || n.className)"
        assert page.evaluate(order)[-4:] == ["tasks", "todo-panel", "messages-wrap", "composer"]
        assert page.evaluate("document.querySelector('#app').lastElementChild.dataset.part") == "files-panel"
        turns = page.locator('[data-part="turn"]')
        assert [t.get_attribute("data-role") for t in turns.all()] == ["user", "assistant"]
        assert page.get_by_test_id("message-user").locator(".body").inner_text().strip() == "hello"
        page.get_by_test_id("files-toggle").click()
        page.get_by_test_id("files-panel").get_by_test_id("file-entry").first.wait_for()
        assert page.locator(".files-panel .files-head").count() == 1  # the panel was filled once


# --------------------------------------------------------------------------- the Memory dialog

NOTES = "- [2026-01] Prefers tea over coffee\n- [2026-02] Lives in Oslo\n- [2026-02] lives in Oslo, Norway\n"


def dream_reply(_entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    return text(json.dumps({"notes": ["[2026-01] Prefers tea over coffee", "[2026-02] Lives in Oslo, Norway"]}))


@pytest.fixture
def mem_server(tmp_path: Path) -> Iterator[ThreadServer]:
    memory = Memory(tmp_path / "memory", index=None, auto_curate=False, notes_budget=150, dream_every_days=None)
    agent = Agent(name="keeper", model=ScriptedProvider(dream_reply), plugins=[memory], instructions="hi")
    with ThreadServer(create_app(agent, db_path=str(tmp_path / "m.db"))) as srv:
        put = httpx.put(srv.url + "/api/memory", json={"content": NOTES})
        assert put.status_code == 200, put.text
        yield srv


def meter(page: Any) -> str:
    return str(page.get_by_test_id("memory-meter").inner_text())


def test_memory_edit_over_budget_is_refused_and_the_notes_stay(mem_server: ThreadServer, page: Any) -> None:
    stored = httpx.get(mem_server.url + "/api/memory").json()
    page.goto(mem_server.url)
    page.get_by_test_id("memory-open").click()
    dialog = page.get_by_test_id("memory-dialog")
    notes = dialog.get_by_test_id("memory-notes")
    page.wait_for_function("() => document.querySelector('[data-testid=memory-notes]').value.includes('Oslo')")
    assert notes.input_value() == stored["content"]
    assert meter(page) == f"{stored['used']} / 150 characters"
    assert dialog.get_by_test_id("memory-save").is_disabled()  # nothing edited yet

    too_long = stored["content"] + "- " + "a very long note " * 8 + "\n"
    notes.fill(too_long)
    assert dialog.get_by_test_id("memory-dream").is_disabled()  # a dream would drop the unsaved edit
    dialog.get_by_test_id("memory-save").click()
    status = dialog.get_by_test_id("memory-status")
    status.get_by_text("the budget is 150").wait_for()
    assert status.get_attribute("data-kind") == "error"
    assert notes.input_value() == too_long  # the user's text is not thrown away
    assert meter(page) == f"{stored['used']} / 150 characters"  # the stored size, unchanged
    assert httpx.get(mem_server.url + "/api/memory").json()["content"] == stored["content"]

    dialog.get_by_test_id("memory-close").click()
    assert dialog.is_hidden()
    page.get_by_test_id("memory-open").click()  # reopened: the stored notes again
    page.wait_for_function("() => document.querySelector('[data-testid=memory-notes]').value.includes('Oslo')")
    assert notes.input_value() == stored["content"]

    notes.fill(stored["content"] + "- Works nights\n")
    dialog.get_by_test_id("memory-save").click()
    status.get_by_text("Saved.").wait_for()
    saved = httpx.get(mem_server.url + "/api/memory").json()
    assert "Works nights" in saved["content"] and saved["used"] > stored["used"]
    assert meter(page) == f"{saved['used']} / 150 characters"


def test_dream_now_reports_before_and_after(mem_server: ThreadServer, page: Any) -> None:
    before = httpx.get(mem_server.url + "/api/memory").json()
    page.goto(mem_server.url)
    page.get_by_test_id("memory-open").click()
    dialog = page.get_by_test_id("memory-dialog")
    page.wait_for_function("() => document.querySelector('[data-testid=memory-notes]').value.includes('Oslo')")
    assert dialog.get_by_test_id("memory-dreamed").inner_text() == "Never dreamed"
    dialog.get_by_test_id("memory-dream").click()
    status = dialog.get_by_test_id("memory-status")
    status.get_by_text("Dreamed:").wait_for()
    after = httpx.get(mem_server.url + "/api/memory").json()
    assert status.inner_text() == f"Dreamed: 3 → 2 notes, {before['used']} → {after['used']} characters."
    assert dialog.get_by_test_id("memory-notes").input_value() == after["content"]
    assert "Lives in Oslo, Norway" in after["content"] and after["dreamed_at"] is not None
    assert dialog.get_by_test_id("memory-dreamed").inner_text().startswith("Last dreamed")
    page.screenshot(path=str(IMG / "web-memory.png"))


# --------------------------------------------------------------------------- follow-up suggestions


class Suggest:
    """A suggester: the given questions for every chat, and the chats it was asked about."""

    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.asked: list[str] = []

    async def __call__(self, request: FollowupRequest) -> list[str]:
        self.asked.append(request.session_id)
        return list(self.items)


def followups_state(page: Any, want: str) -> None:
    page.wait_for_function(f"() => document.getElementById('messages').dataset.followups === '{want}'")


def test_followup_chip_click_sends_it(tmp_path: Path, page: Any) -> None:
    suggest = Suggest(["How do I export it?", "Can it run nightly?"])
    app = create_app(scripted_agent(), db_path=str(tmp_path / "f.db"), followups=suggest)
    with ThreadServer(app) as srv:
        page.goto(srv.url)
        send(page, "tell me about reports")
        page.get_by_text("You said: tell me about reports").wait_for()
        idle(page)
        followups_state(page, "shown")
        chips = page.get_by_test_id("followup")
        assert chips.all_inner_texts() == ["How do I export it?", "Can it run nightly?"]
        # under the last answer
        assert page.evaluate("document.getElementById('messages').lastElementChild.dataset.testid") == "followups"
        page.screenshot(path=str(IMG / "web-followups.png"))

        chips.filter(has_text="Can it run nightly?").click()
        page.get_by_text("You said: Can it run nightly?").wait_for()
        idle(page)
        assert texts(page, "message-user") == ["tell me about reports", "Can it run nightly?"]
        followups_state(page, "shown")  # asked again after the second run
        assert len(suggest.asked) == 2 and len(set(suggest.asked)) == 1

        page.get_by_test_id("composer").press_sequentially("x")  # typing puts them away
        assert page.get_by_test_id("followups").count() == 0


def fail_followups(app: Any) -> Any:
    """``app``, except that the follow-up route answers a 500 error."""

    @app.middleware("http")
    async def broken(request: Request, call_next: Any) -> Response:
        if request.url.path.endswith("/followups"):
            body = {"detail": {"code": "internal_error", "message": "suggester down", "hint": "try later"}}
            return JSONResponse(body, status_code=500)
        response: Response = await call_next(request)
        return response

    return app


@pytest.mark.parametrize("case", ["empty", "error"])
def test_no_chips_when_there_are_no_suggestions(case: str, tmp_path: Path, page: Any) -> None:
    suggest = Suggest([])
    app = create_app(scripted_agent(), db_path=str(tmp_path / "f.db"), followups=suggest)
    if case == "error":
        app = fail_followups(app)
    with ThreadServer(app) as srv:
        page.goto(srv.url)
        with page.expect_response(lambda r: r.url.endswith("/followups")) as answered:
            send(page, "hello")
            page.get_by_text("You said: hello").wait_for()
        assert answered.value.status == (200 if case == "empty" else 500)
        idle(page)
        followups_state(page, "none")
        assert page.get_by_test_id("followups").count() == 0
        assert page.locator(".error-card").count() == 0  # a failed suggestion is not an error in the chat
        assert len(suggest.asked) == (1 if case == "empty" else 0)  # the 500 came before the suggester
