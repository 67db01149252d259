"""DNS rebinding in a real browser: a page on a foreign name that resolves to 127.0.0.1 gets nothing.

Chromium's ``--host-resolver-rules`` maps ``attacker.test`` to 127.0.0.1, so everything the
attacker's page fetches from its own origin (``http://attacker.test:PORT``) reaches the lovia
server, exactly as after a rebinding. The attacker's document itself is served by the test (as
the attacker's server would have served it before the DNS answer changed).

Recent Chromium also blocks a public page from fetching a loopback address (Private Network
Access); Firefox and Safari do not, and that check has had bypasses. The browser here runs with
it switched off, so the test shows what the *server* refuses, and a control run with the Host
check disabled (``allowed_hosts=["*"]``) proves the attack really goes through otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app
from tests.web.helpers import ThreadServer

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

ATTACK = """
<!doctype html><meta charset="utf-8"><title>cute cats</title>
<script>
async function probe(method, path, body) {
  try {
    const init = { method, headers: body ? { "Content-Type": "application/json" } : {} };
    if (body) init.body = JSON.stringify(body);
    const r = await fetch(path, init);
    return { method, path, status: r.status, body: (await r.text()).slice(0, 200) };
  } catch (e) {
    return { method, path, status: 0, body: String(e) };
  }
}
window.attack = async (victimId) => {
  const out = [];
  out.push(await probe("GET", "/api/sessions"));
  out.push(await probe("GET", "/api/sessions/" + victimId));
  out.push(await probe("POST", "/api/sessions", { title: "planted" }));
  out.push(await probe("POST", "/api/chat", { message: "run the tool" }));
  out.push(await probe("DELETE", "/api/sessions/" + victimId));
  out.push(await probe("DELETE", "/api/sessions"));
  out.push(await probe("GET", "/api/openapi.json"));
  out.push(await probe("GET", "/api/info"));
  out.push(await probe("GET", "/"));
  return out;
};
// The classic CSRF variant from the same page: a "simple" cross-origin POST to the loopback
// address itself (no preflight). The browser sends it; the server must refuse to act on it.
window.csrf = async (loopback) => {
  try {
    const r = await fetch(loopback + "/api/sessions", {
      method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: '{"title":"csrf"}' });
    return r.type;
  } catch (e) { return String(e); }
};
</script>
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--host-resolver-rules=MAP attacker.test 127.0.0.1",
        "--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,"
        "PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks",
    ]
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


def _app(tmp_path: Path, ran: list[str], **kwargs: Any) -> Any:
    @tool
    def dangerous(x: str = "") -> str:
        """A tool with side effects."""
        ran.append(x)
        return "done"

    provider = ScriptedProvider([call("dangerous", {"x": "1"}), text("ok")] * 5)
    agent = Agent(name="a", model=provider, tools=[dangerous])
    return create_app(agent, db_path=str(tmp_path / f"w{len(kwargs)}.db"), **kwargs)


def _attack(browser: Any, srv: ThreadServer, victim: str) -> list[dict[str, Any]]:
    context = browser.new_context()
    page = context.new_page()
    evil = f"http://attacker.test:{srv.port}"
    # The attacker's server hands out this page; later requests go to the (rebound) address.
    page.route(f"{evil}/cats.html", lambda route: route.fulfill(status=200, content_type="text/html", body=ATTACK))
    page.goto(f"{evil}/cats.html")
    results: list[dict[str, Any]] = page.evaluate("id => window.attack(id)", victim)
    page.evaluate("url => window.csrf(url)", srv.url)
    context.close()
    return results


def test_control_without_the_host_check_the_rebinding_page_reads_and_runs(browser: Any, tmp_path: Path) -> None:
    ran: list[str] = []
    with ThreadServer(_app(tmp_path, ran, allowed_hosts=["*"])) as srv:
        victim = httpx.post(f"{srv.url}/api/sessions", json={"title": "private chat"}, timeout=10).json()["id"]
        results = _attack(browser, srv, victim)
    by_call = {(r["method"], r["path"]): r for r in results}
    assert (
        by_call[("GET", "/api/sessions")]["status"] == 200
        and "private chat" in by_call[("GET", "/api/sessions")]["body"]
    )
    assert by_call[("POST", "/api/chat")]["status"] == 200 and ran == ["1"]  # the page started a run with a tool


def test_a_rebinding_page_is_refused_everything_and_loopback_still_works(browser: Any, tmp_path: Path) -> None:
    ran: list[str] = []
    with ThreadServer(_app(tmp_path, ran)) as srv:
        victim = httpx.post(f"{srv.url}/api/sessions", json={"title": "private chat"}, timeout=10).json()["id"]
        results = _attack(browser, srv, victim)
        assert len(results) == 9
        for r in results:
            assert r["status"] == 421, r  # every call refused: the server does not answer for attacker.test
            assert "private chat" not in r["body"]

        # Nothing was read, created, deleted or run.
        sessions = httpx.get(f"{srv.url}/api/sessions", timeout=10).json()
        assert [s["title"] for s in sessions] == ["private chat"]
        assert ran == []

        # The same browser on the plain loopback address: the page and the API work as usual.
        context = browser.new_context()
        page = context.new_page()
        page.goto(srv.url + "/")
        page.wait_for_selector("[data-testid=session-item]")
        made = page.evaluate(
            """async () => {
                const r = await fetch("/api/sessions", { method: "POST",
                  headers: { "Content-Type": "application/json" }, body: JSON.stringify({ title: "from the page" }) });
                return [r.status, await r.json()];
            }"""
        )
        assert made[0] == 200 and made[1]["title"] == "from the page"
        listed = page.evaluate("async () => (await (await fetch('/api/sessions')).json()).length")
        assert listed == 2
        context.close()


def test_the_sidebar_shows_a_damaged_chat_and_the_others(browser: Any, tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "side.db"
    agent = Agent(name="a", model=ScriptedProvider([text("x")]))
    with ThreadServer(create_app(agent, db_path=str(db))) as srv:
        ids = [
            httpx.post(f"{srv.url}/api/sessions", json={"title": f"chat {i}"}, timeout=10).json()["id"]
            for i in range(3)
        ]
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE chat_sessions SET updated_at = 'never' WHERE id = ?", (ids[0],))
        context = browser.new_context()
        page = context.new_page()
        page.goto(srv.url + "/")
        page.wait_for_selector(f"[data-session-id='{ids[0]}']")
        names = page.locator("[data-testid=session-item] .name").all_inner_texts()
        damaged = page.locator(f"[data-session-id='{ids[0]}']")
        assert "damaged" in (damaged.get_attribute("class") or "")
        assert "hint:" in (damaged.get_attribute("title") or "")
        context.close()
    assert sorted(names) == sorted(["chat 1", "chat 2", f"⚠ damaged chat {ids[0]}"])
