"""``web_fetch``: read one URL with a GET and give the model Markdown, JSON or text, fenced.

The default backend, :class:`HttpReader`, refuses loopback, private, link-local and other
non-public addresses, on the first request and on every redirect hop, unless the operator
allows them (``allow_private=True`` or ``allowed_hosts=``): a model fed untrusted text cannot
use it to reach internal services. Each connection looks its host up once, refuses it if any
answer is not public (or the lookup fails), and connects to exactly the address it checked, so a
DNS server answering differently to a second lookup (rebinding) gets no second lookup. One
``timeout`` bounds the whole fetch.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import json
import re
import socket
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from ..exceptions import ToolError, UserError
from ._html import convert
from ._tool import Tool
from .fence import FENCE_NOTE, fence

__all__ = ["HttpReader", "Page", "PageImage", "PageReader", "html_to_markdown", "page_from_response", "web_fetch"]

MAX_RESPONSE_BYTES = 1_000_000
ERROR_BODY_CHARS = 500
MAX_REDIRECTS = 10


@dataclass
class PageImage:
    """An image a page references (absolute URL)."""

    url: str
    alt: str = ""


@dataclass
class Page:
    """A fetched page: final URL, status, media type, title, text (Markdown for HTML) and images."""

    url: str
    status_code: int
    media_type: str
    title: str | None = None
    text: str = ""
    images: list[PageImage] = field(default_factory=list)
    size_capped: bool = False
    next_offset: int | None = None


@runtime_checkable
class PageReader(Protocol):
    """A backend for ``web_fetch``: return the whole page; clipping is the tool's job."""

    async def read(self, url: str, *, images: bool = False) -> Page: ...


@dataclass
class RawResponse:
    """The bytes of one HTTP response, as :class:`HttpReader` downloaded them."""

    url: str
    status_code: int
    content_type: str
    body: bytes
    size_capped: bool = False


def html_to_markdown(html: str, *, base_url: str = "") -> str:
    """Markdown for an HTML document: headings, lists, links, images, code and tables kept."""
    return convert(html, base_url)[0]


Converter = Literal["builtin", "markdownify"]
_SKIPPED_TAGS = ["script", "style", "noscript", "template", "svg", "head", "iframe", "canvas"]


def _require_markdownify() -> None:
    try:
        import bs4  # noqa: F401
        import markdownify  # noqa: F401
    except ImportError:
        raise UserError(
            "the markdownify converter needs the markdownify and beautifulsoup4 packages",
            hint="pip install 'lovia[fetch]', or use the built-in converter",
        ) from None


def markdownify_html(html: str, *, base_url: str = "") -> str:
    """HTML to Markdown with ``markdownify`` (``lovia[fetch]``): scripts dropped, links made absolute."""
    _require_markdownify()
    bs4: Any = importlib.import_module("bs4")  # optional packages, typed loosely on purpose
    markdownify: Any = importlib.import_module("markdownify")

    soup = bs4.BeautifulSoup(html, "html.parser")
    base_tag = soup.find("base", href=True)
    base = urljoin(base_url, str(base_tag["href"])) if base_tag is not None else base_url
    for tag in soup(_SKIPPED_TAGS):
        tag.decompose()
    for attr in ("href", "src"):
        for tag in soup.find_all(attrs={attr: True}):
            value = str(tag[attr])
            if value.strip().lower().startswith(("javascript:", "data:")):
                del tag[attr]
            else:
                tag[attr] = urljoin(base, value)
    text = markdownify.MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in text.splitlines())).strip()


def page_from_response(raw: RawResponse, *, collect_images: bool = False, converter: Converter = "builtin") -> Page:
    """Turn a downloaded response into a :class:`Page` (HTML to Markdown, JSON compacted)."""
    media = raw.content_type.split(";", 1)[0].strip().lower() or "application/octet-stream"
    charset = "utf-8"
    for bit in raw.content_type.split(";")[1:]:
        key, _, value = bit.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    try:
        decoded = raw.body.decode(charset, errors="replace")
    except LookupError:
        decoded = raw.body.decode("utf-8", errors="replace")
    page = Page(url=raw.url, status_code=raw.status_code, media_type=media, size_capped=raw.size_capped)
    if raw.status_code >= 400:
        text = html_to_markdown(decoded, base_url=raw.url) if "html" in media else decoded
        page.text = text[:ERROR_BODY_CHARS]
        return page
    if "html" in media or (
        media == "application/octet-stream" and decoded.lstrip()[:15].lower().startswith(("<!doctype", "<html"))
    ):
        text, title, images = convert(decoded, raw.url)
        if converter == "markdownify":
            text = markdownify_html(decoded, base_url=raw.url)
        page.text, page.title = text, title
        if collect_images:
            page.images = [PageImage(url=u, alt=a) for u, a in images]
    elif media.endswith("json") or media.endswith("+json"):
        try:
            page.text = json.dumps(json.loads(decoded), ensure_ascii=False, separators=(",", ":"))
        except ValueError:
            page.text = decoded
    elif media.startswith("text/") or media in ("application/xml", "application/javascript"):
        page.text = decoded
    else:
        page.text = (
            f"[binary content: {media}, {len(raw.body)} bytes{' or more' if raw.size_capped else ''}; not shown]"
        )
    return page


