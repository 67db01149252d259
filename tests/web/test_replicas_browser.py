"""Three ``lovia web`` replicas on one PostgreSQL database, seen from a browser on one of them.

The run is started on replica A; headless Chromium opens the chat on replica B, which follows
A's run through the frames A relays over PostgreSQL. B's page stops it (A executes the stop),
or A is SIGKILLed mid-answer and the run completes through B or C once A's lease expired.
"""

from __future__ import annotations

import os
import signal
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .app_fixture import ANSWER
from .helpers import ProcessServer, wait_for
from .replica_helpers import PG, drop_schema, log_lines, pg_up, replicas, start_run, stop_all

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
    pytest.mark.skipif(not pg_up(), reason=f"PostgreSQL is not reachable at {PG}"),
]

# Every text the page's live answer (the streaming ``.md.cursor`` block) showed, in order, recorded
# in the page on each DOM change: a sample is never missed between two polls of the test.
RECORDER = """
window.__live = [];
document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("messages");
  new MutationObserver(() => {
    const live = root.querySelector(".md.cursor");
    const seen = window.__live;
    if (live && seen[seen.length - 1] !== live.textContent) seen.push(live.textContent);
  }).observe(root, { childList: true, subtree: true, characterData: true });
});
"""


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    context.add_init_script(RECORDER)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(20_000)
    yield pg
    context.close()
    assert errors == [], errors


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"replicas_browser_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(name)


def live_samples(page: Any) -> list[str]:
    """What the page's streaming answer showed so far (empty texts and repeats left out)."""
    out: list[str] = []
    for text in (t.strip() for t in page.evaluate("window.__live")):
        if text and (not out or out[-1] != text):
            out.append(text)
    return out


def answers(page: Any) -> list[str]:
    """The answer texts of the assistant messages (their markdown blocks, without tool cards)."""
    loc = page.get_by_test_id("message-assistant").locator(".body > .md")
    return [t.strip() for t in loc.all_inner_texts()]


def run_row(schema: str, run_id: str) -> tuple[str, str]:
    """``(status, owner)`` of a run in the shared ``web_runs`` table (``owner`` is ``host:pid``)."""
    import psycopg

    with psycopg.connect(PG) as conn:
        row = conn.execute(f'SELECT status, owner FROM "{schema}".web_runs WHERE run_id = %s', (run_id,)).fetchone()
    assert row is not None, f"no web_runs row for {run_id}"
    return str(row[0]), str(row[1])


def owner_of(server: ProcessServer) -> str:
    assert server.proc is not None
    return f"{socket.gethostname()}:{server.proc.pid}"


def live_run_ids(server: ProcessServer) -> list[str]:
    """The runs this replica itself drives (``GET /api/runs`` lists local runs only)."""
    return [r["run_id"] for r in httpx.get(server.url + "/api/runs", timeout=10).json()]


def open_following(page: Any, replica: ProcessServer, sid: str) -> None:
    """Open the chat on ``replica`` and wait until its page follows the live run."""
    page.goto(f"{replica.url}/#/chat/{sid}")
    page.get_by_test_id("stop").wait_for()  # shown while a run is live in this chat
    page.get_by_test_id("tool-call").first.wait_for()


def wait_growing(page: Any) -> list[str]:
    """Wait until the page has shown the answer growing (three prefixes of it), before its end."""
    samples: list[str] = wait_for(lambda: (s := live_samples(page)) and len(s) >= 3 and s, timeout=30)
    assert all(ANSWER.startswith(s) for s in samples), samples
    assert len(set(samples)) == len(samples) and samples == sorted(samples, key=len), samples  # growing
    assert len(samples[-1]) < len(ANSWER), "the answer was already complete: nothing was seen streaming"
    return samples


def tool_cards(page: Any) -> list[tuple[str, str]]:
    """``(tool name, state)`` of every tool card (state: pending, running, done, failed, dropped)."""
    cards = page.get_by_test_id("tool-call")
    out = []
    for i in range(cards.count()):
        card = cards.nth(i)
        classes = (card.get_attribute("class") or "").split()
        state = next((c for c in classes if c in {"pending", "running", "done", "failed", "dropped"}), "")
        out.append((card.locator(".tool-name").inner_text(), state))
    return out


