"""show_html pages and put_ui_data bulk tables in the page, driven in headless Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry
from lovia.web import create_app, put_ui_data, show_html, ui_result

from .helpers import ThreadServer, last_user
from .test_browser import CHROMIUM, IMG, idle, send

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing"),
]

PROBE_PATH = "/probe-from-page"
REQUESTS: list[str] = []  # every path the server was asked for
SEEN: list[str] = []  # every tool output the model read

PROBE = """<!doctype html>
<html><head><title>probe</title><style>#ask { color: var(--accent); }</style></head>
<body>
<h1 id="h">Probe</h1>
<button id="ask" onclick="put('sent', String(lovia.send('Break it down by region')))">Ask</button>
<button id="fake" onclick="put('faked', String(lovia.send('from a scripted click')))">Fake</button>
<a id="away" href="https://example.com/">elsewhere</a>
<p>sent <span id="sent">-</span> auto <span id="auto">-</span> faked <span id="faked">-</span></p>
<p>net <span id="net">pending</span> abs <span id="abs">pending</span> cookie <span id="cookie">-</span>
storage <span id="storage">-</span> parent <span id="parent">-</span> ink <span id="ink"></span>
rtc <span id="rtc">-</span></p>
<script>
  const put = (id, v) => { document.getElementById(id).textContent = v; };
  put('auto', String(lovia.send('sent without a click')));
  setTimeout(() => document.getElementById('fake').click(), 200);
  try { put('cookie', 'readable:' + document.cookie); } catch (e) { put('cookie', 'blocked:' + e.name); }
  try { put('storage', 'readable:' + localStorage.length); } catch (e) { put('storage', 'blocked:' + e.name); }
  try { put('parent', 'readable:' + parent.document.title); } catch (e) { put('parent', 'blocked:' + e.name); }
  fetch('PROBE').then(() => put('net', 'reached'), (e) => put('net', 'blocked:' + e.name));
  fetch('ORIGINPROBE').then(() => put('abs', 'reached'), (e) => put('abs', 'blocked:' + e.name));
  put('rtc', typeof RTCPeerConnection + '/' + typeof webkitRTCPeerConnection);
  put('ink', getComputedStyle(document.documentElement).getPropertyValue('--ink').trim());
</script>
</body></html>"""

TALL = "<!doctype html><html><body><div style='height:2000px;background:var(--chart-1)'>tall</div></body></html>"

DEMO = """<!doctype html>
<html><head><style>
  body { font-family: system-ui, sans-serif; }
  .row { display: flex; gap: 12px; align-items: center; margin: 6px 0; }
  input { width: 220px; accent-color: var(--accent); }
  .out { font-size: 26px; font-weight: 600; color: var(--accent); }
  .bars { display: flex; gap: 4px; align-items: flex-end; height: 90px; margin-top: 10px;
          border-bottom: 1px solid var(--border); }
  .bars div { flex: 1; border-radius: 3px 3px 0 0; }
  button { border: 1px solid var(--border); background: var(--surface); color: var(--ink);
           padding: 5px 12px; border-radius: 6px; cursor: pointer; }
</style></head><body>
  <div class="row"><label>Loan
    <input id="amount" type="range" min="50000" max="500000" step="10000" value="250000"></label>
    <span id="amountText"></span></div>
  <div class="row"><label>Rate <input id="rate" type="range" min="1" max="8" step="0.1" value="4.2"></label>
    <span id="rateText"></span></div>
  <div class="row">Monthly payment over 25 years: <span class="out" id="pay"></span></div>
  <div class="bars" id="bars"></div>
  <p><button onclick="lovia.send('Compare 15 and 30 years at this rate')">Compare terms</button></p>
<script>
  const $ = (id) => document.getElementById(id);
  function draw() {
    const p = +$('amount').value, r = +$('rate').value / 1200, n = 300;
    const m = p * r / (1 - Math.pow(1 + r, -n));
    $('amountText').textContent = p.toLocaleString('en-US');
    $('rateText').textContent = $('rate').value + ' %';
    $('pay').textContent = m.toFixed(0);
    $('bars').replaceChildren(...Array.from({ length: 25 }, (_, y) => {
      const d = document.createElement('div');
      let left = p; for (let i = 0; i < 12 * y; i++) left = left * (1 + r) - m;
      d.style.height = (left / p * 100) + '%';
      d.style.background = 'var(--chart-' + (1 + (y % 8)) + ')';
      return d;
    }));
  }
  $('amount').oninput = $('rate').oninput = draw;
  draw();
