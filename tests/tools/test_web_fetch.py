"""web_fetch against a real local HTTP server: HTML, JSON, redirects, big and slow pages, SSRF refusal."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lovia.exceptions import ToolError, UserError
from lovia.tools import HttpReader, Page, html_to_markdown, web_fetch

HTML = """<!doctype html><html><head><title>Guide</title><base href="/docs/">
<meta property="og:image" content="/img/og.png"><script>alert('no')</script><style>p{}</style></head>
<body><h1>Example Guide</h1><p>Read the <a href="intro.html">intro</a> and <strong>be</strong> careful.</p>
<ul><li>one</li><li>two</li></ul><pre>code  block</pre>
<img src="hero.png" alt="Hero banner" srcset="hero-1x.png 1x, hero-2x.png 2x">
<picture><source srcset="wide.webp 800w, wider.webp 1600w"></picture>
<img src="data:image/png;base64,AAAA" alt="inline"><a href="javascript:void(0)">js</a></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    hits: Counter[str] = Counter()
    port = 0

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, ctype: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading (size cap, timeout)
            pass

    def do_GET(self) -> None:  # noqa: C901 - one branch per route
        _Handler.hits[self.path] += 1
        if self.path == "/page":
            self._send(200, "text/html; charset=utf-8", HTML.encode())
        elif self.path == "/json":
            self._send(200, "application/json", b'{ "a": 1,\n  "b": [1, 2] }')
        elif self.path == "/text":
            self._send(200, "text/plain", b"plain words")
        elif self.path == "/redirect":
            self._send(302, "text/plain", b"", {"Location": "/page"})
        elif self.path == "/redirect-local":
            self._send(302, "text/plain", b"", {"Location": f"http://127.0.0.1:{self.port}/page"})
        elif self.path == "/loop":
            self._send(302, "text/plain", b"", {"Location": "/loop"})
        elif self.path == "/big":
            body = ("<p>" + "word " * 200 + "</p>\n") * 5200  # ~5 MB
            self._send(200, "text/html", body.encode())
        elif self.path == "/slow":
            time.sleep(3)
            self._send(200, "text/plain", b"late")
        elif self.path == "/missing":
            self._send(404, "text/html", ("<h1>Not found</h1>" + "x" * 5000).encode())
        elif self.path == "/binary":
            self._send(200, "application/octet-stream", b"\x00\x01" * 100)
        else:
            self._send(404, "text/plain", b"no route")


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.port = srv.server_address[1]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{_Handler.port}"
    srv.shutdown()
    srv.server_close()


def local_reader(**kwargs) -> HttpReader:
    return HttpReader(allowed_hosts=("localhost",), **kwargs)


async def _fetch(tool, url: str, **args) -> str:
    page = await tool.invoke({"url": url, **args}, None)
    return tool.result_renderer(page, None)


async def test_html_becomes_fenced_markdown_with_images(server):
    tool = web_fetch(local_reader())
    out = await _fetch(tool, f"{server}/page", images=True)
    head, _, body = out.partition("--- BEGIN EXTERNAL CONTENT (reference material) ---")
    assert f"URL: {server}/page" in head and "HTTP 200 · text/html" in head
    assert "Title: Guide" in body and "# Example Guide" in body
    assert f"[intro]({server}/docs/intro.html)" in body and "**be**" in body and "- one" in body
    assert "alert" not in body and "```" in body
    assert f"{server}/docs/hero-2x.png — Hero banner" in body
    assert f"{server}/docs/wider.webp" in body and f"{server}/img/og.png" in body
    assert "data:image" not in body and "javascript:" not in body
    assert body.rstrip().endswith("--- END EXTERNAL CONTENT ---")


async def test_json_text_binary_and_errors(server):
    tool = web_fetch(local_reader())
    assert '{"a":1,"b":[1,2]}' in await _fetch(tool, f"{server}/json")
    assert "plain words" in await _fetch(tool, f"{server}/text")
    assert "binary content" in await _fetch(tool, f"{server}/binary")
    missing = await tool.invoke({"url": f"{server}/missing"}, None)
    assert missing.status_code == 404 and len(missing.text) <= 500


async def test_redirects_are_followed_and_loops_stop(server):
    page = await local_reader().read(f"{server}/redirect")
    assert page.url.endswith("/page") and page.title == "Guide"
    with pytest.raises(ToolError, match="too many redirects"):
        await local_reader().read(f"{server}/loop")


async def test_loopback_is_refused_by_default_including_after_a_redirect(server):
    port = server.rsplit(":", 1)[1]
    with pytest.raises(ToolError, match="non-public address") as info:
        await HttpReader().read(f"http://127.0.0.1:{port}/page")
    assert info.value.hint
    hits = _Handler.hits["/page"]
    with pytest.raises(ToolError, match="127.0.0.1"):
        await local_reader(cache_ttl=0).read(f"{server}/redirect-local")
    assert _Handler.hits["/page"] == hits  # the internal target was never requested
    for url in ("http://10.0.0.1/", "http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://0.0.0.0/"):
        with pytest.raises(ToolError, match="non-public"):
            await HttpReader().read(url)
    assert (await HttpReader(allow_private=True).read(f"http://127.0.0.1:{port}/text")).text == "plain words"


async def test_bad_urls_are_tool_errors(server):
    tool = web_fetch()
    for url in ("ftp://x/y", "file:///etc/passwd", "not a url", ""):
        with pytest.raises(ToolError):
            await tool.invoke({"url": url}, None)