def test_a_page_on_b_follows_and_stops_a_run_owned_by_a(tmp_path: Path, schema: str, page: Any) -> None:
    log = tmp_path / "tools.log"
    env = {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "0.2", "LOVIA_FIXTURE_TEXT_DELAY": "0.25"}
    servers = replicas(schema, env)
    a, b, c = servers
    try:
        sid, run_id = start_run(a.url, "make the report")
        open_following(page, b, sid)
        wait_growing(page)
        assert tool_cards(page) == [("quick", "done"), ("slow", "done")]
        # while B's page streams it, the run is A's: A drives it, B and C only relay
        assert live_run_ids(a) == [run_id]
        assert live_run_ids(b) == live_run_ids(c) == []
        assert run_row(schema, run_id) == ("running", owner_of(a))

        page.get_by_test_id("stop").click()
        page.get_by_test_id("stop").wait_for(state="hidden")
        page.get_by_test_id("stopped-mark").wait_for()
        shown = answers(page)
        assert len(shown) == 1 and shown[0] and ANSWER.startswith(shown[0]) and shown[0] != ANSWER, shown

        # A executed the stop: its run ended as cancelled, A itself lives on
        assert a.proc is not None and a.proc.poll() is None
        assert wait_for(lambda: live_run_ids(a) == [], timeout=10)
        assert run_row(schema, run_id) == ("cancelled", owner_of(a))
        # the stored segment is marked stopped and holds what the page shows, on every replica
        for server in servers:
            meta = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
            assert meta["active_run_id"] is None and meta["live"] is False
            assert [r["stopped"] for r in meta["runs"]] == [True]
            texts = [e["content"].strip() for e in meta["transcript"] if e["type"] == "assistant_text"]
            assert texts == shown  # (the page shows it without the trailing space it may end in)
        assert log_lines(log) == ["quick", "slow:start", "slow:done"]
        # the answer does not go on growing anywhere after the stop
        page.reload()
        page.get_by_test_id("stopped-mark").wait_for()
        assert answers(page) == shown
        assert page.get_by_test_id("stop").is_hidden()
    finally:
        stop_all(servers)


@pytest.mark.parametrize("moment", ["mid-answer", "mid-tool"])
def test_sigkill_the_owner_and_the_page_on_b_follows_the_run_to_its_end(
    tmp_path: Path, schema: str, page: Any, moment: str
) -> None:
    log = tmp_path / "tools.log"
    slow = "0.2" if moment == "mid-answer" else "4"
    env = {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": slow, "LOVIA_FIXTURE_TEXT_DELAY": "0.15"}
    servers = replicas(schema, env)
    a, b, c = servers
    try:
        sid, run_id = start_run(a.url, "make the report")
        open_following(page, b, sid)
        if moment == "mid-answer":
            wait_growing(page)  # both tools have finished
        else:
            wait_for(lambda: tool_cards(page) == [("quick", "done"), ("slow", "running")], timeout=20)
            assert log_lines(log) == ["quick", "slow:start"]
        assert run_row(schema, run_id) == ("running", owner_of(a))
        assert a.kill(signal.SIGKILL) == -signal.SIGKILL

        # after A's lease expires, B or C resumes the run from its checkpoint; B's page follows to the end
        if moment == "mid-tool":
            wait_growing(page)  # the answer streams in from the new owner
        page.get_by_test_id("stop").wait_for(state="hidden", timeout=40_000)
        assert answers(page) == [ANSWER]
        assert tool_cards(page) == [("quick", "done"), ("slow", "done")]
        assert page.get_by_test_id("stopped-mark").count() == 0
        assert page.locator(".error-card").count() == 0
        # while it followed, the page never showed anything but a prefix of the one answer
        samples = live_samples(page)
        assert all(ANSWER.startswith(s) for s in samples), samples

        status, owner = run_row(schema, run_id)
        assert status == "completed" and owner in {owner_of(b), owner_of(c)}, (status, owner)
        for server in (b, c):
            meta = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
            assert meta["active_run_id"] is None and meta["live"] is False
            assert [r["stopped"] for r in meta["runs"]] == [False]
            assert [e["content"] for e in meta["transcript"] if e["type"] == "assistant_text"] == [ANSWER]
            assert [e["type"] for e in meta["transcript"]] == [
                "input",
                "tool_call",
                "tool_result",
                "tool_call",
                "tool_result",
                "assistant_text",
            ]
        # a finished tool never runs again; the one A was killed in runs again and finishes once
        lines = log_lines(log)
        if moment == "mid-answer":
            assert lines == ["quick", "slow:start", "slow:done"]
        else:
            assert lines == ["quick", "slow:start", "slow:start", "slow:done"]
        page.reload()
        page.get_by_test_id("message-assistant").wait_for()
        assert answers(page) == [ANSWER]
        assert tool_cards(page) == [("quick", "done"), ("slow", "done")]
    finally:
        stop_all(servers)
