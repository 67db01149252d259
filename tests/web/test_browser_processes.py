"""The Processes section of the Files panel and the edit/write diffs, in real Chromium.

The processes are real: a scripted agent starts them with the workspace's own shell tool.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app
from lovia.workspace import Workspace

from .helpers import ThreadServer, wait_for
from .processes_helpers import EDIT_OLD, process_agent
from .test_browser import CHROMIUM, IMG, idle, page, send

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

HOSTILE = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "app.py").write_text("import os\n\n" + EDIT_OLD + "\nprint(greet())\n")
    return root


@pytest.fixture
def srv(tmp_path: Path, root: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app({"procs": process_agent(root)}, db_path=str(tmp_path / "web.db"))) as s:
        yield s


def _session_id(page: Any) -> str:
    found = wait_for(lambda: page.evaluate("(location.hash.match(/^#\\/chat\\/(.+)$/) || [])[1] || null"))
    return str(httpx.URL("http://x/" + found).path[1:])


def _processes(page: Any) -> Any:
    page.get_by_test_id("files-toggle").click()
    section = page.get_by_test_id("processes")
    section.wait_for()
    return section


def test_a_process_is_listed_with_its_output_as_text_and_killed(srv: ThreadServer, page: Any) -> None:
    page.set_default_timeout(30_000)
    page.goto(srv.url)
    send(page, f"start echo '{HOSTILE}'; echo second line; sleep 120")
    idle(page)
    section = _processes(page)
    proc = section.get_by_test_id("process")
    proc.wait_for()
    assert proc.get_attribute("data-process-id") == "bg-1" and proc.get_attribute("data-status") == "running"
    assert "sleep 120" in proc.get_by_test_id("process-open").inner_text()
    proc.get_by_test_id("process-open").click()
    output = section.get_by_test_id("process-output")
    output.get_by_text("second line").wait_for()
    assert output.text_content().splitlines()[:2] == [HOSTILE, "second line"]
    assert page.locator("#files-panel img").count() == 0  # the markup stayed characters
    assert page.evaluate("window.__pwned") is None
    page.screenshot(path=str(IMG / "web-processes.png"))

    proc.get_by_test_id("process-kill").click()
    section.locator('[data-testid="process"][data-status="killed"]').wait_for()
    assert "Killed bg-1" in section.get_by_test_id("processes-status").inner_text()
    assert section.get_by_test_id("process-kill").count() == 0
    # The page's kill consumed nothing: the model's own read still gets the output and the kill.
    send(page, "read bg-1")
    idle(page)
    last = page.get_by_test_id("message-assistant").last.inner_text()
    assert "second line" in last and "killed" in last


def test_a_refused_kill_shows_the_servers_error(srv: ThreadServer, page: Any) -> None:
    page.set_default_timeout(30_000)
    # Keep the page from hearing about the deletion, so it still shows the chat and its Kill button.
    page.route("**/api/events", lambda route: route.abort())
    page.goto(srv.url)
    send(page, "start sleep 120")
    idle(page)
    sid = _session_id(page)
    section = _processes(page)
    kill = section.get_by_test_id("process-kill")
    kill.wait_for()
    assert httpx.delete(f"{srv.url}/api/sessions/{sid}", timeout=30).status_code == 200
    kill.click()
    status = section.get_by_test_id("processes-status")
    status.get_by_text("no chat").wait_for()
    assert status.get_attribute("data-kind") == "error" and sid in status.inner_text()


def test_edit_and_write_calls_show_a_diff(srv: ThreadServer, page: Any, root: Path) -> None:
    page.set_default_timeout(30_000)
    page.goto(srv.url)
    send(page, "edit app.py")
    idle(page)
    assert "hello {name}" in (root / "app.py").read_text()  # the edit really happened
    card = page.get_by_test_id("tool-call").filter(has_text="edit_file")
    diff = card.get_by_test_id("diff-view")
    diff.wait_for()

    def lines(kind: str) -> list[str]:
        return diff.locator(f'[data-testid="diff-line"][data-kind="{kind}"]').all_text_contents()

    assert lines("del") == ["-def greet():", "-    return 'hello'"]
    assert lines("add") == ["+def greet(name):", "+    return f'hello {name}'"]
    assert "app.py" in diff.locator(".diff-path").inner_text()

    send(page, "write notes.txt")
    idle(page)
    written = page.get_by_test_id("tool-call").filter(has_text="write_file").get_by_test_id("diff-view")
    written.wait_for()
    assert written.locator('[data-kind="add"]').all_text_contents() == ["+alpha", "+beta"]
    assert written.locator('[data-kind="del"]').count() == 0
    assert "replaces" in written.locator(".diff-note").inner_text()
    page.screenshot(path=str(IMG / "web-diff.png"))

    page.reload()  # drawn again from the stored transcript
    again = page.get_by_test_id("tool-call").filter(has_text="edit_file").get_by_test_id("diff-view")
    again.wait_for()
    assert again.locator('[data-kind="del"]').count() == 2


def test_the_line_diff_keeps_context_and_folds_long_unchanged_runs(srv: ThreadServer, page: Any) -> None:
    page.goto(srv.url)
    ops = page.evaluate(
        """async () => {
          const { lineDiff } = await import('./static/diffview.js');
          const a = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'];
          const b = ['a', 'B', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k'];
          return lineDiff(a, b).map((op) => op.kind + op.text).join(' ');
        }"""
    )
    assert ops == "ctxa delb addB ctxc ctxd ctxe ctxf ctxg ctxh ctxi ctxj addk"
    card = page.evaluate(
        """async () => {
          const { renderCallView } = await import('./static/diffview.js');
          const d = document.createElement('details');
          d.append(document.createElement('summary'));
          const old = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\\n');
          const neu = old.replace('line 10', 'LINE 10');
          renderCallView(d, 'edit_file', JSON.stringify({ path: 'x.txt', old, new: neu }));
          renderCallView(d, 'shell', JSON.stringify({ command: 'ls' }));  // not a file change: no view
          renderCallView(d, 'edit_file', '{"path": "x.txt", "old": "unfinis');  // not JSON yet: no view
          return [...d.querySelectorAll('.diff-line')].map((n) => n.dataset.kind + ':' + n.textContent);
        }"""
    )
    assert card == [
        "fold:⋯ 7 unchanged lines",
        *[f"ctx: line {i}" for i in range(7, 10)],
        "del:-line 10",
        "add:+LINE 10",
        *[f"ctx: line {i}" for i in range(11, 14)],
        "fold:⋯ 6 unchanged lines",
    ]


def test_an_ask_rule_shows_its_approval_prompt_and_runs_only_once_approved(tmp_path: Path, page: Any) -> None:
    root = tmp_path / "asked"
    root.mkdir()
    # Coding mode: shell commands are "ask" by default, so the person at the page decides.
    agent = process_agent(root)
    agent.workspace = Workspace.local(str(root), mode="coding")
    with ThreadServer(create_app({"procs": agent}, db_path=str(tmp_path / "ask.db"))) as served:
        page.goto(served.url)
        send(page, "start echo made > marker.txt")
        page.get_by_test_id("approve").wait_for()
        assert "marker.txt" in page.get_by_test_id("tool-call").last.inner_text()  # the command is shown
        assert not (root / "marker.txt").exists()  # nothing ran before the decision
        page.get_by_test_id("deny").click()
        page.get_by_text("start done:").wait_for()
        idle(page)
        assert not (root / "marker.txt").exists()  # denied: never ran
        send(page, "start echo made > marker.txt")
        page.get_by_test_id("approve").click()
        wait_for(lambda: (root / "marker.txt").exists(), timeout=30)
        idle(page)
