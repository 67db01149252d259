"""Fake vendor servers on 127.0.0.1 speaking the real wire formats (reusable by any test).

A :class:`FakeServer` is a threaded ``http.server`` on an ephemeral loopback port. Tests queue
:class:`Reply` objects (or set ``responder``); each incoming POST takes the next one (GETs are
answered from ``routes``, path → reply, else 404, so discovery calls never eat a scripted reply);
every request is recorded in ``server.requests`` so tests can assert on the payload the adapter sent. Replies are
written piece by piece (``Reply.chunks``), so a test controls where the byte stream is split, and
can make the server drop the connection half-way (``die_after``).

Usage::

    with FakeServer() as server:
        server.enqueue(Reply.sse(openai_text_stream("hi")))
        provider = OpenAIChatProvider("m", base_url=server.base_url)

The body builders below produce OpenAI chat-completions and Anthropic Messages SSE streams.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "FakeServer",
    "RecordedRequest",
    "Reply",
    "anthropic_stream",
    "anthropic_text_stream",
    "anthropic_tool_stream",
    "openai_chunk",
    "openai_stream",
    "openai_text_stream",
    "openai_tool_stream",
    "split_at",
    "split_every",
]


# --------------------------------------------------------------------------- replies


@dataclass
class Reply:
    """One scripted HTTP response.

    ``mode``: ``"chunked"`` (Transfer-Encoding), ``"close"`` (body ends when the socket closes) or
    ``"length"`` (Content-Length). ``die_after=n`` writes only the first ``n`` pieces and then
    drops the connection (for ``chunked`` the client sees a truncated body, for ``close`` a clean
    but early EOF).
    """

    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    mode: Literal["chunked", "close", "length"] = "chunked"
    die_after: int | None = None
    delay: float = 0.0

    @classmethod
    def sse(cls, body: bytes, *, pieces: Sequence[bytes] | None = None, **kwargs: Any) -> Reply:
        """An SSE response; ``pieces`` (which must join to ``body``) controls the split."""
        chunks = list(pieces) if pieces is not None else [body]
        assert b"".join(chunks) == body, "pieces must join to the body"
        headers = {"Content-Type": "text/event-stream", **kwargs.pop("headers", {})}
        return cls(chunks=chunks, headers=headers, **kwargs)

    @classmethod
    def json(cls, status: int, payload: Any, **kwargs: Any) -> Reply:
        """A JSON response with Content-Length."""
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
        return cls(status=status, chunks=[body], headers=headers, mode="length", **kwargs)

    @classmethod
    def text(cls, status: int, body: str, content_type: str = "text/html", **kwargs: Any) -> Reply:
        """A plain-text or HTML response with Content-Length."""
        return cls(
            status=status, chunks=[body.encode()], headers={"Content-Type": content_type}, mode="length", **kwargs
        )


@dataclass
class RecordedRequest:
    """What the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def split_every(data: bytes, size: int) -> list[bytes]:
    """Cut ``data`` into pieces of ``size`` bytes."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def split_at(data: bytes, positions: Iterable[int]) -> list[bytes]:
    """Cut ``data`` at the given byte offsets."""
    cuts = sorted({p for p in positions if 0 < p < len(data)})
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# --------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        reply = self.server.owner._take(request)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        if reply.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        elif reply.mode == "length":
            self.send_header("Content-Length", str(sum(len(c) for c in reply.chunks)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.flush()
        self._write_body(reply)

    def _write_body(self, reply: Reply) -> None:
        for i, piece in enumerate(reply.chunks):
            if reply.die_after is not None and i >= reply.die_after:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.mode == "chunked":
                piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
            self.wfile.write(piece)
            self.wfile.flush()
            if reply.delay:
                time.sleep(reply.delay)
        if reply.mode == "chunked":
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-response (timeouts, cancellations) are expected here


class FakeServer:
    """A scripted HTTP server on an ephemeral 127.0.0.1 port (usable from sync and async tests)."""

    def __init__(self, *, prefix: str = "/v1") -> None:
        self.prefix = prefix
        self.requests: list[RecordedRequest] = []
        self.replies: deque[Reply] = deque()
        self.responder: Callable[[RecordedRequest], Reply] | None = None
        self.routes: dict[str, Reply] = {}
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port><prefix>`` (the API root a provider expects)."""
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies; each request consumes the next one."""
        with self._lock:
            self.replies.extend(replies)

    def _take(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.method == "GET":
                route = self.routes.get(request.path.split("?")[0])
                return route if route is not None else Reply.json(404, {"error": {"message": "not found"}})
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Reply.json(418, {"error": {"message": "fake server: no scripted reply left", "type": "test_error"}})

    def posts(self) -> list[RecordedRequest]:
        """The POST requests received so far."""
        return [r for r in self.requests if r.method == "POST"]

    def start(self) -> FakeServer:
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- OpenAI chat completions


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    chunk_id: str = "chatcmpl-test",
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta=None`` with ``usage`` makes the final usage chunk."""
    chunk: dict[str, Any] = {"id": chunk_id, "object": "chat.completion.chunk", "created": 0, "model": "m"}
    if delta is None and usage is not None:
        chunk["choices"] = []
    else:
        chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def openai_stream(chunks: Iterable[dict[str, Any]], *, done: bool = True, crlf: bool = False) -> bytes:
    """Frame chunks as ``data: {...}`` events, ending with ``data: [DONE]`` when ``done``."""
    nl = "\r\n" if crlf else "\n"
    out = [f"data: {json.dumps(c, ensure_ascii=False)}{nl}{nl}" for c in chunks]
    if done:
        out.append(f"data: [DONE]{nl}{nl}")
    return "".join(out).encode()


