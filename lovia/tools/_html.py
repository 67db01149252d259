"""Internal: HTML to Markdown with the standard library's parser (structure, links and images kept)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

_SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe", "canvas", "form", "button", "select"}
_BLOCK = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "figure", "figcaption",
          "table", "tr", "ul", "ol", "dl", "dt", "dd", "blockquote", "pre", "hr", "address", "details",
          "summary"}  # fmt: skip
_INLINE = {"strong": "**", "b": "**", "em": "*", "i": "*"}
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_NESTED_ITEM = re.compile(r"^ +(?:- |\d+\. )")
_VOID = {"br", "img", "hr", "meta", "link", "input", "source", "area", "base", "col", "embed", "wbr"}


def _usable(url: str) -> bool:
    low = url.strip().lower()
    return bool(low) and not low.startswith(("data:", "javascript:", "#", "about:", "blob:"))


def largest_srcset(srcset: str) -> str | None:
    """The biggest candidate of a ``srcset`` (by width or density descriptor)."""
    best: tuple[float, str] | None = None
    for part in srcset.split(","):
        bits = part.strip().split()
        if not bits:
            continue
        size = 1.0
        if len(bits) > 1:
            try:
                size = float(bits[1].rstrip("wx"))
            except ValueError:
                size = 1.0
        if best is None or size > best[0]:
            best = (size, bits[0])
    return best[1] if best else None


class _Converter(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base_url
        self.out: list[str] = []
        self.skip = 0
        self.pre = 0
        self.lists: list[list[int]] = []  # per open list: [is_ordered, counter]
        self.href: list[str | None] = []
        self.link_text: list[list[str]] = []
        self.title: str | None = None
        self.in_title = False
        self.images: list[tuple[str, str]] = []
        self.cell = 0

    # -- helpers
    def _url(self, value: str | None) -> str | None:
        if not value or not _usable(value):
            return None
        return urljoin(self.base, value.strip())

    def _emit(self, text: str) -> None:
        if self.link_text:
            self.link_text[-1].append(text)
        else:
            self.out.append(text)

    def _block(self) -> None:
        self._emit("\n\n")

    def _image(self, src: str | None, alt: str) -> None:
        url = self._url(src)
        if url:
            self.images.append((url, alt))

    # -- parser callbacks
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        self._head_tag(tag, a)
        if tag == "title":
            self.in_title = True
        elif tag in _SKIP:
            if tag not in _VOID:
                self.skip += 1
        elif not self.skip:
            self._open(tag, a)

    def _head_tag(self, tag: str, a: dict[str, str]) -> None:
        """Tags that matter wherever they are (even inside skipped ``<head>``): base URL and images."""
        if tag == "base" and a.get("href"):
            self.base = urljoin(self.base, a["href"])
        elif tag == "meta" and a.get("property", a.get("name", "")).lower() in ("og:image", "og:image:url"):
            self._image(a.get("content"), "og:image")
        elif tag == "source" and a.get("srcset"):
            self._image(largest_srcset(a["srcset"]), "")

    def _open(self, tag: str, a: dict[str, str]) -> None:
        marker = self._inline_marker(tag)
        if tag in _HEADINGS:
            self._block()
            self._emit("#" * int(tag[1]) + " ")
        elif tag in _BLOCK:
            self._open_block(tag)
        elif tag == "li":
            self._open_item()
        elif tag == "br":
            self._emit("\n")
        elif marker is not None:
            self._emit(marker)
        elif tag in ("td", "th"):
            self._emit(" | " if self.cell else "| ")
            self.cell += 1
        elif tag == "a":
            self.href.append(self._url(a.get("href")))
            self.link_text.append([])
        elif tag == "img":
            self._open_img(a)

    def _open_block(self, tag: str) -> None:
        self._block()
        if tag == "pre":
            self.pre += 1
            self._emit("```\n")
        elif tag == "blockquote":
            self._emit("> ")
        elif tag in ("ul", "ol"):
            self.lists.append([tag == "ol", 0])
        elif tag == "hr":
            self._emit("---")

    def _open_item(self) -> None:
        self._emit("\n" + "  " * max(len(self.lists) - 1, 0))
        if self.lists and self.lists[-1][0]:
            self.lists[-1][1] += 1
            self._emit(f"{self.lists[-1][1]}. ")
        else:
            self._emit("- ")

    def _open_img(self, a: dict[str, str]) -> None:
        src = a.get("src") or ""
        best = largest_srcset(a["srcset"]) if a.get("srcset") else None
        self._image(best or src, a.get("alt", ""))
        url = self._url(src or best)
        if url:
            self._emit(f"![{a.get('alt', '').strip()}]({url})")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _SKIP:
            self.skip = max(self.skip - 1, 0)
        elif not self.skip:
            self._close(tag)

    def _inline_marker(self, tag: str) -> str | None:
        if tag == "code":
            return None if self.pre else "`"
        return _INLINE.get(tag)

    def _close(self, tag: str) -> None:
        marker = self._inline_marker(tag)
        if marker is not None:
            self._emit(marker)
        elif tag == "a" and self.link_text:
            text = "".join(self.link_text.pop()).strip()
            href = self.href.pop()
            self._emit(f"[{text}]({href})" if href and text else text)
        elif tag == "pre":
            self.pre = max(self.pre - 1, 0)
            self._emit("\n```")
            self._block()
        elif tag == "tr":
            self._emit((" |" if self.cell else "") + "\n")
            self.cell = 0
        elif tag in ("ul", "ol") or tag in _BLOCK or tag in _HEADINGS:
            if tag in ("ul", "ol") and self.lists:
                self.lists.pop()
            self._block()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title = ((self.title or "") + data).strip()
            return
        if self.skip:
            return
        if self.pre:
            self._emit(data)
        else:
            self._emit(re.sub(r"\s+", " ", data))


def convert(html: str, base_url: str = "") -> tuple[str, str | None, list[tuple[str, str]]]:
    """``(markdown, title, images)`` for an HTML document."""
    parser = _Converter(base_url)
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    lines = [ln.rstrip() if _NESTED_ITEM.match(ln) else ln.strip() for ln in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    seen: set[str] = set()
    images = []
    for url, alt in parser.images:
        if url not in seen:
            seen.add(url)
            images.append((url, alt))
    return text, parser.title, images
