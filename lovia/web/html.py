"""``show_html``: the model writes a self-contained page and the chat runs it in a sandboxed frame.

The page gets no network, no storage and no access to the chat (see ``static/pages.js``); this
module only checks what the model wrote, with errors it can act on.
"""

from __future__ import annotations

from typing import Annotated

from ..exceptions import ToolError
from ..tools import tool
from .components import ui_result

__all__ = ["MAX_HTML_BYTES", "show_html"]

MAX_HTML_BYTES = 128 * 1024


def validate_html(html: object, title: object = None) -> None:
    """Raise a :class:`ToolError` unless ``html`` (and ``title``) make a page the chat can show."""
    if not isinstance(html, str):
        raise ToolError(
            f"html must be a string, not {type(html).__name__}",
            hint="pass the whole page as one string: <!doctype html><html>...</html>",
        )
    if not html.strip():
        raise ToolError("the page is empty", hint="write a complete page with inline <style> and <script>")
    size = len(html.encode("utf-8", "surrogatepass"))
    if size > MAX_HTML_BYTES:
        raise ToolError(
            f"the page is {size} bytes, over the {MAX_HTML_BYTES}-byte limit",
            hint="make it smaller: compute data in a script instead of writing it out, drop unused CSS",
        )
    if title is not None and not isinstance(title, str):
        raise ToolError("title must be a string", hint='e.g. "title": "Loan calculator"')


@tool(name="show_html")
def show_html(
    html: Annotated[str, "A complete, self-contained HTML page: inline CSS and JS only."],
    title: Annotated[str | None, "A short heading for the page."] = None,
) -> str:
    """Show the user an interactive page (a calculator, a simulation, a custom visualisation).

    The page runs sandboxed: no network (no fetch, CDN scripts, web fonts or remote images), no
    cookies or storage. Style it with the chat's colours: var(--ink), var(--surface),
    var(--border), var(--accent), var(--chart-1) ... var(--chart-8). A button can ask a
    follow-up as the user with lovia.send("text") (works only from a click).
    """
    validate_html(html, title)
    return ui_result("html", from_args=True)