def openai_text_stream(text: str, *, usage: dict[str, Any] | None = None, reasoning: str | None = None) -> bytes:
    """A complete text answer streamed in small pieces, then usage and ``[DONE]``."""
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    if reasoning:
        chunks.append(openai_chunk({"reasoning_content": reasoning}))
    chunks.extend(openai_chunk({"content": text[i : i + 3]}) for i in range(0, len(text), 3))
    chunks.append(openai_chunk({}, finish_reason="stop"))
    chunks.append(openai_chunk(usage=usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}))
    return openai_stream(chunks)


def openai_tool_stream(calls: Sequence[tuple[str, str, str]], *, interleave: bool = True) -> bytes:
    """Tool calls ``(call_id, name, arguments)`` whose argument fragments are interleaved by index."""
    chunks = [openai_chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, _) in enumerate(calls):
        chunks.append(
            openai_chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                    ]
                }
            )
        )
    pieces = [[args[i : i + 4] for i in range(0, len(args), 4)] for _, _, args in calls]
    order = range(max((len(p) for p in pieces), default=0)) if interleave else [None]
    for step in order:
        for index, frags in enumerate(pieces):
            selected = frags if step is None else frags[step : step + 1]
            for frag in selected:
                chunks.append(openai_chunk({"tool_calls": [{"index": index, "function": {"arguments": frag}}]}))
    chunks.append(openai_chunk({}, finish_reason="tool_calls"))
    chunks.append(openai_chunk(usage={"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}))
    return openai_stream(chunks)


# --------------------------------------------------------------------------- Anthropic messages


def anthropic_stream(events: Iterable[dict[str, Any]], *, crlf: bool = False) -> bytes:
    """Frame events as ``event: <type>`` + ``data: {...}`` pairs."""
    nl = "\r\n" if crlf else "\n"
    return "".join(f"event: {e['type']}{nl}data: {json.dumps(e, ensure_ascii=False)}{nl}{nl}" for e in events).encode()


def _message_start(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    message = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def anthropic_text_stream(
    text: str, *, usage: dict[str, Any] | None = None, stop_reason: str = "end_turn", stop: bool = True
) -> list[dict[str, Any]]:
    """Events of a text answer (pass them to :func:`anthropic_stream`)."""
    events = [
        _message_start(usage),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[i : i + 3]}}
        for i in range(0, len(text), 3)
    ]
    events.append({"type": "content_block_stop", "index": 0})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 7},
        }
    )
    if stop:
        events.append({"type": "message_stop"})
    return events


def anthropic_tool_stream(calls: Sequence[tuple[str, str, str]], *, text: str | None = None) -> list[dict[str, Any]]:
    """Events of a turn with optional text then ``tool_use`` blocks ``(id, name, arguments)``."""
    events: list[dict[str, Any]] = [_message_start()]
    index = 0
    if text:
        events.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        events.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
        events.append({"type": "content_block_stop", "index": 0})
        index = 1
    for call_id, name, args in calls:
        events.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            }
        )
        for i in range(0, len(args), 5):
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": args[i : i + 5]},
                }
            )
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        }
    )
    events.append({"type": "message_stop"})
    return events
