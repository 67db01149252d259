"""The Settings dialog in real Chromium: add a profile on a local endpoint, switch to it, chat on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .config_helpers import Endpoint, config_server, make_runtime, profile
from .helpers import ThreadServer, scripted_agent, wait_for
from .test_browser import IMG

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
KEY_A = "sk-first-key-aaaa1111"
KEY_B = "sk-second-key-bbbb2222"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(20_000)
    yield pg
    context.close()
    assert errors == [], errors


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOVIA_MODEL", raising=False)
    return tmp_path


def row(page: Any, name: str) -> Any:
    return page.get_by_test_id("model-row").filter(has=page.get_by_test_id("model-name").get_by_text(name, exact=True))


def test_add_switch_and_chat_on_the_new_endpoint(home: Path, page: Any) -> None:
    with Endpoint("A") as a, Endpoint("B") as b:
        runtime = make_runtime(home, {"models": [profile("a", a, key=KEY_A)]})
        with config_server(home, runtime) as srv:
            responses: list[Any] = []
            page.on("response", lambda r: responses.append(r))
            page.goto(srv.url)
            page.get_by_test_id("settings-open").click()
            dialog = page.get_by_test_id("settings-dialog")
            dialog.wait_for()
            assert "…1111" in row(page, "A").inner_text()

            page.get_by_test_id("model-add").click()
            page.get_by_test_id("form-name").fill("Bee")
            page.get_by_test_id("form-model").fill("m")
            page.get_by_test_id("form-base-url").fill(b.url)
            page.get_by_test_id("form-api-key").fill(KEY_B)
            page.get_by_test_id("form-test").click()
            result = page.get_by_test_id("form-test-result")
            wait_for(lambda: result.get_attribute("data-outcome") == "ok", timeout=20)
            assert "'m' listed" in result.inner_text()
            page.get_by_test_id("form-save").click()
            row(page, "Bee").wait_for()
            assert "…2222" in row(page, "Bee").inner_text()
            assert page.get_by_test_id("form-api-key").input_value() == ""  # the typed key left the page

            row(page, "Bee").get_by_test_id("model-use").click()
            row(page, "Bee").get_by_test_id("role-chat").wait_for()
            assert row(page, "A").get_by_test_id("role-chat").count() == 0
            row(page, "Bee").get_by_test_id("model-test").click()
            wait_for(lambda: row(page, "Bee").get_by_test_id("model-test-result").get_attribute("data-outcome") == "ok")
            dialog.screenshot(path=str(IMG / "web-settings.png"))  # two models, one tested, keys masked
            page.get_by_test_id("settings-close").click()

            page.get_by_test_id("composer").fill("hello there")
            page.get_by_test_id("send").click()
            page.get_by_test_id("message-assistant").get_by_text("answer from B").wait_for()
            page.get_by_test_id("stop").wait_for(state="hidden")
            assert a.posts() == [] and len(b.posts()) == 1
            assert b.posts()[0].headers["authorization"] == f"Bearer {KEY_B}"  # the key went server-side

            html = page.content()
            values = page.evaluate("[...document.querySelectorAll('input, textarea')].map((e) => e.value).join(' ')")
            bodies = []
            for response in responses:
                if "/api/events" in response.url:
                    continue  # the open notification stream never ends
                try:
                    bodies.append(response.text())
                except Exception:
                    continue
            assert bodies, "no response was recorded"
            for key in (KEY_A, KEY_B):
                assert key not in html and key not in values
                assert not [body for body in bodies if key in body]


def test_no_settings_without_a_runtime(home: Path, page: Any) -> None:
    from lovia.web import create_app

    with ThreadServer(create_app(scripted_agent(), db_path=str(home / "plain.db"))) as srv:
        page.goto(srv.url)
        page.get_by_test_id("composer").wait_for()
        # both the page's and the settings module's /api/info have answered
        page.wait_for_function(
            "() => performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/api/info')).length >= 2"
        )
        page.get_by_test_id("model").wait_for(state="attached")
        assert page.get_by_test_id("settings-open").is_hidden()


def test_delete_and_errors_show_in_the_dialog(home: Path, page: Any) -> None:
    with Endpoint("A") as a, Endpoint("B") as b:
        runtime = make_runtime(home, {"models": [profile("a", a), profile("b", b)]})
        with config_server(home, runtime) as srv:
            page.goto(srv.url)
            page.get_by_test_id("settings-open").click()
            row(page, "B").wait_for()
            assert row(page, "A").get_by_test_id("model-delete").count() == 0  # the chat model cannot go
            page.get_by_test_id("roles-aux").select_option("b")
            page.get_by_test_id("roles-save").click()
            row(page, "B").get_by_test_id("role-aux").wait_for()
            assert runtime.config.roles.aux == "b"
            row(page, "B").get_by_test_id("model-delete").click()
            row(page, "B").wait_for(state="detached")
            assert [m.id for m in runtime.config.models] == ["a"] and runtime.config.roles.aux is None
            page.get_by_test_id("model-add").click()
            page.get_by_test_id("form-model").fill("m")
            page.get_by_test_id("form-base-url").fill("not a url")
            page.get_by_test_id("form-save").click()
            status = page.get_by_test_id("settings-status")
            wait_for(lambda: "base_url" in status.inner_text())
            assert "error" in (status.get_attribute("class") or "")


def test_first_launch_adds_a_model_from_the_notice(home: Path, page: Any) -> None:
    with Endpoint("B") as b:
        runtime = make_runtime(home)
        with config_server(home, runtime) as srv:
            page.goto(srv.url)
            page.get_by_test_id("notice-settings").click()
            page.get_by_test_id("form-model").fill("m")
            page.get_by_test_id("form-base-url").fill(b.url)
            page.get_by_test_id("form-save").click()
            # the page reloads once configured: the notice is gone and the composer works
            page.get_by_test_id("notice-settings").wait_for(state="detached")
            composer = page.get_by_test_id("composer")
            wait_for(lambda: composer.is_enabled(), timeout=20)
            assert page.get_by_test_id("demo-badge").is_hidden()
            composer.fill("first message")
            page.get_by_test_id("send").click()
            page.get_by_test_id("message-assistant").get_by_text("answer from B").wait_for()
            assert page.get_by_test_id("model").inner_text() == "m"