</script></body></html>"""

RELOADER = "<!doctype html><html><body><button id='again' onclick='location.reload()'>again</button></body></html>"

BULK_ROWS = 10_000


@tool
async def big_table() -> str:
    """10,000 rows for the page, 20 for the model."""
    rows = [[f"sku-{i:05d}", i * 3 % 997, i % 7 == 0] for i in range(BULK_ROWS)]
    ref = await put_ui_data({"title": "All SKUs", "columns": ["sku", "units", "flag"], "rows": rows})
    preview = {
        "title": "All SKUs (preview)",
        "columns": ["sku", "units", "flag"],
        "rows": rows[:20],
        "row_count": BULK_ROWS,
    }
    return ui_result("table", preview, data=ref)


@tool
async def lost_table() -> str:
    """A table whose stored data is not there (a ref that was never stored)."""
    return ui_result("table", {"title": "Preview only", "columns": ["a"], "rows": [["kept"]]}, data="ud_missing")


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said, results = last_user(entries)
    if results:
        last = entries[-1]
        if isinstance(last, ToolResultEntry):
            SEEN.append(last.output)
        return text("Shown.")
    word = said.split()[0]
    if word == "page":
        return call("show_html", {"html": PAGE_HTML[0], "title": "Probe"})
    if word == "tall":
        return call("show_html", {"html": TALL, "title": "Tall"})
    if word == "demo":
        return call("show_html", {"html": DEMO, "title": "Mortgage explorer"})
    if word == "reloader":
        return call("show_html", {"html": RELOADER, "title": "Reloader"})
    if word == "bulk":
        return call("big_table", {})
    if word == "lost":
        return call("lost_table", {})
    return text(f"You asked: {said}")


PAGE_HTML = [PROBE]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    agent = Agent(name="pages", model=ScriptedProvider(script), tools=[show_html, big_table, lost_table])
    app = create_app(agent, db_path=str(tmp_path_factory.mktemp("pages") / "web.db"))

    @app.middleware("http")
    async def record(request: Any, call_next: Any) -> Any:
        REQUESTS.append(request.url.path)
        return await call_next(request)

    with ThreadServer(app) as srv:
        PAGE_HTML[0] = PROBE.replace("ORIGINPROBE", srv.url + PROBE_PATH).replace("PROBE", PROBE_PATH)
        yield srv


@pytest.fixture
def page(browser: Any, site: ThreadServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(20_000)
    pg.goto(site.url)
    pg.get_by_test_id("composer").wait_for()
    yield pg
    context.close()
    assert errors == [], errors


def frame(page: Any) -> Any:
    return page.frame_locator("[data-testid=page-frame]")


def test_page_runs_sandboxed_without_network_cookies_or_parent(page: Any, site: ThreadServer) -> None:
    send(page, "page")
    idle(page)
    iframe = page.get_by_test_id("page-frame")
    assert iframe.get_attribute("sandbox") == "allow-scripts"
    inner = frame(page)
    inner.locator("#h").wait_for()
    inner.locator("#net", has_text="blocked").wait_for()
    inner.locator("#abs", has_text="blocked").wait_for()
    assert inner.locator("#net").inner_text() == "blocked:TypeError"
    assert inner.locator("#cookie").inner_text() == "blocked:SecurityError"
    assert inner.locator("#storage").inner_text() == "blocked:SecurityError"
    assert inner.locator("#parent").inner_text() == "blocked:SecurityError"
    assert inner.locator("#rtc").inner_text() == "undefined/undefined"  # WebRTC: out of CSP's reach, so removed
    assert (
        "/static/pages-frame.html" in REQUESTS and PROBE_PATH not in REQUESTS
    )  # the server saw the frame, not its requests
    # The chat's colours are the page's CSS variables.
    ink = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--text').trim()")
    assert ink and inner.locator("#ink").inner_text() == ink
    # The card grew with the page (more than the initial 60 px).
    assert page.evaluate("document.querySelector('[data-testid=page-frame]').getBoundingClientRect().height") > 150
    # A link does not navigate: the same document is still there and the card shows no warning.
    inner.locator("#away").click()
    page.wait_for_timeout(500)
    assert inner.locator("#h").inner_text() == "Probe"
    assert page.get_by_test_id("page-hold").count() == 0


def test_lovia_send_needs_a_real_click(page: Any) -> None:
    send(page, "page")
    idle(page)
    inner = frame(page)
    # On load, right after the user pressed Send in the composer: refused.
    inner.locator("#auto", has_text="false").wait_for()
    # A scripted click on a button (not trusted): refused too.
    inner.locator("#faked", has_text="false").wait_for()
    assert page.get_by_test_id("message-user").count() == 1
    inner.locator("#ask").click()
    page.get_by_test_id("message-user").nth(1).wait_for()
    idle(page)
    users = page.get_by_test_id("message-user").locator(".body").all_inner_texts()
    assert users == ["page", "Break it down by region"]
    assert "You asked: Break it down by region" in page.get_by_test_id("message-assistant").last.inner_text()
    page.wait_for_timeout(500)  # nothing else arrives: the refused sends stayed refused
    assert page.get_by_test_id("message-user").count() == 2


def test_tall_page_is_capped_and_reopened_chat_waits_for_run(page: Any) -> None:
    send(page, "tall")
    idle(page)
    frame(page).locator("div").wait_for()
    cap = int(760 * 0.8)
    page.wait_for_function(
        f"() => document.querySelector('[data-testid=page-frame]').getBoundingClientRect().height === {cap}"
    )
    page.reload()
    hold = page.get_by_test_id("page-hold")
    hold.wait_for()
    assert page.get_by_test_id("page-frame").count() == 0  # nothing runs before the click
    page.get_by_test_id("page-run").click()
    frame(page).locator("div", has_text="tall").wait_for()
    assert page.get_by_test_id("page-hold").count() == 0


def test_download_and_full_screen(page: Any) -> None:
    send(page, "demo")
    idle(page)
    frame(page).locator("#pay").wait_for()
    with page.expect_download() as info:
        page.get_by_test_id("page-download").click()
    download = info.value
    assert download.suggested_filename == "mortgage-explorer.html"
    assert Path(download.path()).read_text() == DEMO
    page.screenshot(path=str(IMG / "web-page.png"))
    page.get_by_test_id("page-fullscreen").click()
    page.wait_for_function("() => document.fullscreenElement?.classList.contains('page-view')")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=page-frame]').getBoundingClientRect().height > 600"
    )


def test_bulk_table_shows_every_row_while_the_model_saw_a_preview(page: Any) -> None:
    SEEN.clear()
    send(page, "bulk")
    idle(page)
    assert page.get_by_test_id("ui-table-page").inner_text() == f"Page 1 of 500 · {BULK_ROWS} rows"
    assert page.locator(".tool-view .view-title").inner_text() == "All SKUs"  # the full props, not the preview
    table = page.get_by_test_id("ui-table")
    assert table.locator("tbody tr").count() == 20
    page.get_by_test_id("ui-table-header").nth(0).click()
    page.get_by_test_id("ui-table-header").nth(0).click()  # descending: the last row first
    assert table.locator("tbody tr").first.locator("td").first.inner_text() == f"sku-{BULK_ROWS - 1:05d}"
    assert len(SEEN) == 1 and '"row_count": 10000' in SEEN[0] and "sku-09999" not in SEEN[0]
    page.reload()
    page.get_by_test_id("ui-table-page").wait_for()
    assert page.get_by_test_id("ui-table-page").inner_text() == f"Page 1 of 500 · {BULK_ROWS} rows"


def test_missing_data_shows_a_notice_then_the_preview(page: Any) -> None:
    send(page, "lost")
    idle(page)
    page.get_by_test_id("ui-data-missing").wait_for()
    assert "no longer stored" in page.get_by_test_id("ui-data-missing").inner_text()
    assert page.get_by_test_id("ui-table").locator("td").inner_text() == "kept"


def test_a_theme_switch_runs_the_page_again_with_the_new_colours(page: Any) -> None:
    page.emulate_media(color_scheme="light")
    send(page, "page")
    idle(page)
    inner = frame(page)
    inner.locator("#ink", has_text="#").wait_for()
    light = inner.locator("#ink").inner_text()
    assert light == page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--text').trim()")
    page.emulate_media(color_scheme="dark")
    # The page follows the system through <html data-theme>, set by its media-query listener.
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    dark = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--text').trim()")
    assert dark and dark != light
    inner.locator("#ink", has_text=dark).wait_for()
    scheme = "getComputedStyle(document.documentElement).colorScheme"
    frame_handle = next(f for f in page.frames if "pages-frame" in f.url)
    assert frame_handle.evaluate(scheme) == "dark"


def test_a_page_that_loads_another_document_is_stopped(page: Any) -> None:
    send(page, "reloader")
    idle(page)
    frame(page).locator("#again").click()
    hold = page.get_by_test_id("page-hold")
    hold.wait_for()
    assert "tried to load another document" in hold.inner_text()
    assert page.get_by_test_id("page-frame").count() == 0
    page.get_by_test_id("page-run").click()  # it can be started again, fresh
    frame(page).locator("#again").wait_for()
