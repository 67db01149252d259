"""The page, driven in headless Chromium through its data-testid hooks."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.stores import InMemoryCheckpointer, InMemorySession
from lovia.web import ChatStore, create_app

from .browser_kit import ARGS, CHROMIUM  # noqa: F401  (re-exported for the other browser tests)
from .helpers import Gate, NoRewindSession, ThreadServer, scripted_agent, wait_for

# Screenshots for docs/web.md: refreshed in place with LOVIA_UPDATE_SCREENSHOTS=1, otherwise
# written to a scratch folder so a test run leaves the work tree clean.
IMG = (
    Path(__file__).resolve().parents[2] / "docs" / "img"
    if os.environ.get("LOVIA_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="lovia-shots-"))
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(10_000)
    yield pg
    context.close()
    assert errors == [], errors


def send(page: Any, message: str) -> None:
    page.get_by_test_id("composer").fill(message)
    page.get_by_test_id("send").click()


def idle(page: Any) -> None:
    """Wait until no run is live (the stop button is hidden again)."""
    page.get_by_test_id("stop").wait_for(state="hidden")


def texts(page: Any, testid: str) -> list[str]:
    """Inner texts of the hooked elements (message bodies / session names, without their buttons)."""
    part = {"message-user": ".body", "message-assistant": ".body", "session-item": ".name"}.get(testid)
    loc = page.get_by_test_id(testid)
    return [t.strip() for t in (loc.locator(part) if part else loc).all_inner_texts()]


def test_answer_streams_in_and_survives_reload(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "stream please")
    assistant = page.get_by_test_id("message-assistant")
    full = "Streaming " + "word " * 15 + "end."
    seen: list[str] = []

    def grows() -> bool:
        if assistant.count():
            seen.append(assistant.first.inner_text())
        return any(full.split()[-1] in s for s in seen)

    wait_for(grows, timeout=15, interval=0.01)
    partial = [s for s in seen if s.strip() and "end." not in s]
    assert partial, "the answer never showed partially: it did not stream"
    idle(page)
    assert texts(page, "message-user") == ["stream please"]
    assert "word word" in texts(page, "message-assistant")[0]
    assert "in ·" in page.locator(".usage").first.inner_text()  # usage per run
    page.reload()
    page.get_by_test_id("message-assistant").wait_for()
    assert texts(page, "message-user") == ["stream please"]
    assert full.split()[0] in texts(page, "message-assistant")[0]
    assert page.get_by_test_id("session-item").count() == 1


def test_tool_call_is_shown(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "tool lookup of the answer")
    tool = page.get_by_test_id("tool-call")
    tool.wait_for()
    idle(page)
    assert "lookup" in tool.inner_text()
    assert "done" in (tool.get_attribute("class") or "")
    assert "Done:" in texts(page, "message-assistant")[0]
    tool.locator("summary").click()
    assert '"answer": 42' in tool.inner_text()
    page.screenshot(path=str(IMG / "web-chat.png"))


def test_stop_keeps_completed_turns(server: ThreadServer, page: Any, gate: Gate) -> None:
    page.goto(server.url)
    send(page, "slow run please")
    wait_for(lambda: gate.runs.get("slow"))
    page.get_by_test_id("stop").click()
    idle(page)
    page.locator(".usage").first.wait_for()
    tools = page.get_by_test_id("tool-call")
    assert tools.count() == 1 and "lookup" in tools.first.inner_text()  # the slow call had no result: dropped
    assert "stopped" in page.locator(".usage").first.inner_text()
    page.reload()
    page.get_by_test_id("tool-call").wait_for()
    assert texts(page, "message-user") == ["slow run please"]
    assert page.get_by_test_id("tool-call").count() == 1
    send(page, "after the stop")
    page.get_by_text("You said: after the stop").wait_for()


def test_edit_and_resend_replaces_the_exchange(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "count first")
    page.get_by_text("Answer number 1.").wait_for()
    idle(page)
    send(page, "count second")
    page.get_by_text("Answer number 2.").wait_for()
    idle(page)
    page.get_by_test_id("edit").first.click()
    box = page.get_by_test_id("edit-box")
    assert box.input_value() == "count first"
    box.fill("count edited")
    page.screenshot(path=str(IMG / "web-edit.png"))
    page.get_by_test_id("save-edit").click()
    page.get_by_text("Answer number 3.").wait_for()
    idle(page)
    assert texts(page, "message-user") == ["count edited"]
    assert [t.splitlines()[0] for t in texts(page, "message-assistant")] == ["Answer number 3."]


def test_regenerate_replaces_the_last_answer(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "count once")
    page.get_by_text("Answer number 1.").wait_for()
    idle(page)
    send(page, "count twice")
    page.get_by_text("Answer number 2.").wait_for()
    idle(page)
    assert page.get_by_test_id("regenerate").count() == 1
    page.get_by_test_id("regenerate").click()
    page.get_by_text("Answer number 3.").wait_for()
    idle(page)
    assert texts(page, "message-user") == ["count once", "count twice"]
    answers = [t.splitlines()[0] for t in texts(page, "message-assistant")]
    assert answers == ["Answer number 1.", "Answer number 3."]


def test_store_without_rewind_hides_edit_and_regenerate(page: Any) -> None:
    store = ChatStore(NoRewindSession(InMemorySession()), checkpointer=InMemoryCheckpointer(), meta_path=":memory:")
    with ThreadServer(create_app(scripted_agent(), store=store)) as srv:
        page.goto(srv.url)
        send(page, "hello without rewind")
        page.get_by_text("You said: hello without rewind").wait_for()
        idle(page)
        assert page.get_by_test_id("message-user").count() == 1
        assert page.get_by_test_id("edit").count() == 0
        assert page.get_by_test_id("regenerate").count() == 0


def test_rewind_buttons_present_with_rewind(server: ThreadServer, page: Any) -> None:
    # the counterpart of the test above: same flow, buttons shown
    page.goto(server.url)
    send(page, "hello with rewind")
    page.get_by_text("You said: hello with rewind").wait_for()
    idle(page)
    assert page.get_by_test_id("edit").count() == 1
    assert page.get_by_test_id("regenerate").count() == 1


def test_model_output_cannot_inject_script(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "xss attempt")
    page.get_by_text("bold?").wait_for()
    idle(page)
    page.wait_for_timeout(200)
    assert page.evaluate("window.__pwned") is None
    msg = page.get_by_test_id("message-assistant").first
    assert msg.locator("script, img, b, [onerror], [onmouseover]").count() == 0
    assert msg.locator("a").count() == 0  # the javascript: link is rendered as plain text
    assert "<script>" in msg.inner_text() and "onerror" in msg.inner_text()
    page.reload()
    page.get_by_text("bold?").wait_for()
    page.wait_for_timeout(200)
    assert page.evaluate("window.__pwned") is None


def test_sidebar_new_search_rename_delete(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    send(page, "alpha topic")
    page.get_by_text("You said: alpha topic").wait_for()
    idle(page)
    page.get_by_test_id("new-chat").click()
    assert page.get_by_test_id("message-user").count() == 0
    send(page, "beta topic")
    page.get_by_text("You said: beta topic").wait_for()
    idle(page)
    items = page.get_by_test_id("session-item")
    wait_for(lambda: items.count() == 2)
    page.get_by_test_id("search").fill("alpha")
    wait_for(lambda: texts(page, "session-item") == ["alpha topic"])
    items.first.click()
    page.get_by_text("You said: alpha topic").wait_for()
    items.first.get_by_test_id("rename").click()
    page.get_by_test_id("rename-input").fill("Renamed chat")
    page.get_by_test_id("rename-input").press("Enter")
    page.get_by_test_id("search").fill("")
    wait_for(lambda: sorted(texts(page, "session-item")) == ["Renamed chat", "beta topic"])
    target = page.get_by_test_id("session-item").filter(has_text="beta topic")
    target.hover()
    target.get_by_test_id("delete").click()
    target.get_by_test_id("delete").click()  # second click confirms
    wait_for(lambda: texts(page, "session-item") == ["Renamed chat"])
    assert [s["title"] for s in httpx.get(f"{server.url}/api/sessions").json()] == ["Renamed chat"]


def test_narrow_window(server: ThreadServer, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 780})
    page = context.new_page()
    try:
        page.goto(server.url)
        assert not page.get_by_test_id("new-chat").is_visible()  # the sidebar folds away
        send(page, "tool on a phone")
        page.get_by_test_id("tool-call").wait_for()
        page.get_by_text("Done:").wait_for()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"page scrolls sideways ({width}px)"
        page.screenshot(path=str(IMG / "web-narrow.png"))
        page.get_by_label("Open chat list").click()
        page.get_by_test_id("new-chat").wait_for(state="visible")
    finally:
        context.close()


def test_demo_notice_when_no_model(page: Any, db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOVIA_MODEL", raising=False)
    with ThreadServer(create_app(db_path=db)) as srv:
        page.goto(srv.url)
        page.get_by_text("No model configured").wait_for()
        assert page.get_by_test_id("composer").is_disabled()
        assert page.get_by_test_id("demo-badge").is_hidden()
        page.screenshot(path=str(IMG / "web-no-model.png"))
        page.get_by_test_id("use-demo").click()
        assert page.get_by_test_id("demo-badge").is_visible()
        send(page, "what time is it?")
        page.get_by_test_id("tool-call").wait_for()
        page.get_by_text("The clock tool says").wait_for()
        idle(page)
        assert "offline demo model" in page.get_by_test_id("message-assistant").first.inner_text().lower()


def test_page_on_env_configured_openai_endpoint(page: Any, tmp_path: Path) -> None:
    from tests.providers.servers import FakeServer, Reply, openai_text_stream

    from .helpers import ProcessServer

    with FakeServer() as fake:
        fake.responder = lambda request: Reply.sse(
            openai_text_stream(f"Echo #{len(fake.posts())}: hi from the endpoint")
        )
        env = {"LOVIA_MODEL": "openai:fake-model", "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}
        env["LOVIA_FOLLOWUPS"] = "0"  # the page asks for suggestions after a run: one more call would skew the count
        with ProcessServer("--db", str(tmp_path / "w.db"), env=env) as srv:
            page.goto(srv.url)
            assert page.get_by_test_id("model").inner_text() == "openai:fake-model"
            send(page, "hello endpoint")
            page.get_by_text("Echo #1: hi from the endpoint").wait_for()
            idle(page)
            page.get_by_test_id("regenerate").click()
            page.get_by_text("Echo #2: hi from the endpoint").wait_for()
            idle(page)
            assert texts(page, "message-user") == ["hello endpoint"]
            assert texts(page, "message-assistant") == ["Echo #2: hi from the endpoint"]


def test_reload_during_a_run_reattaches(server: ThreadServer, page: Any, gate: Gate) -> None:
    page.goto(server.url)
    send(page, "slow run please")
    slow = page.locator('[data-testid="tool-call"][data-call-id^="call_slow"]')
    # Reload once the page shows the slow call, as a user would: by then it knows its chat's id
    # (the server may start the tool before the browser has read the stream's first frame).
    slow.wait_for()
    wait_for(lambda: gate.runs.get("slow"))
    assert "#/chat/" in page.url
    page.reload()
    slow.wait_for()
    assert "running" in (slow.get_attribute("class") or "")
    assert page.get_by_test_id("stop").is_visible()
    gate.release.set()
    page.get_by_text("Done: the tools said their piece").wait_for()
    idle(page)
    assert page.get_by_test_id("tool-call").count() == 2
    assert texts(page, "message-user") == ["slow run please"]
    assert gate.runs == {"lookup": 1, "slow": 1}


PAYLOADS = [
    "<script>window.__pwned='a'</script>",
    "<img src=x onerror=\"window.__pwned='b'\">",
    "[x](javascript:window.__pwned='c')",
    "[x](JaVaScRiPt:window.__pwned='d')",
    "[x](data:text/html,<script>window.__pwned='e'</script>)",
    "[x](https://ok.example/\"onmouseover=\"window.__pwned='f')",
    "`<svg onload=window.__pwned='g'>`",
    "```\n</code></pre><script>window.__pwned='h'</script>\n```",
    "| a | b |\n|---|---|\n| <iframe src=javascript:1> | **<b>x</b>** |",
    "> <style>body{display:none}</style>",
    "**[bold link](https://example.com/a_b*c*)**",
]


def test_markdown_renderer_emits_only_safe_markup(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    result = page.evaluate(
        """async (payloads) => {
            const { renderMarkdown } = await import('/static/markdown.js');
            const box = document.createElement('div');
            document.body.append(box);
            const out = [];
            for (const p of payloads) {
                box.innerHTML = renderMarkdown(p);
                const tags = [...box.querySelectorAll('*')].map((n) => n.tagName.toLowerCase());
                const attrs = [...box.querySelectorAll('*')].flatMap((n) => [...n.attributes].map((a) => a.name));
                const hrefs = [...box.querySelectorAll('a')].map((a) => a.getAttribute('href'));
                out.push({ tags, attrs, hrefs, text: box.textContent });
            }
            await new Promise((r) => setTimeout(r, 100));
            return { out, pwned: window.__pwned ?? null };
        }""",
        PAYLOADS,
    )
    allowed_tags = {
        "p",
        "br",
        "code",
        "pre",
        "strong",
        "em",
        "del",
        "a",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "blockquote",
        "ul",
        "ol",
        "li",
        "h1",
        "h2",
        "h3",
        "hr",
    }
    assert result["pwned"] is None
    for payload, r in zip(PAYLOADS, result["out"], strict=True):
        assert set(r["tags"]) <= allowed_tags, (payload, r["tags"])
        assert set(r["attrs"]) <= {"href", "target", "rel", "data-lang"}, (payload, r["attrs"])
        for href in r["hrefs"]:
            assert href.startswith("https://"), (payload, href)
    assert result["out"][0]["text"] == PAYLOADS[0]  # shown as text, verbatim
    assert result["out"][-1]["tags"] == ["p", "strong", "a"]


def test_approve_and_deny_a_gated_tool_call(server: ThreadServer, page: Any, gate: Gate) -> None:
    page.goto(server.url)
    send(page, "remove old.txt")
    page.get_by_test_id("approve").wait_for()
    assert gate.runs.get("remove") is None  # nothing runs before a person decides
    page.reload()  # a pending approval survives a reload: the re-attached stream asks again
    page.get_by_test_id("approve").click()
    page.get_by_text("Done: the tools said their piece").wait_for()
    idle(page)
    tool = page.get_by_test_id("tool-call")
    tool.locator("summary").click()
    assert "done" in (tool.get_attribute("class") or "") and "removed old.txt" in tool.inner_text()
    assert page.get_by_test_id("approve").count() == 0 and gate.runs == {"remove": 1}

    send(page, "remove precious.txt")
    page.get_by_test_id("deny").click()
    page.get_by_text("Done: the tools said their piece about remove precious.txt").wait_for()
    idle(page)
    denied = page.get_by_test_id("tool-call").last
    assert "failed" in (denied.get_attribute("class") or "")
    assert gate.runs == {"remove": 1}  # the denied call never ran


def test_pin_moves_a_chat_to_the_top(server: ThreadServer, page: Any) -> None:
    page.goto(server.url)
    for message in ("older chat", "newer chat"):
        page.get_by_test_id("new-chat").click()
        send(page, message)
        page.get_by_text(f"You said: {message}").wait_for()
        idle(page)
    wait_for(lambda: texts(page, "session-item") == ["newer chat", "older chat"])
    older = page.get_by_test_id("session-item").filter(has_text="older chat")
    older.hover()
    older.get_by_test_id("pin").click()
    wait_for(lambda: texts(page, "session-item") == ["older chat", "newer chat"])
    pinned = page.get_by_test_id("session-item").first
    assert "pinned" in (pinned.get_attribute("class") or "")
    assert pinned.get_by_test_id("pin").get_attribute("aria-pressed") == "true"
    page.reload()
    wait_for(lambda: texts(page, "session-item") == ["older chat", "newer chat"])


def test_a_second_tab_follows_new_chats_and_runs(server: ThreadServer, page: Any, gate: Gate) -> None:
    other = page.context.new_page()
    other.goto(server.url)
    page.goto(server.url)
    send(page, "slow run please")
    # The other tab learns about the chat from /api/events, without a reload, with its live dot.
    wait_for(lambda: texts(other, "session-item") == ["slow run please"])
    other.locator('[data-testid="session-item"] .live-dot').wait_for()
    other.bring_to_front()  # a background tab gets no animation frames: clicks there would wait
    other.get_by_test_id("session-item").first.click()  # open it there too: it attaches to the run
    other.locator('[data-testid="tool-call"][data-call-id^="call_slow"]').wait_for()
    gate.release.set()
    for tab in (page, other):
        tab.get_by_text("Done: the tools said their piece").wait_for()
        idle(tab)
    other.locator('[data-testid="session-item"] .live-dot').wait_for(state="detached")
    # Deleting the chat in one tab clears it from the other.
    page.bring_to_front()
    item = page.get_by_test_id("session-item").first
    item.hover()
    item.get_by_test_id("delete").click()
    item.get_by_test_id("delete").click()
    wait_for(lambda: texts(other, "session-item") == [])
    assert other.get_by_test_id("message-user").count() == 0
    assert gate.runs == {"lookup": 1, "slow": 1}
