# ruff: noqa: F811  (the page/browser fixtures are imported from test_browser and used as arguments)
"""The agent switcher, the "Chats" label and the Export menu in real Chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.transcript import TranscriptEntry
from lovia.web import ChatUI, create_app

from .helpers import ThreadServer, last_user
from .test_browser import idle, page, pytestmark, send  # noqa: F401  (fixtures, markers)

TOKEN = "tok-export-menu"


def _agent(name: str, model: str) -> Agent[Any]:
    """An agent that answers with its own name, on a scripted model called ``model``."""

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said, _ = last_user(entries)
        return text(f"{name} heard: {said}")

    return Agent(name=name, model=ScriptedProvider(script, model=model))


def _agents() -> dict[str, Agent[Any]]:
    return {"alpha": _agent("alpha", "alpha-model"), "beta": _agent("beta", "beta-model")}


@pytest.fixture
def two(tmp_path: Path) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(_agents(), db_path=str(tmp_path / "two.db"))) as srv:
        yield srv


@pytest.fixture
def one(tmp_path: Path) -> Iterator[ThreadServer]:
    folder = tmp_path / "ui"
    folder.mkdir()
    (folder / "hide.css").write_text('[data-part="export"] { display: none; }\n')
    ui = ChatUI(assets=folder, styles=["hide.css"])
    app = create_app({"alpha": _agent("alpha", "alpha-model")}, db_path=str(tmp_path / "one.db"), ui=ui)
    with ThreadServer(app) as srv:
        yield srv


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[ThreadServer]:
    app = create_app({"alpha": _agent("alpha", "alpha-model")}, db_path=str(tmp_path / "tok.db"), token=TOKEN)
    with ThreadServer(app) as srv:
        yield srv


def _chat_id(page: Any) -> str:
    page.wait_for_function("() => location.hash.startsWith('#/chat/')")
    return str(page.evaluate("decodeURIComponent(location.hash.slice('#/chat/'.length))"))


def test_switcher_picks_the_agent_of_new_chats(two: ThreadServer, page: Any) -> None:
    page.goto(two.url)
    page.evaluate("window.lovia.ready")
    switcher = page.get_by_test_id("agent-switcher")
    assert switcher.is_visible()
    assert page.locator('[data-part="agent-switcher"] select option').all_inner_texts() == ["alpha", "beta"]
    assert switcher.input_value() == "alpha"
    assert page.evaluate("window.lovia.state.agent") == "alpha"
    assert page.get_by_test_id("model").inner_text() == "alpha-model"
    assert page.locator('[data-part="sessions-label"]').inner_text().strip().lower() == "chats"

    # A first chat with the default agent.
    send(page, "first question")
    page.get_by_text("alpha heard: first question").wait_for()
    idle(page)
    first = _chat_id(page)
    assert httpx.get(f"{two.url}/api/sessions/{first}").json()["agent"] == "alpha"

    # Picking beta: a new chat, the event, the state and the model label follow.
    page.evaluate("() => { window.__agents = []; window.lovia.on('agent', (e) => window.__agents.push(e)); }")
    switcher.select_option("beta")
    page.wait_for_function("() => window.__agents.length === 1")
    assert page.evaluate("window.__agents") == [{"agent": "beta"}]
    assert page.evaluate("window.lovia.state.agent") == "beta"
    assert page.evaluate("window.lovia.state.sessionId") is None
    assert page.get_by_test_id("model").inner_text() == "beta-model"

    send(page, "second question")
    page.get_by_text("beta heard: second question").wait_for()
    idle(page)
    second = _chat_id(page)
    assert second != first
    assert httpx.get(f"{two.url}/api/sessions/{second}").json()["agent"] == "beta"

    # Reopening the first chat shows its agent; the second one shows beta again.
    page.locator(f'[data-session-id="{first}"]').click()
    page.wait_for_function(f"() => window.lovia.state.sessionId === {json.dumps(first)}")
    page.wait_for_function("() => window.lovia.state.agent === 'alpha'")
    assert switcher.input_value() == "alpha"
    assert page.get_by_test_id("model").inner_text() == "alpha-model"
    page.locator(f'[data-session-id="{second}"]').click()
    page.wait_for_function("() => window.lovia.state.agent === 'beta'")
    assert switcher.input_value() == "beta"
    assert page.evaluate("window.__agents.length") == 1  # opening a chat is not a pick

    # The pick is remembered across a reload (a new chat starts with it)...
    page.goto(two.url)
    page.evaluate("window.lovia.ready")
    assert switcher.input_value() == "beta"
    assert page.evaluate("window.lovia.state.agent") == "beta"
    # ...but only while that agent is still served.
    page.evaluate("localStorage.setItem('lovia_agent', 'gone')")
    page.reload()
    page.evaluate("window.lovia.ready")
    assert switcher.input_value() == "alpha"


def test_one_agent_has_no_switcher_and_your_css_hides_export(one: ThreadServer, page: Any) -> None:
    page.goto(one.url)
    page.evaluate("window.lovia.ready")
    assert page.locator('[data-part="agent-switcher"]').count() == 0
    assert page.evaluate("window.lovia.state.agent") == "alpha"
    assert page.locator('[data-part="sessions-label"]').count() == 1
    assert page.locator('[data-part="export"]').count() == 1
    assert not page.locator('[data-part="export"]').is_visible()  # the ChatUI stylesheet wins
    send(page, "plain")
    page.get_by_text("alpha heard: plain").wait_for()
    idle(page)
    sid = _chat_id(page)
    assert httpx.get(f"{one.url}/api/sessions/{sid}").json()["agent"] is None  # the default, unnamed


def _download(page: Any, fmt: str) -> str:
    page.get_by_test_id("export").click()
    with page.expect_download() as info:
        page.get_by_test_id(f"export-{fmt}").click()
    path = info.value.path()
    assert path is not None
    return Path(path).read_text(encoding="utf-8")


def test_export_downloads_each_format(two: ThreadServer, page: Any) -> None:
    page.goto(two.url)
    page.evaluate("window.lovia.ready")
    button = page.get_by_test_id("export")
    assert button.is_disabled()  # a new chat has nothing to export
    send(page, "export me please")
    page.get_by_text("alpha heard: export me please").wait_for()
    idle(page)
    sid = _chat_id(page)
    page.wait_for_function("() => !document.querySelector('[data-testid=export]').disabled")

    md = _download(page, "md")
    assert "export me please" in md and "alpha heard: export me please" in md
    body = json.loads(_download(page, "json"))
    assert body["session"]["id"] == sid
    assert any("export me please" in json.dumps(e) for e in body["entries"])
    assert "alpha heard: export me please" in _download(page, "txt")
    html = _download(page, "html")
    assert "<html" in html.lower() and "export me please" in html

    # The menu by keyboard: it opens on the first item, Escape closes it and focus returns.
    button.focus()
    page.keyboard.press("Enter")
    menu = page.get_by_test_id("export-menu")
    menu.wait_for()
    assert page.evaluate("document.activeElement.dataset.format") == "md"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.format") == "json"
    page.keyboard.press("Escape")
    menu.wait_for(state="hidden")
    assert page.evaluate("document.activeElement.dataset.testid") == "export"
    assert button.get_attribute("aria-expanded") == "false"

    # A new chat disables it again.
    page.get_by_test_id("new-chat").click()
    page.wait_for_function("() => document.querySelector('[data-testid=export]').disabled")


def test_export_sends_the_token(guarded: ThreadServer, page: Any) -> None:
    page.goto(f"{guarded.url}/?token={TOKEN}")
    page.evaluate("window.lovia.ready")
    page.context.clear_cookies()  # only the bearer header may carry the token
    send(page, "guarded words")
    page.get_by_text("alpha heard: guarded words").wait_for()
    idle(page)
    _chat_id(page)
    page.wait_for_function("() => !document.querySelector('[data-testid=export]').disabled")
    assert "guarded words" in _download(page, "md")


def test_export_under_a_path_prefix(tmp_path: Path, page: Any) -> None:
    from .helpers import ProcessServer
    from .proxy import proxy_server

    backend = ProcessServer(
        "--root-path", "/lovia", "--app", "tests.web.app_fixture:agent", "--db", str(tmp_path / "p.db")
    )
    with backend:
        server, proxy = proxy_server("/lovia", backend.url)
        with server:
            page.goto(server.url + "/lovia/")
            send(page, "make the report")
            page.get_by_text("All done").wait_for()
            idle(page)
            sid = _chat_id(page)
            page.wait_for_function("() => !document.querySelector('[data-testid=export]').disabled")
            assert "make the report" in _download(page, "md")
            assert f"/api/sessions/{sid}/export" in proxy.paths
            page.goto("about:blank")  # close the page's event stream before the proxy stops


def test_memory_button_follows_the_agent_on_screen(tmp_path: Path, page: Any) -> None:
    from lovia import Memory

    memory = Memory(tmp_path / "memory", index=None, auto_curate=False, dream_every_days=None)
    keeper = Agent(name="keeper", model=ScriptedProvider(lambda *_: text("noted")), plugins=[memory])
    agents = {"alpha": _agent("alpha", "alpha-model"), "keeper": keeper}
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "mem.db"))) as srv:
        page.goto(srv.url)
        page.evaluate("window.lovia.ready")
        assert page.get_by_test_id("memory-open").is_hidden()  # alpha, the default, keeps no notes
        page.get_by_test_id("agent-switcher").select_option("keeper")
        page.get_by_test_id("memory-open").wait_for()
        page.get_by_test_id("memory-open").click()
        page.get_by_test_id("memory-meter").wait_for()  # the dialog reads keeper's notes
        page.keyboard.press("Escape")
        page.get_by_test_id("agent-switcher").select_option("alpha")
        page.get_by_test_id("memory-open").wait_for(state="hidden")
