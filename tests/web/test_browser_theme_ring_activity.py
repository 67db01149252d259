"""The Theme menu, the composer's context ring and folded activity, in real Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, Compaction, tool
from lovia.messages import Usage
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app

from .helpers import Gate, ThreadServer, last_user, scripted_agent
from .test_browser import CHROMIUM, idle, page, send

__all__ = ["page"]  # the fixture, re-used (``browser`` comes from conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

WINDOW = 128_000
CODE = "Here:\n\n```python\ndef answer():\n    return 42\n```\n"
THREE = ("read_file", "search", "lookup")


def fold_agent(gate: Gate) -> Agent[Any]:
    """Replies by the first word: ``ring``/``warn``/``full`` report usage, ``three`` calls three
    tools, ``one`` calls one, ``hold`` calls two and waits in the second, ``code`` answers code."""

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    @tool
    def search(q: str) -> str:
        """Search."""
        return f"hits for {q}"

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"answer to {q}"

    @tool
    async def wait() -> str:
        """Wait until the test releases it."""
        await gate.wait_release()
        return "waited"

    usages = {"ring": 12_345, "warn": 110_000, "full": 125_000}

    def script(entries: list[Any], _tools: list[Any]) -> Any:
        said, results = last_user(entries)
        word = said.split()[0].lower() if said.split() else ""
        if word in usages:
            return text("Counted.", usage=Usage(input_tokens=usages[word], output_tokens=5))
        if word == "three" and results < 3:
            name = THREE[results]
            return call(name, {"path": "a.md"} if name == "read_file" else {"q": "x"}, call_id=f"c{len(entries)}")
        if word == "one" and results == 0:
            return call("lookup", {"q": "once"}, call_id=f"c{len(entries)}")
        if word == "hold" and results == 0:
            return call("lookup", {"q": "first"}, call_id=f"c{len(entries)}")
        if word == "hold" and results == 1:
            return call("wait", {}, call_id=f"c{len(entries)}")
        if word == "steps":  # two model calls: the ring shows the last one's prompt, not their sum
            if results == 0:
                return call("lookup", {"q": "size"}, call_id=f"c{len(entries)}", usage=Usage(input_tokens=40_000))
            return text("Measured.", usage=Usage(input_tokens=50_000, output_tokens=5))
        if word == "code":
            return text(CODE)
        return text(f"Done after {results} steps.")

    return Agent(
        name="folds",
        model=ScriptedProvider(script),
        tools=[read_file, search, lookup, wait],
        context_policy=Compaction(context_window=WINDOW),
    )


class _Gate(Gate):
    async def wait_release(self) -> None:
        import asyncio

        while not self.release.is_set():
            await asyncio.sleep(0.02)


@pytest.fixture
def gate() -> _Gate:
    return _Gate()


@pytest.fixture
def server(tmp_path: Path, gate: _Gate) -> Iterator[ThreadServer]:
    app = create_app(fold_agent(gate), db_path=str(tmp_path / "web.db"))
    with ThreadServer(app) as srv:
        yield srv


def _ready(page: Any, url: str) -> None:
    page.goto(url)
    page.evaluate("window.lovia.ready")


def _listen(page: Any) -> None:
    # (not the `off` function as the expression's value: evaluate would call it)
    page.evaluate(
        "window.__themes = []; window.__off = window.lovia.on('theme', (e) => window.__themes.push({ ...e })); 0"
    )


def _token(page: Any, name: str) -> str:
    return str(page.evaluate(f"getComputedStyle(document.documentElement).getPropertyValue('{name}').trim()"))


def _keyword_color(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.querySelector('.msg .hljs-keyword')).color"))


# ---------------------------------------------------------------------------------- theme


def test_dark_from_the_theme_menu_applies_persists_and_fires_once(server: ThreadServer, page: Any) -> None:
    page.emulate_media(color_scheme="light")
    _ready(page, server.url)
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    send(page, "code please")
    idle(page)
    page.locator(".msg .hljs-keyword").first.wait_for()
    light_bg, light_code = _token(page, "--bg"), _keyword_color(page)
    _listen(page)

    page.get_by_test_id("theme").select_option("dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate("window.lovia.state.theme") == "dark"
    assert page.evaluate("window.__themes") == [{"theme": "dark"}]
    assert _token(page, "--bg") == "#17181b" != light_bg
    dark_code = _keyword_color(page)
    assert dark_code != light_code and dark_code == "rgb(255, 123, 114)"  # the dark highlight style

    page.emulate_media(color_scheme="dark")  # the system agrees now: the theme did not change
    page.wait_for_timeout(150)
    assert page.evaluate("window.__themes") == [{"theme": "dark"}]

    page.emulate_media(color_scheme="light")  # a manual pick does not follow the system
    page.wait_for_timeout(150)
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"

    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"  # from the head, before app.js
    page.evaluate("window.lovia.ready")
    assert page.get_by_test_id("theme").input_value() == "dark"
    assert _token(page, "--bg") == "#17181b"
    page.locator(".msg .hljs-keyword").first.wait_for()
    assert _keyword_color(page) == dark_code


def test_automatic_follows_the_system_live(server: ThreadServer, page: Any) -> None:
    page.emulate_media(color_scheme="light")
    _ready(page, server.url)
    page.get_by_test_id("theme").select_option("dark")
    _listen(page)
    page.get_by_test_id("theme").select_option("")  # Automatic: back to the system's light
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    assert page.evaluate("window.__themes") == [{"theme": "light"}]
    assert page.evaluate("localStorage.getItem('lovia_theme')") is None

    page.emulate_media(color_scheme="dark")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    assert page.evaluate("window.__themes") == [{"theme": "light"}, {"theme": "dark"}]
    assert page.evaluate("window.lovia.state.theme") == "dark"
    assert _token(page, "--bg") == "#17181b"
    page.emulate_media(color_scheme="light")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    assert page.evaluate("window.__themes.length") == 3


# ---------------------------------------------------------------------------------- ring


def _ring_label(page: Any) -> str:
    return str(page.get_by_test_id("context-ring").get_attribute("aria-label"))


def test_the_context_ring_shows_the_latest_run_against_the_window(server: ThreadServer, page: Any) -> None:
    _ready(page, server.url)
    ring = page.get_by_test_id("context-ring")
    assert ring.is_hidden()  # a new chat
    send(page, "ring it")
    idle(page)
    ring.wait_for()
    assert "12,345 of 128,000 tokens (10%)" in _ring_label(page)
    assert ring.get_attribute("title") == "12,345 of 128,000 tokens (10%)"
    assert ring.get_attribute("data-level") == "ok"
    first = page.evaluate("location.hash")

    send(page, "warn me")  # the latest run counts, not the sum of the chat's runs
    idle(page)
    page.wait_for_function("() => document.querySelector('[data-part=context-ring]').dataset.percent === '86'")
    assert ring.get_attribute("data-level") == "warn"

    page.get_by_test_id("new-chat").click()
    ring.wait_for(state="hidden")
    send(page, "full now")
    idle(page)
    page.wait_for_function("() => document.querySelector('[data-part=context-ring]').dataset.level === 'danger'")
    assert "(98%)" in _ring_label(page)

    sid = first.split("/")[-1]
    page.locator(f"[data-testid=session-item][data-session-id='{sid}']").click()  # its own latest run
    page.wait_for_function("() => document.querySelector('[data-part=context-ring]').dataset.percent === '86'")


def test_the_ring_counts_the_last_model_call_of_a_multi_step_run(server: ThreadServer, page: Any) -> None:
    _ready(page, server.url)
    send(page, "steps please")
    idle(page)
    page.get_by_test_id("context-ring").wait_for()
    assert "50,000 of 128,000 tokens (39%)" in _ring_label(page)  # the run's input was 90,000 in all
    sid = page.evaluate("decodeURIComponent(location.hash.slice('#/chat/'.length))")
    (run,) = httpx.get(f"{server.url}/api/sessions/{sid}").json()["runs"]
    assert run["usage"]["input_tokens"] == 90_000 and run["usage"]["last_input_tokens"] == 50_000


def test_no_ring_when_the_window_is_unknown(tmp_path: Path, page: Any) -> None:
    app = create_app(scripted_agent(), db_path=str(tmp_path / "web.db"))
    with ThreadServer(app) as srv:
        _ready(page, srv.url)
        send(page, "hello")
        idle(page)
        page.get_by_test_id("message-assistant").wait_for()
        assert page.get_by_test_id("context-ring").is_hidden()


# ---------------------------------------------------------------------------------- activity


def _check_three(page: Any) -> None:
    turns = page.get_by_test_id("message-assistant")
    fold = turns.last.locator("[data-part=activity]")
    assert fold.count() == 1
    assert fold.locator("[data-part=tool]").count() == 3
    cards = fold.locator("[data-part=tool]")
    assert cards.evaluate_all("(ns) => ns.map((n) => n.dataset.tool)") == list(THREE)
    assert cards.evaluate_all("(ns) => ns.map((n) => n.dataset.status)") == ["done"] * 3
    assert fold.get_attribute("data-open") == "false"  # the reply's text came
    summary = fold.locator(":scope > .activity-summary").inner_text()
    assert "3 steps" in summary and "read_file, search, lookup" in summary
    assert "Done after 3 steps." in turns.last.inner_text()


def test_three_tool_steps_fold_under_one_summary(server: ThreadServer, page: Any) -> None:
    _ready(page, server.url)
    send(page, "three steps")
    idle(page)
    page.wait_for_function("() => document.querySelector('[data-part=activity]')?.dataset.open === 'false'")
    _check_three(page)
    assert page.locator("[data-part=activity] > .activity-steps").evaluate("(n) => n.inert") is True
    page.locator("[data-part=activity] > .activity-summary").click()  # the reader opens it
    assert page.locator("[data-part=activity]").get_attribute("data-open") == "true"
    assert page.locator("[data-part=activity] > .activity-steps").evaluate("(n) => n.inert") is False

    page.reload()
    page.evaluate("window.lovia.ready")
    page.get_by_test_id("message-assistant").wait_for()
    _check_three(page)


def test_a_single_step_is_not_folded(server: ThreadServer, page: Any) -> None:
    _ready(page, server.url)
    send(page, "one step")
    idle(page)
    page.get_by_text("Done after 1 steps.").wait_for()
    assert page.locator("[data-part=activity]").count() == 0
    assert page.get_by_test_id("tool-call").count() == 1 and page.get_by_test_id("tool-call").is_visible()
    page.reload()
    page.get_by_text("Done after 1 steps.").wait_for()
    assert page.locator("[data-part=activity]").count() == 0


def test_a_fold_is_open_while_its_steps_come_in(server: ThreadServer, gate: _Gate, page: Any) -> None:
    _ready(page, server.url)
    send(page, "hold on")
    page.wait_for_function("() => document.querySelectorAll('[data-part=activity] [data-part=tool]').length === 2")
    fold = page.locator("[data-part=activity]")
    assert fold.get_attribute("data-open") == "true"
    assert fold.get_attribute("data-status") == "running"
    assert page.locator("[data-part=tool][data-tool=wait]").is_visible()
    gate.release.set()
    idle(page)
    page.wait_for_function("() => document.querySelector('[data-part=activity]').dataset.open === 'false'")
    assert fold.get_attribute("data-status") == "done"
