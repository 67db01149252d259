"""``lovia web init-ui DIR``: start a ``ChatUI(assets=DIR)`` folder.

It writes three files, every line of them commented out, so the scaffold alone changes
nothing: ``index.html`` (each template block), ``theme.css`` (each design token) and
``extension.js`` (the ``window.lovia`` calls, type-checked against ``lovia.d.ts`` when the
editor supports ``// @ts-check``). Existing files are never overwritten.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from ..exceptions import UserError

__all__ = ["FILES", "extension", "init_ui", "main", "page", "theme"]

_BLOCKS = (
    ("head", "end of <head>: meta tags, preloads, an import map (inline scripts need nonce)"),
    ("sidebar_header", "top of the sidebar; replaces the title or logo"),
    ("sidebar_nav", "links under the sidebar's buttons; ?view=<id> links open a view"),
    ("sidebar_footer", "bottom of the sidebar: a user menu, a sign-out link"),
    ("topbar_actions", "the top bar's button group"),
    ("composer_actions", "in the composer, after the message box"),
    ("welcome", "the blank chat; {{ super() }} keeps the default title, description and examples"),
    ("body_end", "after the page's script"),
)

_STYLE = Path(__file__).parent / "static" / "style.css"
_TOKEN = re.compile(r"^\s*(--[\w-]+)\s*:\s*([^;]+);", re.M)


def _tokens() -> tuple[dict[str, str], dict[str, str]]:
    """The design tokens of the bundled ``style.css``: ``(light, dark)``, name -> default value.

    Read from the stylesheet itself (its first ``:root`` block, and its ``[data-theme="dark"]``
    block), so the scaffold never drifts from the page.
    """
    css = _STYLE.read_text(encoding="utf-8")
    light_block = re.search(r"^:root\s*\{(.*?)^\}", css, re.S | re.M)
    dark_block = re.search(r'^\[data-theme="dark"\]\s*\{(.*?)^\}', css, re.S | re.M)
    light = dict(_TOKEN.findall(light_block.group(1))) if light_block else {}
    dark = dict(_TOKEN.findall(dark_block.group(1))) if dark_block else {}
    return light, dark


def page() -> str:
    """The scaffold ``index.html``: extends the bundled page, every block commented out."""
    lines = [
        "{# A ChatUI(assets=...) index.html replaces the page. This one extends the bundled page;",
        "   uncomment a block to fill it. {{ url_for('ui-assets', path='x.png').path }} is the URL",
        '   of a file in this folder (path prefix included). Text with data-i18n="acme.key" takes',
        "   ChatUI(messages={lang: {'acme.key': ...}}). #}",
        '{% extends "lovia/index.html" %}',
        "",
    ]
    for name, where in _BLOCKS:
        lines += [f"{{# {name}: {where}", f"{{% block {name} %}}{{{{ super() }}}}{{% endblock %}}", "#}", ""]
    return "\n".join(lines)


def theme() -> str:
    """The scaffold ``theme.css``: each design token with its light and dark default, commented out."""
    light, dark = _tokens()
    light_lines = "\n".join(f"  /* {name}: {value.strip()}; */" for name, value in light.items())
    dark_lines = "\n".join(f"  /* {name}: {value.strip()}; */" for name, value in dark.items())
    return (
        "/* Your stylesheet: list it in ChatUI(styles=['theme.css']). The bundled styles sit in the\n"
        "   cascade layer `lovia`, so a rule here wins over them without !important.\n"
        '   Target a region with its data-part: [data-part="language"] { display: none; }\n'
        "   Each theme has its own values; a token set on :root applies to both. --accent-hover,\n"
        "   --accent-soft and --accent-text follow --accent. */\n\n"
        f'[data-theme="light"] {{\n{light_lines}\n}}\n\n[data-theme="dark"] {{\n{dark_lines}\n}}\n'
    )


def extension() -> str:
    """The scaffold ``extension.js``: the ``window.lovia`` surface, every call commented out."""
    return """// @ts-check
// An extension script: list it in ChatUI(scripts=['extension.js']). The page imports it before
// it starts; reach the page only through window.lovia (see docs/web.md). For completion, point
// a reference at lovia/web/static/lovia.d.ts in your site-packages:
// /// <reference path=".../site-packages/lovia/web/static/lovia.d.ts" />

// const { lovia } = window;

// Events: session, agent, run-start, run-end, theme, view.
// lovia.on('run-end', ({ status, usage }) => console.info('run ended', status, usage));

// A one-line summary and a body of your own for a tool's cards.
// lovia.registerToolView('order_status', {
//   summary: (tool) => (tool.status === 'done' ? 'Looked up an order' : 'Looking up an order…'),
//   render(el, tool) {
//     if (tool.status !== 'done') return;
//     const p = document.createElement('p');
//     p.textContent = tool.result ?? ''; // textContent: tool output is untrusted
//     el.replaceChildren(p);
//   },
// });

// A button on messages, beside copy.
// lovia.registerMessageAction('quote', {
//   label: 'Quote',
//   icon: 'quote',
//   when: (msg) => msg.role === 'assistant',
//   run: (msg) => lovia.setDraft('> ' + msg.text),
// });

// A page of your own in place of the chat; link to it with <a href="?view=dashboard">.
// lovia.registerView('dashboard', {
//   title: 'Dashboard',
//   async render(el, ctx) {
//     const res = await lovia.fetch('/acme/stats');
//     el.textContent = JSON.stringify(await res.json());
//   },
// });
"""


FILES: dict[str, Callable[[], str]] = {"index.html": page, "theme.css": theme, "extension.js": extension}
"""The files :func:`init_ui` writes, by name."""


def init_ui(directory: Path) -> list[Path]:
    """Write the scaffold files into ``directory`` (created if missing); returns the files written.

    A file already there is kept as it is (and not listed).

    Raises:
        UserError: ``directory`` exists and is not a directory.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"{directory} exists and is not a directory", hint="pick another path for the UI folder")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in FILES.items():
        target = directory / name
        if target.exists():
            continue
        target.write_text(make(), encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str], *, prog: str) -> int:
    """The ``init-ui`` command: ``prog DIR``; prints what it wrote and the ``ChatUI`` to use."""
    parser = argparse.ArgumentParser(prog=prog, description="Start a folder for ChatUI(assets=...).")
    parser.add_argument("directory", help="the folder to create or fill, e.g. ui")
    args = parser.parse_args(argv)
    try:
        written = init_ui(Path(args.directory))
    except UserError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    kept = [name for name in FILES if Path(args.directory, name) not in written]
    for name in kept:
        print(f"kept {Path(args.directory, name)} (already there)")
    print(
        f"use it with: ChatUI(assets={args.directory!r}, styles=['theme.css'], scripts=['extension.js'])",
    )
    return 0
