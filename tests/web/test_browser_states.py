"""The page's run state, hand-off and compaction notes, and copy buttons, in real Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from lovia import Agent, Handoff
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app

from .helpers import Gate, ThreadServer, wait_for
from .test_browser import CHROMIUM, idle, send

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def page(browser: Any, server: ThreadServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(10_000)
    yield pg
    context.close()
    assert errors == [], errors


def phase(page: Any) -> str:
    return str(page.evaluate("document.body.dataset.phase"))


def test_the_run_state_goes_idle_starting_streaming_stopping_idle(page: Any, server: ThreadServer, gate: Gate) -> None:
    page.goto(server.url)
    wait_for(lambda: phase(page) == "idle")
    page.evaluate(
        """() => {
            window.__phases = [];
            new MutationObserver(() => window.__phases.push(document.body.dataset.phase))
                .observe(document.body, { attributes: true, attributeFilter: ['data-phase'] });
        }"""
    )
    send(page, "slow please")
    page.get_by_test_id("tool-call").first.wait_for()
    wait_for(lambda: phase(page) == "streaming")
    page.get_by_test_id("stop").click()
    idle(page)
    assert phase(page) == "idle"
    seen = list(page.evaluate("window.__phases"))
    compact = [p for i, p in enumerate(seen) if i == 0 or seen[i - 1] != p]
    assert compact == ["starting", "streaming", "stopping", "idle"], seen


def test_copy_buttons_copy_the_code_and_the_answer(page: Any, server: ThreadServer) -> None:
    page.goto(server.url)
    send(page, "hello world")
    page.get_by_text("You said: hello world").wait_for()
    idle(page)
    page.get_by_test_id("copy-answer").click()
    assert page.evaluate("navigator.clipboard.readText()") == "You said: hello world"
    assert page.get_by_test_id("copy-answer").inner_text() == "Copied"


def test_code_copy_button_copies_the_code_only(page: Any, server: ThreadServer) -> None:
    page.goto(server.url)
    page.get_by_text("Start a conversation.").wait_for()  # the page's own first render is done
    page.evaluate(
        """async () => {
            const { Transcript } = await import('/static/render.js');
            const t = new Transcript(document.getElementById('messages'), { onEdit() {}, onRegenerate() {} });
            t.render([{ type: 'input', role: 'user', content: 'q' },
                      { type: 'assistant_text', content: 'Run:\\n\\n```sh\\npip install lovia\\n```' }], [], false);
            t.handoff({ from: 'triage', to: 'billing' });
            t.compacted({ entries_before: 40, entries_after: 9, reason: 'window' });
        }"""
    )
    page.get_by_test_id("copy-code").click()
    assert page.evaluate("navigator.clipboard.readText()") == "pip install lovia\n"
    assert page.get_by_test_id("handoff").inner_text() == "handed over to billing"
    assert page.get_by_test_id("context-compacted").inner_text() == "context compacted (window): 40 → 9 entries"


@pytest.fixture
def handoff_server(db: str) -> Iterator[ThreadServer]:
    billing = Agent(name="billing", model=ScriptedProvider([text("Billing here: refund issued.")]))
    triage = Agent(
        name="triage",
        model=ScriptedProvider([call("transfer_to_billing", {})]),
        handoffs=[Handoff(billing)],
    )
    with ThreadServer(create_app(triage, db_path=db)) as srv:
        yield srv


def test_a_handoff_frame_is_shown(browser: Any, handoff_server: ThreadServer) -> None:
    page = browser.new_page()
    page.goto(handoff_server.url)
    send(page, "I want a refund")
    page.get_by_text("Billing here: refund issued.").wait_for()
    idle(page)
    page.reload()  # the note comes back from the stored transcript (the transfer call)
    page.get_by_text("Billing here: refund issued.").wait_for()
    assert page.get_by_test_id("handoff").first.inner_text() == "handed over to billing"
    page.close()