_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64 or 6to4), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _IPV4_COMPATIBLE or any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(ip.packed[-4:])
    return None


def _is_public(address: str) -> bool:
    """True for a globally routable unicast address; an IPv6 form of an IPv4 address is judged by that."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        ip = _embedded_ipv4(ip) or ip
    return (
        ip.is_global
        and not (ip.is_multicast or ip.is_private or ip.is_loopback or ip.is_link_local)
        and not (ip.is_reserved or ip.is_unspecified)
    )


_LOOKUP_HINT = "check the host name; web_fetch only connects to addresses it has looked up and checked"


class _Refused(ToolError):
    """Internal: the guard refused a host; the reader re-raises it as a ToolError naming the URL."""


class _AddressGuard:
    """Resolve a host name once, refuse it if any answer is not public, hand back the addresses."""

    def __init__(self, *, allow_private: bool, allowed_hosts: tuple[str, ...]) -> None:
        self.allow_private = allow_private
        self.allowed_hosts = allowed_hosts

    def allowed(self, host: str, port: int) -> bool:
        return self.allow_private or host in self.allowed_hosts or f"{host}:{port}" in self.allowed_hosts

    async def resolve(self, host: str, port: int) -> list[str]:
        host = host.lower()
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise _Refused(f"the address of {host} could not be looked up ({exc})", hint=_LOOKUP_HINT) from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise _Refused(f"the lookup of {host} gave no address", hint=_LOOKUP_HINT)
        if not self.allowed(host, port):
            bad = [a for a in addresses if not _is_public(a)]
            if bad:
                what = f"{host} is" if host == bad[0] else f"{host} resolves to {bad[0]},"
                raise _Refused(
                    f"{what} a loopback, private or otherwise non-public address",
                    hint="only public web addresses can be fetched (the operator can allow others on the HttpReader)",
                )
        return addresses


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer, connecting only to the addresses the guard resolved and checked.

    httpcore asks for ``host``; this backend resolves it once through the guard and opens the TCP
    connection to one of those IP addresses. TLS still runs against the host name (SNI and
    certificate checks) and the ``Host`` header comes from the URL, so nothing else changes.
    """

    def __init__(self, guard: _AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await self._guard.resolve(host, port):
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve() never returns an empty list
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise ToolError("web_fetch does not connect to unix sockets", hint="fetch an http(s) URL")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport over :class:`_PinnedBackend`.

    Proxies from the environment are not used (a proxy would look the names up itself); the
    certificate settings are (``SSL_CERT_FILE``, ``SSL_CERT_DIR``).
    """

    def __init__(self, guard: _AddressGuard) -> None:
        super().__init__(trust_env=False)
        # The stock transport gives no way to pass a network backend to its httpcore pool:
        # replace the pool with one that connects through the guard.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_PinnedBackend(guard)
        )


class HttpReader:
    """One plain GET per page (no JavaScript), with a per-reader cache and hard size caps."""

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        max_bytes: int = MAX_RESPONSE_BYTES,
        user_agent: str | None = None,
        cache_ttl: float = 300.0,
        cache_size: int = 32,
        allow_private: bool = False,
        allowed_hosts: tuple[str, ...] = (),
        transport: httpx.AsyncBaseTransport | None = None,
        converter: Converter = "builtin",
    ) -> None:
        if converter not in ("builtin", "markdownify"):
            raise UserError(f"unknown converter {converter!r}", hint="use 'builtin' or 'markdownify'")
        if converter == "markdownify":
            _require_markdownify()  # fail at construction, not mid-run
        self.converter: Converter = converter
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.user_agent = user_agent or "lovia-web-fetch/1.0 (+https://example.invalid/lovia)"
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self.allow_private = allow_private
        self.allowed_hosts = tuple(h.lower() for h in allowed_hosts)
        self._transport = transport
        self._cache: OrderedDict[str, tuple[float, RawResponse]] = OrderedDict()

    def _guard(self) -> _AddressGuard:
        return _AddressGuard(allow_private=self.allow_private, allowed_hosts=self.allowed_hosts)

    async def _check_url(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(
                f"only absolute http:// and https:// URLs can be fetched, not {url!r}", hint="pass a full URL"
            )
        guard, port = self._guard(), parts.port or (443 if parts.scheme == "https" else 80)
        if self._transport is not None and not guard.allowed(parts.hostname.lower(), port):
            # A transport of the operator's own does its own connecting: the name is checked here
            # by the same rules, but which address it finally connects to is up to that transport.
            await guard.resolve(parts.hostname, port)

    async def _download(self, url: str) -> RawResponse:
        headers = {"User-Agent": self.user_agent, "Accept": "text/html,application/json,text/plain;q=0.9,*/*;q=0.5"}
        transport = self._transport if self._transport is not None else _PinnedTransport(self._guard())
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False, transport=transport) as client:
            current = url
            for _ in range(MAX_REDIRECTS + 1):
                try:
                    await self._check_url(current)  # every hop; its address is checked when it connects
                    answer = await self._get(client, current, headers)
                except _Refused as exc:
                    raise ToolError(f"refused to fetch {current!r}: {exc.message}", hint=exc.hint) from None
                if isinstance(answer, RawResponse):
                    return answer
                current = answer
        raise ToolError(f"too many redirects fetching {url!r}", hint="try the final URL directly")

    async def _get(self, client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> RawResponse | str:
        """One GET: the downloaded response, or the URL a redirect points to."""
        async with client.stream("GET", url, headers=headers) as resp:
            if resp.status_code in (301, 302, 303, 307, 308) and resp.headers.get("location"):
                return urljoin(url, resp.headers["location"])
            body = bytearray()
            capped = False
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > self.max_bytes:
                    del body[self.max_bytes :]
                    capped = True
                    break
            return RawResponse(
                url=str(resp.url),
                status_code=resp.status_code,
                content_type=resp.headers.get("content-type", ""),
                body=bytes(body),
                size_capped=capped,
            )

    async def read(self, url: str, *, images: bool = False) -> Page:
        """Fetch ``url`` (cached for ``cache_ttl`` seconds) and convert it."""
        hit = self._cache.get(url)
        if hit is not None and time.monotonic() - hit[0] < self.cache_ttl:
            return page_from_response(hit[1], collect_images=images, converter=self.converter)
        try:
            # one limit for the whole fetch: lookups, connects, headers and body of every hop
            raw = await asyncio.wait_for(self._download(url), self.timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise ToolError(
                f"fetching {url!r} timed out: the whole fetch (connect, headers and body, redirects included) "
                f"is limited to {self.timeout:g}s",
                hint="try again later or another source (the operator sets the limit with HttpReader(timeout=...))",
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {url!r} failed: {type(exc).__name__}: {exc}", hint="check the URL") from None
        if self.cache_ttl > 0 and self.cache_size > 0:
            self._cache[url] = (time.monotonic(), raw)
            self._cache.move_to_end(url)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return page_from_response(raw, collect_images=images, converter=self.converter)


def render_page(page: Page) -> str:
    """The text block the model reads: lovia's status lines outside the fence, the page inside."""
    body: list[str] = []
    if page.title:
        body.append(f"Title: {page.title}\n")
    body.append(page.text)
    if page.images:
        body.append(f"\nImages ({len(page.images)}):")
        body.extend(f"{i}. {img.url}" + (f" — {img.alt}" if img.alt else "") for i, img in enumerate(page.images, 1))
    out = f"URL: {page.url}\nHTTP {page.status_code} · {page.media_type}\n\n" + fence("\n".join(body))
    if page.next_offset is not None:
        out += f"\n\n[... truncated. Continue with offset={page.next_offset}.]"
    if page.size_capped:
        out += "\n[The download stopped at the size cap: the rest of the page cannot be read with any offset.]"
    return out


def clip_page(page: Page, *, offset: int, max_chars: int) -> Page:
    """A copy of ``page`` holding ``max_chars`` characters from ``offset`` (``next_offset`` set when more remain)."""
    text = page.text
    if offset > len(text):
        raise ToolError(
            f"offset {offset} is past the end of the page ({len(text)} characters)", hint="use a smaller offset"
        )
    end = offset + max_chars
    return Page(
        url=page.url,
        status_code=page.status_code,
        media_type=page.media_type,
        title=page.title,
        text=text[offset:end],
        images=page.images if offset == 0 else [],
        size_capped=page.size_capped,
        next_offset=end if end < len(text) else None,
    )


def web_fetch(impl: PageReader | None = None, *, name: str = "web_fetch", max_chars: int = 20000) -> Tool[Any]:
    """A tool that reads one URL. ``impl`` defaults to a fresh :class:`HttpReader` (its own cache)."""
    reader: PageReader = impl if impl is not None else HttpReader()

    async def invoke(args: dict[str, Any], ctx: Any) -> Page:
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError("'url' must be an absolute http(s) URL", hint="e.g. https://example.com/page")
        offset = args.get("offset", 0) or 0
        if not isinstance(offset, int) or offset < 0:
            raise ToolError("'offset' must be a non-negative integer", hint="use the offset from the truncation notice")
        page = await reader.read(url.strip(), images=bool(args.get("images", False)))
        return clip_page(page, offset=offset, max_chars=max_chars)

    def renderer(page: Any, ctx: Any) -> str:
        return render_page(page) if isinstance(page, Page) else str(page)

    return Tool(
        name=name,
        description=f"Read a web page (or JSON/text URL) and return it as Markdown.\n{FENCE_NOTE}",
        parameters={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
                "images": {
                    "type": "boolean",
                    "default": False,
                    "description": "Also list every image the page references.",
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "Continue a long page at this character offset.",
                },
            },
            "required": ["url"],
        },
        invoke=invoke,
        result_renderer=renderer,
    )
