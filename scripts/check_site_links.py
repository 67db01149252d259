"""Check every internal link and asset of a built docs site (``mkdocs build`` output).

Usage: ``python scripts/check_site_links.py [SITE_DIR]`` (default ``site``). Each ``href``/``src``
that points inside the site must name a file that exists, and a ``#fragment`` must name an element
id on that page. External links are listed by count, not fetched (CI has no network). Exit 1 on
any broken link, with one line per link.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)
            elif name in ("href", "src"):
                self.links.append(value)


def _parse(path: Path, cache: dict[Path, _Page]) -> _Page:
    if path not in cache:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def _target(site: Path, page: Path, link: str) -> tuple[Path, str] | None:
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
        return None
    base = site if parts.path.startswith("/") else page.parent
    path = (base / unquote(parts.path.lstrip("/"))).resolve() if parts.path else page
    if path.is_dir() or (parts.path.endswith("/")):
        path = path / "index.html"
    return path, unquote(parts.fragment)


def check(site: Path) -> list[str]:
    site = site.resolve()
    cache: dict[Path, _Page] = {}
    broken: list[str] = []
    for page in sorted(site.rglob("*.html")):
        for link in _parse(page, cache).links:
            found = _target(site, page, link)
            if found is None:
                continue
            path, fragment = found
            where = page.relative_to(site)
            if not path.is_relative_to(site) or not path.is_file():
                broken.append(f"{where}: {link} -> missing file")
            elif fragment and path.suffix == ".html" and fragment not in _parse(path, cache).ids:
                broken.append(f"{where}: {link} -> no element with id {fragment!r}")
    return broken


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site")
    if not (site / "index.html").is_file():
        print(f"{site}/index.html not found: build the site first (mkdocs build)", file=sys.stderr)
        return 2
    broken = check(site)
    pages = sum(1 for _ in site.rglob("*.html"))
    for line in broken:
        print(line)
    print(f"{pages} pages checked, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
