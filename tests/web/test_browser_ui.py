"""Page customization in headless Chromium: languages, messages, extension scripts, views."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse

from lovia.web import ChatUI, create_app

from .helpers import Gate, ThreadServer, scripted_agent
from .test_browser import IMG, idle, pytestmark, send  # noqa: F401  (fixtures and marks)

EXTENSION = r"""
const { lovia } = window;
window.__events = [];
for (const name of ["session", "run-start", "run-end", "view"]) {
  lovia.on(name, (payload) => window.__events.push([name, payload]));
}
lovia.registerToolView("lookup", {
  summary: (tool) => (tool.status === "done" ? `Looked up “${tool.args?.q}”` : `Looking up “${tool.args?.q}”…`),
  render(el, tool) {
    if (tool.status !== "done") return;
    const b = document.createElement("b");
    b.dataset.testid = "lookup-answer";
    b.textContent = `The answer is ${JSON.parse(tool.result).answer}`;
    el.replaceChildren(b);
  },
});
const rated = new Set();
lovia.registerMessageAction("quote", {
  label: "Quote",
  icon: "quote",
  when: (msg) => msg.role === "assistant",
  run(msg) { lovia.setDraft("> " + msg.text.split("\n")[0]); },
});
lovia.registerMessageAction("rate-up", {
  label: "Good answer",
  icon: "thumbs-up",
  when: (msg) => msg.role === "assistant" && msg.ref !== null,
  pressed: (msg) => rated.has(msg.ref),
  async run(msg) {
    const res = await lovia.fetch("/feedback", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ session_id: msg.sessionId, ref: msg.ref }),
    });
    if (!res.ok) throw new Error("Could not save the rating");
    rated.add(msg.ref);
    lovia.refreshMessageActions();
  },
});
lovia.registerView("dashboard", {
  title: "Dashboard",
  async render(el, ctx) {
    const p = document.createElement("p");
    p.dataset.testid = "dashboard";
    p.textContent = `path=${ctx.path} chat=${lovia.state.sessionId}`;
    el.replaceChildren(p);
    return () => { window.__cleanups = (window.__cleanups || 0) + 1; };
  },
});
"""

TEMPLATE = """{% extends "lovia/index.html" %}
{% block sidebar_nav %}
<a href="?view=dashboard/today" data-testid="dash-link" data-i18n="acme.dashboard">Dashboard</a>
{% endblock %}
"""

LOGO = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="96" height="24">'
    '<rect width="24" height="24" rx="6" fill="#6d28d9"/>'
    '<text x="32" y="18" font-family="sans-serif" font-size="16" font-weight="600" fill="#6d28d9">Acme</text></svg>'
)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1100, "height": 760}, locale="en-US")
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(15_000)
    yield pg
    context.close()
    assert errors == [], errors


def _assets(tmp_path: Path) -> Path:
    ui = tmp_path / "ui"
    ui.mkdir()
    (ui / "acme.js").write_text(EXTENSION, encoding="utf-8")
    (ui / "index.html").write_text(TEMPLATE, encoding="utf-8")
    theme = ':root { --accent: #6d28d9; }\n[data-part="attach"] { outline: 2px solid #6d28d9; }\n'
    (ui / "theme.css").write_text(theme, encoding="utf-8")
    (ui / "logo.svg").write_text(LOGO, encoding="utf-8")
    return ui


def _serve(tmp_path: Path, ui: ChatUI, gate: Gate | None = None) -> ThreadServer:
    app = create_app(scripted_agent(gate), db_path=str(tmp_path / "web.db"), ui=ui, title="Acme")
    ratings: list[dict[str, Any]] = []
    app.state.ratings = ratings

    @app.post("/feedback")
    async def feedback(request: Request) -> JSONResponse:
        body = await request.json()
        if len(ratings) >= 1:
            return JSONResponse({"detail": "full"}, status_code=500)
        ratings.append(body)
        return JSONResponse({"ok": True})

    return ThreadServer(app)


def test_zh_locale_renders_chinese(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1100, "height": 760}, locale="zh-CN")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(15_000)
    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "web.db"))) as srv:
        page.goto(srv.url)
        page.get_by_text("开始对话。").wait_for()
        assert page.get_by_test_id("new-chat").inner_text() == "+ 新对话"
        assert page.get_by_test_id("send").inner_text() == "发送"
        assert "Enter 发送" in (page.get_by_test_id("composer").get_attribute("placeholder") or "")
        assert page.evaluate("document.documentElement.lang") == "zh"
        send(page, "tool 查一下")
        idle(page)
        page.get_by_test_id("copy-answer").wait_for()
        assert page.get_by_test_id("copy-answer").inner_text() == "复制"
        assert "输入" in page.locator(".usage").first.inner_text()
        page.screenshot(path=str(IMG / "web-zh.png"))
    context.close()
    assert errors == [], errors


def test_zh_locale_translates_the_schedules_dialog_and_the_page_without_settings(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1100, "height": 760}, locale="zh-CN")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(20_000)
    with ThreadServer(create_app(scripted_agent(), db_path=str(tmp_path / "web.db"))) as srv:
        page.goto(srv.url)
        page.get_by_text("开始对话。").wait_for()
        assert page.get_by_test_id("settings-open").is_hidden()  # no model_config: no Settings
        opener = page.get_by_test_id("schedules-open")
        assert opener.inner_text() == "定时任务"
        assert opener.get_attribute("title") == "定时运行"
        opener.click()
        dialog = page.get_by_test_id("schedules-dialog")
        dialog.get_by_text("还没有定时任务。").wait_for()
        form = page.get_by_test_id("schedule-form")
        assert "新建定时任务" in form.inner_text()
        assert page.get_by_test_id("schedule-create").inner_text() == "创建"
        assert page.get_by_test_id("schedule-message").get_attribute("placeholder") == "每次触发时智能体要做的事"
        page.get_by_test_id("schedule-kind").select_option("every")
        page.get_by_test_id("schedule-expr").fill("3600")
        page.get_by_test_id("schedule-message").fill("汇报")
        page.get_by_test_id("schedule-create").click()
        item = page.get_by_test_id("schedule-item")
        item.wait_for()
        assert "每 3600 秒" in item.inner_text()
        assert page.get_by_test_id("schedule-status").inner_text().startswith("下次 ")
        assert page.get_by_test_id("schedule-toggle").inner_text() == "暂停"
        page.get_by_test_id("schedule-toggle").click()
        page.wait_for_function(
            "() => document.querySelector('[data-testid=schedule-status]')?.textContent === '已暂停'"
        )
        assert "Schedules" not in dialog.inner_text()
    context.close()
    assert errors == [], errors


def test_messages_override_default_lang_and_added_language(page: Any, tmp_path: Path) -> None:
    ui = ChatUI(
        assets=_assets(tmp_path),
        default_lang="zh",
        messages={
            "zh": {"composer.placeholder": "问问 Acme…", "acme.dashboard": "仪表盘"},
            "ja": {"nav.newChat": "新しいチャット"},
            "en": {"nav.nwChat": "typo"},
        },
    )
    warnings: list[str] = []
    page.on("console", lambda m: warnings.append(m.text) if m.type == "warning" else None)
    with _serve(tmp_path, ui) as srv:
        page.goto(srv.url)  # the browser says en-US, default_lang says zh
        page.get_by_text("开始对话。").wait_for()
        assert page.get_by_test_id("composer").get_attribute("placeholder") == "问问 Acme…"
        assert page.get_by_test_id("dash-link").inner_text() == "仪表盘"  # a key of the user's own
        assert page.get_by_test_id("new-chat").inner_text() == "+ 新对话"
        assert any("nav.nwChat" in w for w in warnings), warnings
        options = page.locator("#language option").evaluate_all("(os) => os.map((o) => o.value)")
        assert options == ["", "en", "zh", "ja"]
        page.get_by_test_id("language").select_option("ja")
        page.wait_for_function("() => document.documentElement.lang === 'ja'")
        assert page.get_by_test_id("new-chat").inner_text() == "新しいチャット"
        assert page.get_by_test_id("send").inner_text() == "Send"  # ja lacks it: English
        assert page.get_by_test_id("dash-link").inner_text() == "Dashboard"  # own key, no ja string: kept
        page.get_by_test_id("language").select_option("")  # Automatic: back to default_lang
        page.wait_for_function("() => document.documentElement.lang === 'zh'")


def test_extension_script_tool_view_actions_events_and_view(page: Any, tmp_path: Path) -> None:
    ui = ChatUI(
        assets=_assets(tmp_path),
        scripts=["acme.js"],
        styles=["theme.css"],
        logo="logo.svg",
        empty_title="Ask Acme",
        empty_description=["Orders, tickets and stock.", "<b>not bold</b>"],
        empty_examples=["tool order 7"],
    )
    with _serve(tmp_path, ui) as srv:
        page.goto(srv.url)
        page.evaluate("window.lovia.ready")
        assert page.get_by_test_id("logo").is_visible()
        welcome = page.get_by_test_id("welcome")
        assert "Ask Acme" in welcome.inner_text() and "<b>not bold</b>" in welcome.inner_text()
        page.get_by_test_id("example").click()
        assert page.get_by_test_id("composer").input_value() == "tool order 7"
        page.get_by_test_id("send").click()
        idle(page)
        tool = page.get_by_test_id("tool-call")
        assert tool.locator("summary").inner_text().startswith("Looked up “tool order 7”")
        assert tool.get_attribute("data-status") == "done"
        tool.locator("summary").click()
        assert page.get_by_test_id("lookup-answer").inner_text() == "The answer is 42"
        # message actions: the rating waits for the ref the server gives once the run is stored
        rate = page.locator('[data-part="message-actions"] [data-action="rate-up"]')
        rate.wait_for()
        assert rate.get_attribute("aria-pressed") == "false"
        rate.click()
        page.wait_for_function(
            "() => document.querySelector('[data-action=\"rate-up\"]')?.getAttribute('aria-pressed') === 'true'"
        )
        page.screenshot(path=str(IMG / "web-custom.png"))  # logo, theme, tool view, actions
        rating = srv.app.state.ratings[0]
        session_id = page.evaluate("window.lovia.state.sessionId")
        assert rating["session_id"] == session_id and rating["ref"].endswith(":0")
        rate.click()  # the route now answers 500: the error shows as a toast
        page.get_by_test_id("toast").filter(has_text="Could not save the rating").wait_for()
        page.locator('[data-action="quote"]').click()
        assert page.get_by_test_id("composer").input_value().startswith("> Done:")
        events = page.evaluate("window.__events")
        names = [e[0] for e in events]
        assert names.index("session") < names.index("run-start") < names.index("run-end")
        assert [e[1] for e in events if e[0] == "run-end"][0]["status"] == "done"
        # a custom view, opened from the template's link, covers the chat without leaving it
        page.get_by_test_id("dash-link").click()
        view = page.get_by_test_id("dashboard")
        view.wait_for()
        assert view.inner_text() == f"path=today chat={session_id}"
        assert page.locator("#title").inner_text() == "Dashboard"
        assert page.get_by_test_id("dash-link").get_attribute("aria-current") == "page"
        assert not page.get_by_test_id("composer").is_visible()
        assert "view=dashboard%2Ftoday" in page.url or "view=dashboard/today" in page.url
        page.get_by_test_id("new-chat").click()
        page.get_by_test_id("view").wait_for(state="hidden")
        assert page.evaluate("window.__cleanups") == 1
        assert [e[1]["view"] for e in page.evaluate("window.__events") if e[0] == "view"] == ["dashboard/today", None]
        # a reload with the view in the URL starts on it; an unknown one shows a notice
        page.goto(srv.url + "/?view=dashboard")
        page.get_by_test_id("dashboard").wait_for()
        probe = "() => { try { lovia.openView('nope'); return 'opened'; } catch (e) { return 'threw'; } }"
        assert page.evaluate(probe) == "threw"
        page.goto(srv.url + "/?view=nope")
        page.get_by_test_id("view-unknown").wait_for()


def test_failing_script_shows_a_toast_and_the_page_starts(page: Any, tmp_path: Path) -> None:
    ui_dir = tmp_path / "ui"
    ui_dir.mkdir()
    (ui_dir / "broken.js").write_text("this is not javascript(", encoding="utf-8")
    ui = ChatUI(assets=ui_dir, scripts=["missing.js", "broken.js"])
    with _serve(tmp_path, ui) as srv:
        page.goto(srv.url)
        page.evaluate("window.lovia.ready")
        toasts = page.get_by_test_id("toast")
        toasts.first.wait_for()
        assert toasts.count() == 2
        send(page, "hello")
        page.get_by_text("You said: hello").wait_for()


def test_login_url_sends_a_signed_out_user_to_sign_in(page: Any, tmp_path: Path) -> None:
    app = create_app(scripted_agent(), db_path=str(tmp_path / "web.db"), ui=ChatUI(login_url="/login?next={next}"))

    @app.middleware("http")
    async def signed_out(request: Request, call_next: Any) -> Any:
        if request.url.path.startswith("/api/"):
            body = {"detail": {"code": "signed_out", "message": "sign in first", "hint": None}}
            return JSONResponse(body, status_code=401)
        return await call_next(request)

    @app.get("/login")
    async def login(next: str) -> JSONResponse:
        return JSONResponse({"login_for": next})

    with ThreadServer(app) as srv:
        page.goto(srv.url + "/?x=1#/chat/abc")
        page.wait_for_url("**/login?next=*")
        assert json.loads(page.locator("body").inner_text()) == {"login_for": "/?x=1#/chat/abc"}


def test_registrations_undo_in_any_order_and_send_keeps_the_draft(page: Any, tmp_path: Path) -> None:
    with _serve(tmp_path, ChatUI(assets=_assets(tmp_path), scripts=["acme.js"])) as srv:
        page.goto(srv.url)
        page.evaluate("window.lovia.ready")
        checks = page.evaluate(
            """() => {
              const out = {};
              const undoA = lovia.registerToolView("lookup", { summary: () => "A" });
              const undoB = lovia.registerToolView("lookup", { summary: () => "B" });
              undoA();  // the older one goes first: B stays on top
              out.afterA = lovia.state.sessionId === null;
              window.__undoB = undoB;
              const bad = (fn) => { try { fn(); return "accepted"; } catch (e) { return "threw"; } };
              out.unknownEvent = bad(() => lovia.on("nope", () => {}));
              out.badViewId = bad(() => lovia.registerView("Bad Id", { render() {} }));
              out.reservedView = bad(() => lovia.registerView("lovia-x", { render() {} }));
              out.reservedKind = bad(() => lovia.registerRenderer("lovia.table", { render() {} }));
              window.__calls = [];
              lovia.on("session", () => { throw new Error("listener failure"); });
              lovia.on("session", (p) => window.__calls.push(p.sessionId));
              return out;
            }"""
        )
        assert checks == {
            "afterA": True,
            "unknownEvent": "threw",
            "badViewId": "threw",
            "reservedView": "threw",
            "reservedKind": "threw",
        }
        page.get_by_test_id("composer").fill("my unsent draft")
        page.evaluate("lovia.send('tool from a script')")
        tool = page.get_by_test_id("tool-call")
        tool.wait_for()
        idle(page)
        assert tool.locator("summary").inner_text().startswith("B")
        page.evaluate("window.__undoB()")  # back to acme.js's view
        assert tool.locator("summary").inner_text().startswith("Looked up")
        assert page.get_by_test_id("composer").input_value() == "my unsent draft"
        assert page.evaluate("window.__calls.length") >= 1  # the throwing listener did not stop it


def _search_agent() -> Any:
    from lovia import Agent, tool
    from lovia.testing import ScriptedProvider, call, text
    from lovia.transcript import ToolResultEntry

    @tool
    def web_search(query: str) -> str:
        """Search the web (canned)."""
        return f"3 results for {query}"

    @tool
    def order_status(order_id: int) -> str:
        """Look up an order (canned)."""
        return "shipped"

    def script(entries: list[Any], _tools: list[Any]) -> Any:
        done = sum(isinstance(e, ToolResultEntry) for e in entries)
        if done == 0:
            return call("web_search", {"query": "lovia docs"}, call_id="c1")
        if done == 1:
            return call("order_status", {"order_id": 7}, call_id="c2")
        return text("Found it.")

    return Agent(name="searcher", model=ScriptedProvider(script), tools=[web_search, order_status])


def test_own_tools_read_as_a_line_and_a_star_view_comes_first(page: Any, tmp_path: Path) -> None:
    ui_dir = tmp_path / "ui"
    ui_dir.mkdir()
    (ui_dir / "labels.js").write_text(
        "const labels = { order_status: 'Looking up an order' };\n"
        "window.lovia.registerToolView('*', { summary: (tool) => labels[tool.name] ?? null });\n",
        encoding="utf-8",
    )
    app = create_app(_search_agent(), db_path=str(tmp_path / "web.db"), ui=ChatUI(assets=ui_dir, scripts=["labels.js"]))
    with ThreadServer(app) as srv:
        page.goto(srv.url)
        send(page, "find the docs")
        page.get_by_text("Found it.").wait_for()
        idle(page)
        cards = page.get_by_test_id("tool-call")
        assert cards.count() == 2
        first = cards.nth(0).locator("summary")
        assert first.inner_text().startswith("Web search “lovia docs”")  # '*' said null: lovia's own line
        assert first.get_attribute("title") == 'web_search({"query": "lovia docs"})'
        assert cards.nth(1).locator("summary").inner_text().startswith("Looking up an order")
        assert cards.nth(1).get_attribute("data-tool") == "order_status"


def test_the_branding_example_works_in_the_page(page: Any, tmp_path: Path) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "web_branding.py"
    spec = importlib.util.spec_from_file_location("web_branding_example", path)
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with ThreadServer(example.build_app(str(tmp_path / "acme.db"))) as srv:
        page.goto(srv.url)
        page.evaluate("window.lovia.ready")
        assert page.get_by_test_id("composer").get_attribute("placeholder") == "Ask Acme anything…"
        page.get_by_test_id("example").click()
        page.get_by_test_id("send").click()
        page.get_by_text("Order 7 shipped yesterday").wait_for()
        idle(page)
        summary = page.get_by_test_id("tool-call").locator("summary")
        assert summary.inner_text().startswith("Looked up order 7")
        page.locator('[data-action="quote"]').click()
        assert page.get_by_test_id("composer").input_value().startswith("> Order 7 shipped")
        page.get_by_role("link", name="Orders").click()
        page.get_by_text("#7 Espresso machine — shipped").wait_for()
        assert page.locator("#title").inner_text() == "Orders"


def test_inline_scripts_of_the_template_run_and_injected_ones_do_not(page: Any, tmp_path: Path) -> None:
    # The template is the app author's markup: its inline import map and script run without any
    # nonce written by hand. A script that reaches the page later (here added by the DOM, as an
    # injection through rendered content would) has no nonce and is refused by the page's policy.
    ui = tmp_path / "ui"
    ui.mkdir()
    (ui / "mod.js").write_text("export const answer = 42;\n", encoding="utf-8")
    (ui / "index.html").write_text(
        '{% extends "lovia/index.html" %}\n'
        '{% block head %}<script type="importmap">{"imports": {"acme": "{{ url_for(\'ui-assets\', '
        "path='mod.js').path }}\"}}</script>{% endblock %}\n"
        "{% block body_end %}<script>window.__blockRan = true;</script>"
        '<script type="module">import { answer } from "acme"; window.__answer = answer;</script>'
        '<style>.acme-mark { color: rgb(1, 2, 3); }</style><p class="acme-mark" data-testid="mark">m</p>'
        "{% endblock %}\n",
        encoding="utf-8",
    )
    with _serve(tmp_path, ChatUI(assets=ui)) as srv:
        page.goto(srv.url)
        page.wait_for_function("() => window.__answer === 42")
        assert page.evaluate("window.__blockRan") is True
        color = page.get_by_test_id("mark").evaluate("el => getComputedStyle(el).color")
        assert color == "rgb(1, 2, 3)"
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.__injected = 1';"
            " document.body.appendChild(s); }"
        )
        page.wait_for_timeout(200)
        assert page.evaluate("window.__injected === undefined")
