"""Charts, tables and tool images in the page, driven in headless Chromium."""

from __future__ import annotations

import base64
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, tool
from lovia.parts import ImagePart
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import TranscriptEntry
from lovia.web import create_app, show_chart, show_table

from .helpers import ThreadServer, last_user
from .test_browser import CHROMIUM, IMG, idle, send

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing"),
]

_spec = importlib.util.spec_from_file_location(
    "web_charts_example", Path(__file__).parents[2] / "examples" / "web_charts.py"
)
assert _spec and _spec.loader
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
ROWS = [[f"item {i:02d}", (i * 37) % 50, i % 2 == 0] for i in range(45)]


@tool(returns_images=True)
def swatch() -> ImagePart:
    """A red square."""
    return ImagePart(data=base64.b64encode(example.square_png(24)).decode(), mime_type="image/png")


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said, results = last_user(entries)
    if results:
        return text("Shown.")
    word = said.split()[0]
    if word == "chart":
        return call("show_chart", {"option": example.SALES})
    if word == "table":
        return call("show_table", {"columns": ["name", "score", "even"], "rows": ROWS, "title": "Scores"})
    if word == "image":
        return call("swatch", {})
    if word == "hostile":
        option = {
            "title": {"text": HOSTILE},
            "xAxis": {"type": "category", "data": [HOSTILE]},
            "yAxis": {},
            "tooltip": {"formatter": HOSTILE},
            "series": [{"type": "bar", "data": [3], "name": HOSTILE}],
        }
        table = {"columns": [HOSTILE], "rows": [[HOSTILE]], "title": HOSTILE}
        return batch(("show_chart", {"option": option}, "c1"), ("show_table", table, "c2"))
    return text("?")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    agent = Agent(name="charts", model=ScriptedProvider(script), tools=[show_chart, show_table, swatch])
    app = create_app(agent, db_path=str(tmp_path_factory.mktemp("charts") / "web.db"))
    with ThreadServer(app) as srv:
        yield srv


@pytest.fixture
def page(browser: Any, site: ThreadServer) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    pg = context.new_page()
    errors: list[str] = []
    dialogs: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.set_default_timeout(15_000)
    pg.goto(site.url)
    pg.get_by_test_id("composer").wait_for()
    yield pg
    context.close()
    assert errors == [], errors
    assert dialogs == [], dialogs


CANVAS_INKED = """(el) => {
  const c = el.querySelector('canvas');
  if (!c || !c.width) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
}"""


def test_chart_draws_pixels_and_takes_its_title(page: Any) -> None:
    send(page, "chart")
    idle(page)
    view = page.get_by_test_id("tool-view")
    chart = view.get_by_test_id("chart")
    chart.locator("canvas").wait_for()
    page.wait_for_function(f"() => ({CANVAS_INKED})(document.querySelector('[data-testid=chart]')) > 500")
    assert view.locator(".view-title").inner_text() == "Units sold"
    page.screenshot(path=str(IMG / "web-chart.png"))


def test_table_sorts_on_header_click_and_pages(page: Any) -> None:
    send(page, "table")
    idle(page)
    table = page.get_by_test_id("ui-table")
    first = lambda: table.locator("tbody tr").first.locator("td").all_inner_texts()  # noqa: E731
    assert table.locator("tbody tr").count() == 20
    assert first() == ["item 00", "0", "true"]
    assert page.get_by_test_id("ui-table-page").inner_text() == "Page 1 of 3 · 45 rows"
    score = table.get_by_test_id("ui-table-header").nth(1)
    score.click()
    scores = [int(s) for s in table.locator("tbody td:nth-child(2)").all_inner_texts()]
    assert scores == sorted(scores) and scores[0] == 0
    score.click()
    assert int(table.locator("tbody td:nth-child(2)").first.inner_text()) == max(r[1] for r in ROWS)
    page.get_by_test_id("ui-table-next").click()
    page.get_by_test_id("ui-table-next").click()
    assert table.locator("tbody tr").count() == 5
    assert page.get_by_test_id("ui-table-next").is_disabled()
    score.click()  # third click: the original order again, back on page 1
    assert first() == ["item 00", "0", "true"]
    page.screenshot(path=str(IMG / "web-table.png"))


def test_tool_image_is_shown_live_and_after_reload(page: Any) -> None:
    send(page, "image")
    idle(page)
    img = page.get_by_test_id("tool-image")
    page.wait_for_function("() => document.querySelector('[data-testid=tool-image]')?.naturalWidth === 24")
    assert img.get_attribute("src", timeout=1000).startswith("data:image/png;base64,")
    page.reload()
    page.wait_for_function("() => document.querySelector('[data-testid=tool-image]')?.naturalWidth === 24")


def test_hostile_labels_stay_text(page: Any) -> None:
    send(page, "hostile")
    idle(page)
    page.get_by_test_id("ui-table").wait_for()
    page.get_by_test_id("chart").locator("canvas").wait_for()
    page.get_by_test_id("chart").hover()
    page.wait_for_timeout(300)
    titles = page.locator(".tool-view .view-title").all_inner_texts()
    assert titles == [HOSTILE, HOSTILE]
    assert page.get_by_test_id("ui-table").locator("td").inner_text() == HOSTILE
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".tool-view img, .tool-view script").count() == 0