async def test_a_5mb_page_is_capped_and_paged_by_offset_from_the_cache(server):
    tool = web_fetch(local_reader(), max_chars=2000)
    first = await _fetch(tool, f"{server}/big")
    assert "[... truncated. Continue with offset=2000.]" in first
    assert "stopped at the size cap" in first
    before = _Handler.hits["/big"]
    second = await tool.invoke({"url": f"{server}/big", "offset": 2000}, None)
    assert second.next_offset == 4000 and second.size_capped and len(second.text) == 2000
    assert _Handler.hits["/big"] == before  # served from the reader's cache
    with pytest.raises(ToolError, match="past the end"):
        await tool.invoke({"url": f"{server}/big", "offset": 10**9}, None)


async def test_cache_ttl_zero_refetches(server):
    reader = local_reader(cache_ttl=0)
    before = _Handler.hits["/text"]
    await reader.read(f"{server}/text")
    await reader.read(f"{server}/text")
    assert _Handler.hits["/text"] == before + 2


async def test_a_slow_server_times_out_cleanly(server):
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out"):
        await local_reader(timeout=0.5).read(f"{server}/slow")
    assert time.monotonic() - started < 2.5


async def test_a_custom_reader_plugs_in():
    class Fixed:
        async def read(self, url: str, *, images: bool = False) -> Page:
            return Page(url=url, status_code=200, media_type="text/markdown", text="# Hi")

    out = await _fetch(web_fetch(Fixed()), "https://example.com/x")
    assert "# Hi" in out and "URL: https://example.com/x" in out


def test_html_to_markdown_keeps_structure():
    md = html_to_markdown("<h2>T</h2><ol><li>a</li><li>b</li></ol><table><tr><td>1</td><td>2</td></tr></table>")
    assert "## T" in md and "1. a" in md and "2. b" in md and "| 1 | 2 |" in md


async def test_a_custom_transport_reaches_only_names_the_operator_allowed_or_that_check_out():
    import httpx

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/plain"}, text=f"hello from {request.url.host}")

    reader = HttpReader(transport=httpx.MockTransport(answer), allowed_hosts=("docs.invalid",))
    page = await reader.read("https://docs.invalid/page")
    assert page.text == "hello from docs.invalid"
    with pytest.raises(ToolError, match="non-public"):  # the name is still checked before the transport
        await HttpReader(transport=httpx.MockTransport(answer)).read("http://localhost/page")


async def test_the_markdownify_converter_is_an_opt_in_extra(server):
    reader = local_reader(converter="markdownify")
    page = await reader.read(f"{server}/page")
    assert page.title == "Guide" and "# Example Guide" in page.text
    assert f"[intro]({server}/docs/intro.html)" in page.text and "alert" not in page.text
    assert "javascript:" not in page.text and "data:image" not in page.text
    with pytest.raises(UserError, match="unknown converter"):
        HttpReader(converter="lxml")  # type: ignore[arg-type]


def test_a_missing_fetch_extra_is_a_user_error_with_the_hint(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_markdownify(name, *args, **kwargs):
        if name == "markdownify":
            raise ImportError("no markdownify here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_markdownify)
    with pytest.raises(UserError) as info:
        HttpReader(converter="markdownify")
    assert "lovia[fetch]" in (info.value.hint or "")


@pytest.fixture
def trickler():
    """A loopback server that answers at once, then sends its 20-byte body one byte per second."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 20\r\n\r\n")
                for _ in range(20):
                    if stop.wait(1.0):
                        break
                    try:
                        conn.sendall(b"x")
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://localhost:{listener.getsockname()[1]}/drip"
    stop.set()
    thread.join(5)
    listener.close()


async def test_a_server_trickling_one_byte_a_second_cannot_stretch_the_fetch_past_its_timeout(trickler):
    # Every read gets a byte within the per-read timeout; only a limit on the whole fetch ends it.
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        await local_reader(timeout=2).read(trickler)
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"the fetch took {elapsed:.1f}s with timeout=2"
    assert "limited to 2s" in info.value.message and info.value.hint


async def test_ipv6_spellings_of_internal_ipv4_addresses_are_refused():
    # IPv4-mapped, IPv4-compatible, NAT64 (well-known and local prefix) and 6to4 forms of loopback
    # and of the cloud metadata address; no lookup is needed for a literal, nothing is sent.
    for host in (
        "[::ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[64:ff9b::a9fe:a9fe]",
        "[64:ff9b:1::a00:1]",
        "[2002:7f00:1::]",
        "[2002:a9fe:a9fe::1]",
        "100.64.0.1",
        "[fd00::1]",
        "[ff02::1]",
    ):
        with pytest.raises(ToolError, match="non-public") as info:
            await HttpReader(cache_ttl=0).read(f"http://{host}:9/")
        assert info.value.hint


def _tls_server(tmp_path, name: str):
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for ``name``; records the SNI."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}"]
        + ["-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    seen: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, server_name, ctx: seen.append(server_name)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.socket = context.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, cert, seen


async def test_tls_to_the_pinned_address_still_sends_and_verifies_the_host_name(tmp_path, monkeypatch):
    # The connection goes to the checked IP; SNI and the certificate check stay on "localhost".
    good, good_cert, seen = _tls_server(tmp_path, "localhost")
    other, other_cert, _ = _tls_server(tmp_path, "elsewhere.test")
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(good_cert))  # trust our test certificate only
        page = await local_reader(cache_ttl=0).read(f"https://localhost:{good.server_address[1]}/text")
        assert page.text == "plain words" and seen == ["localhost"]
        monkeypatch.setenv("SSL_CERT_FILE", str(other_cert))  # trusted, but issued for another name
        with pytest.raises(ToolError, match="[Hh]ostname mismatch"):
            await local_reader(cache_ttl=0).read(f"https://localhost:{other.server_address[1]}/text")
    finally:
        for srv in (good, other):
            srv.shutdown()
            srv.server_close()
