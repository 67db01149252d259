"""The page's Markdown renderer (vendored marked + DOMPurify + highlight.js), run in real Chromium.

Each case is everyday model output that the old hand-written renderer broke, or a hostile input
that must come out as inert text. The frame table of the page is checked against the server's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia.web.sse import FRAME_NAMES

from .helpers import ThreadServer
from .test_browser import ARGS, CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

STATIC = Path(__file__).resolve().parents[2] / "lovia" / "web" / "static"


@pytest.fixture(scope="module")
def md_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One page with the renderer loaded; ``render(source)`` returns the produced HTML."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from lovia.web import create_app

    from .helpers import scripted_agent

    db = str(tmp_path_factory.mktemp("md") / "web.db")
    with ThreadServer(create_app(scripted_agent(), db_path=db)) as srv, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(srv.url)
        page.evaluate("async () => { window.__md = await import('/static/markdown.js'); }")
        yield page
        browser.close()
        assert errors == [], errors


def render(page: Any, source: str) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """(src) => {
                const box = document.createElement('div');
                box.innerHTML = window.__md.renderMarkdown(src);
                window.__md.enhance(box);
                document.body.append(box);
                const out = { html: box.innerHTML, text: box.textContent };
                box.remove();
                return out;
            }""",
            source,
        )
    )


def test_nested_lists_keep_their_nesting(md_page: Any) -> None:
    html = render(md_page, "- one\n  - one.a\n    - one.a.i\n- two")["html"]
    assert re.search(r"<ul>\s*<li>one\s*<ul>\s*<li>one\.a\s*<ul>\s*<li>one\.a\.i</li>", html), html


def test_ordered_lists_keep_their_start_number(md_page: Any) -> None:
    html = render(md_page, "3. three\n4. four")["html"]
    assert '<ol start="3">' in html, html


def test_task_lists_are_checkboxes(md_page: Any) -> None:
    html = render(md_page, "- [x] done\n- [ ] todo")["html"]
    assert html.count('type="checkbox"') == 2 and html.count("checked") == 1, html
    assert "[x]" not in html and "disabled" in html


def test_nested_emphasis(md_page: Any) -> None:
    html = render(md_page, "**bold *italic***")["html"]
    assert "<strong>bold <em>italic</em></strong>" in html, html
    assert "*" not in render(md_page, "**bold *italic***")["text"]


def test_backtick_spans_with_inner_backticks(md_page: Any) -> None:
    html = render(md_page, "use ``a `b` c`` here")["html"]
    assert "<code>a `b` c</code>" in html, html


def test_a_fence_inside_a_list_item_stays_in_the_list(md_page: Any) -> None:
    html = render(md_page, "1. install:\n\n   ```sh\n   pip install lovia\n   ```\n\n2. run it")["html"]
    assert re.search(r"<ol>\s*<li>.*<pre.*pip install lovia.*</pre>.*</li>\s*<li>.*run it", html, re.S), html
    assert html.count("<ol") == 1


def test_code_is_highlighted_and_has_a_copy_button(md_page: Any) -> None:
    html = render(md_page, "```python\ndef f(x):\n    return 'hi'\n```")["html"]
    assert 'class="hljs-keyword"' in html and "hljs-string" in html, html
    assert 'data-testid="copy-code"' in html


def test_tables_and_strikethrough(md_page: Any) -> None:
    html = render(md_page, "| a | b |\n|---|:-:|\n| 1 | ~~2~~ |")["html"]
    assert "<table>" in html and "<del>2</del>" in html and 'align="center"' in html, html


HOSTILE = [
    "<script>window.__pwned='a'</script>",
    "<img src=x onerror=\"window.__pwned='b'\">",
    "[x](javascript:window.__pwned='c')",
    "[x](JaVaScRiPt:window.__pwned='d')",
    "[x](data:text/html,<script>window.__pwned='e'</script>)",
    "<a href=\"javascript:window.__pwned='f'\">x</a>",
    "```html\n<img src=x onerror=\"window.__pwned='g'\">\n```",
    "- [ ] <svg onload=window.__pwned='h'>",
    "<details open ontoggle=\"window.__pwned='i'\">x</details>",
    '[ok](https://example.com "t\\" onmouseover=window.__pwned=\'j\'")',
]


def elements(page: Any, source: str) -> list[dict[str, Any]]:
    """Tag, attributes and href of every element the renderer produced."""
    return list(
        page.evaluate(
            """(src) => {
                const box = document.createElement('div');
                box.innerHTML = window.__md.renderMarkdown(src);
                window.__md.enhance(box);
                return [...box.querySelectorAll('*')].map((n) => ({
                    tag: n.tagName.toLowerCase(),
                    attrs: [...n.attributes].map((a) => a.name),
                    href: n.getAttribute('href'),
                }));
            }""",
            source,
        )
    )


def test_hostile_markdown_and_html_never_run(md_page: Any) -> None:
    produced = [elements(md_page, source) for source in HOSTILE]
    md_page.wait_for_timeout(150)
    assert md_page.evaluate("window.__pwned ?? null") is None
    for source, nodes in zip(HOSTILE, produced, strict=True):
        assert not {n["tag"] for n in nodes} & {"script", "img", "svg", "details", "iframe", "style"}, (source, nodes)
        assert not [a for n in nodes for a in n["attrs"] if a.startswith("on")], (source, nodes)
        for n in nodes:
            assert n["href"] is None or n["href"].startswith("https://"), (source, n)
    assert render(md_page, HOSTILE[0])["text"] == HOSTILE[0]  # raw HTML is shown as text, verbatim


def test_frame_names_are_defined_once_and_the_page_handles_each(md_page: Any) -> None:
    names = md_page.evaluate("async () => (await import('/static/frames.js')).FRAMES")
    assert tuple(names) == FRAME_NAMES
    app = (STATIC / "app.js").read_text(encoding="utf-8")
    handlers = re.search(r"const HANDLERS = \{(.*?)\n\};", app, re.S)
    assert handlers is not None
    handled = set(re.findall(r"^  (\w+): ", handlers.group(1), re.M))
    assert handled == set(FRAME_NAMES)


def test_no_page_asset_comes_from_another_origin() -> None:
    for path in STATIC.rglob("*"):
        if path.suffix in {".html", ".css"} or path.name in {"app.js", "api.js", "render.js", "markdown.js"}:
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"(src|href)=[\"']https?://", text), path
    vendored = (STATIC / "vendor" / "VENDORED.md").read_text(encoding="utf-8")
    for name in ("marked.esm.js", "purify.es.js", "highlight.min.js"):
        assert (STATIC / "vendor" / name).exists() and name in vendored
    for lic in ("LICENSE.marked.txt", "LICENSE.dompurify.txt", "LICENSE.highlightjs.txt"):
        assert (STATIC / "vendor" / lic).stat().st_size > 500
