"""Outsider acceptance tests: both HTTP providers driven through Agent/Runner against hand-written fake
vendor servers that speak the documented OpenAI chat-completions and Anthropic Messages SSE formats.

Nothing here imports the project's own provider test helpers; the servers below are written from the
vendor documentation (and from what real OpenAI-compatible servers are known to send).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pydantic
import pytest

from lovia import (
    Agent,
    AnthropicProvider,
    ContextOverflowError,
    ModelSettings,
    OpenAIChatProvider,
    ProviderError,
    RetryPolicy,
    Runner,
    Usage,
    UserError,
    model_from_env,
    tool,
)
from lovia import events as ev_mod
from lovia.providers import register_provider
from lovia.transcript import AssistantTextEntry, ReasoningEntry

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Site Overloaded",
}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up mid-response (a timeout, a cancelled stream) is what some tests do


@dataclass
class Canned:
    """One scripted HTTP response."""

    status: int = 200
    content_type: str = "text/event-stream"
    pieces: list[bytes] = field(default_factory=list)
    chunked: bool = True
    cut_after: int | None = None  # close the socket after this many pieces (no terminator)
    extra_headers: dict[str, str] = field(default_factory=dict)
    stall: float = 0.0  # seconds of silence after the pieces


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class VendorServer:
    """127.0.0.1 HTTP/1.1 server answering requests from a queue of canned replies."""

    def __init__(self) -> None:
        self.queue: list[Canned] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with outer._lock:
                    outer.seen.append(
                        Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    if self.command == "GET":  # model-list / context-window discovery: not scripted
                        reply = Canned(
                            404, "application/json", [b'{"error": {"message": "no model list here"}}'], chunked=False
                        )
                    elif outer.queue:
                        reply = outer.queue.pop(0)
                    else:
                        reply = Canned(
                            500, "application/json", [b'{"error": {"message": "nothing queued"}}'], chunked=False
                        )
                self._write(reply)

            do_POST = _serve
            do_GET = _serve

            def _write(self, reply: Canned) -> None:
                head = [
                    f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Whatever')}",
                    f"Content-Type: {reply.content_type}",
                ]
                head += [f"{k}: {v}" for k, v in reply.extra_headers.items()]
                if reply.chunked:
                    head.append("Transfer-Encoding: chunked")
                elif reply.cut_after is None:
                    head.append(f"Content-Length: {sum(len(p) for p in reply.pieces)}")
                else:
                    head.append("Connection: close")  # body delimited by the close itself
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
                self.wfile.flush()
                for n, piece in enumerate(reply.pieces):
                    if reply.cut_after is not None and n >= reply.cut_after:
                        break
                    if reply.chunked:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    else:
                        self.wfile.write(piece)
                    self.wfile.flush()
                if reply.stall:
                    time.sleep(reply.stall)
                if reply.cut_after is not None:
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if reply.chunked:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def add(self, *replies: Canned) -> None:
        with self._lock:
            self.queue.extend(replies)

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def vendor() -> Iterator[VendorServer]:
    srv = VendorServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _no_vendor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "LOVIA_MODEL",
        "LOVIA_PROVIDER_TIMEOUT",
        "LOVIA_PROVIDER_TRUST_ENV",
        "LOVIA_HTTP_CA_BUNDLE",
        "LOVIA_HTTP_INSECURE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


# ============================================================================ wire builders


def sse_lines(
    objs: list[Any], *, done: bool = True, nl: str = "\n", space: bool = True, comments: bool = False
) -> list[bytes]:
    """OpenAI-style ``data:`` events, one bytes piece per event."""
    sep = "data: " if space else "data:"
    out: list[bytes] = []
    if comments:
        out.append(f": ping{nl}{nl}".encode())
    for obj in objs:
        out.append(f"{sep}{json.dumps(obj)}{nl}{nl}".encode())
        if comments:
            out.append(f": keep-alive{nl}{nl}".encode())
    if done:
        out.append(f"{sep}[DONE]{nl}{nl}".encode())
    return out


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
    no_choices: bool = False,
    cid: str = "chatcmpl-outsider",
) -> dict[str, Any]:
    body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-test"}
    body["choices"] = (
        [] if no_choices else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    )
    if usage is not None:
        body["usage"] = usage
    return body


def oa_usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def oa_text(
    text: str, *, prompt: int = 11, completion: int = 7, cached: int = 0, finish: str = "stop"
) -> list[dict[str, Any]]:
    objs = [chunk({"role": "assistant", "content": "", "refusal": None})]
    objs += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
    objs.append(chunk({}, finish))
    objs.append(chunk(no_choices=True, usage=oa_usage(prompt, completion, cached)))
    return objs


def ev(name: str, **data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def an_start(input_tokens: int = 25, cache_read: int = 0, cache_write: int = 0) -> bytes:
    message = {
        "id": "msg_outsider",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "output_tokens": 1,
        },
    }
    return ev("message_start", message=message)


def an_end(stop: str, output_tokens: int) -> list[bytes]:
    return [
        ev("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage={"output_tokens": output_tokens}),
        ev("message_stop"),
    ]


def an_text_block(index: int, text: str) -> list[bytes]:
    out = [ev("content_block_start", index=index, content_block={"type": "text", "text": ""}), ev("ping")]
    out += [
        ev("content_block_delta", index=index, delta={"type": "text_delta", "text": text[i : i + 5]})
        for i in range(0, len(text), 5)
    ]
    out.append(ev("content_block_stop", index=index))
    return out


def an_text(
    text: str,
    *,
    input_tokens: int = 25,
    output_tokens: int = 9,
    cache_read: int = 0,
    cache_write: int = 0,
    stop: str = "end_turn",
) -> list[bytes]:
    return [an_start(input_tokens, cache_read, cache_write), *an_text_block(0, text), *an_end(stop, output_tokens)]


def sse_reply(pieces: list[bytes], **kw: Any) -> Canned:
    return Canned(200, "text/event-stream; charset=utf-8", pieces, **kw)


def json_reply(status: int, body: Any) -> Canned:
    return Canned(status, "application/json", [json.dumps(body).encode()], chunked=False)


HTML_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    b"</center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
)


# ============================================================================ agents


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def clock(zone: str) -> str:
    """The time in a zone."""
    return f"noon in {zone}"


FAST = RetryPolicy(backoff_base=0.001, backoff_max=0.001)
NO_RETRY = RetryPolicy(max_attempts=1)


def openai_agent(vendor: VendorServer, mp: pytest.MonkeyPatch, *, key: str | None = "sk-outsider", **kw: Any) -> Agent:
    mp.setenv("OPENAI_BASE_URL", vendor.root)
    if key:
        mp.setenv("OPENAI_API_KEY", key)
    kw.setdefault("retry", FAST)
    return Agent(name="outsider", instructions="answer briefly", model=kw.pop("model", "openai:gpt-test"), **kw)


def anthropic_agent(
    vendor: VendorServer, mp: pytest.MonkeyPatch, *, key: str | None = "sk-ant-outsider", **kw: Any
) -> Agent:
    mp.setenv("ANTHROPIC_BASE_URL", vendor.root)
    if key:
        mp.setenv("ANTHROPIC_API_KEY", key)
    kw.setdefault("retry", FAST)
    return Agent(name="outsider", instructions="answer briefly", model=kw.pop("model", "anthropic:claude-test"), **kw)


async def collect(handle: Any) -> tuple[list[Any], Any]:
    events = [e async for e in handle]
    return events, await handle.result()


# ============================================================================ OpenAI: happy paths


async def test_openai_text_stream_usage_and_request_shape(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor.add(sse_reply(sse_lines(oa_text("Hello from the fake vendor.", prompt=40, completion=6, cached=32))))
    events, result = await collect(Runner.stream(openai_agent(vendor, monkeypatch), "say hello"))
    assert result.output == "Hello from the fake vendor."
    assert "".join(e.delta for e in events if isinstance(e, ev_mod.TextDelta)) == "Hello from the fake vendor."
    assert result.usage == Usage(input_tokens=40, output_tokens=6, cache_read_tokens=32)
    assert result.finish_reason == "stop"
    (req,) = vendor.posts()
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-outsider"
    assert req.headers["content-type"].startswith("application/json")
    body = req.json
    assert body["model"] == "gpt-test" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "answer briefly"},
        {"role": "user", "content": "say hello"},
    ]
    assert "response_format" not in body and "max_tokens" not in body and "max_completion_tokens" not in body


async def test_openai_tool_round_trip_exact_bodies(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    first = [
        chunk({"role": "assistant", "content": None}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_Wx1", "type": "function", "function": {"name": "weather", "arguments": ""}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Os'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'lo"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(no_choices=True, usage=oa_usage(100, 20, cached=64)),
    ]
    vendor.add(sse_reply(sse_lines(first)), sse_reply(sse_lines(oa_text("Sunny in Oslo.", prompt=130, completion=5))))
    result = await Runner.run(openai_agent(vendor, monkeypatch, tools=[weather]), "weather in Oslo?")
    assert result.output == "Sunny in Oslo."
    assert result.usage == Usage(input_tokens=230, output_tokens=25, cache_read_tokens=64)
    r1, r2 = vendor.posts()
    (tool_schema,) = [t for t in r1.json["tools"] if t["function"]["name"] == "weather"]
    assert tool_schema["type"] == "function"
    assert tool_schema["function"]["name"] == "weather"
    assert tool_schema["function"]["description"] == "Current weather for a city."
    assert tool_schema["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert tool_schema["function"]["parameters"]["required"] == ["city"]
    msgs = r2.json["messages"]
    assert msgs[:2] == r1.json["messages"]
    assistant, tool_msg = msgs[2], msgs[3]
    assert assistant["role"] == "assistant" and not assistant.get("content")
    assert assistant["tool_calls"] == [
        {"id": "call_Wx1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    ]
    assert tool_msg == {"role": "tool", "tool_call_id": "call_Wx1", "content": "sunny in Oslo"}
    assert len(msgs) == 4


async def test_openai_two_interleaved_tool_calls(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    first = [
        chunk({"role": "assistant", "content": ""}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_A", "type": "function", "function": {"name": "weather", "arguments": ""}}
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_B", "type": "function", "function": {"name": "clock", "arguments": '{"zo'}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "function": {"arguments": 'ne": "UTC"}'}},
                    {"index": 0, "function": {"arguments": '"Rome"}'}},
                ]
            }
        ),
        chunk({}, "tool_calls"),
        chunk(no_choices=True, usage=oa_usage(50, 30)),
    ]
    vendor.add(sse_reply(sse_lines(first)), sse_reply(sse_lines(oa_text("done", prompt=90, completion=2))))
    events, result = await collect(Runner.stream(openai_agent(vendor, monkeypatch, tools=[weather, clock]), "both"))
    assert result.output == "done"
    completed = {e.call.id: e.output for e in events if isinstance(e, ev_mod.ToolCallCompleted)}
    assert completed == {"call_A": "sunny in Rome", "call_B": "noon in UTC"}
    msgs = vendor.posts()[1].json["messages"]
    calls = {c["id"]: (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msgs[2]["tool_calls"]}
    assert calls == {"call_A": ("weather", {"city": "Rome"}), "call_B": ("clock", {"zone": "UTC"})}
    results = {m["tool_call_id"]: m["content"] for m in msgs[3:] if m["role"] == "tool"}
    assert results == {"call_A": "sunny in Rome", "call_B": "noon in UTC"}
    assert result.usage.input_tokens == 140 and result.usage.output_tokens == 32


async def test_openai_reasoning_deltas(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    objs = [
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"content": None, "reasoning_content": "Let me "}),
        chunk({"content": None, "reasoning_content": "think."}),
        chunk({"content": "42", "reasoning_content": None}),
        chunk({}, "stop", usage=oa_usage(9, 4)),
    ]  # final chunk carries finish and usage together
    vendor.add(sse_reply(sse_lines(objs)))
    events, result = await collect(Runner.stream(openai_agent(vendor, monkeypatch), "meaning?"))
    assert "".join(e.delta for e in events if isinstance(e, ev_mod.ReasoningDelta)) == "Let me think."
    assert result.output == "42" and result.finish_reason == "stop"
    assert result.usage == Usage(input_tokens=9, output_tokens=4)
    assert any(isinstance(e, ReasoningEntry) and e.content == "Let me think." for e in result.entries)


@pytest.mark.parametrize("nl", ["\n", "\r\n"])
async def test_openai_compatible_server_quirks(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, nl: str) -> None:
    """What vLLM / llama.cpp / Ollama really send: full arguments in one chunk, id only once, no
    index, empty content next to tool calls, reasoning under ``reasoning``, ``data:`` without a
    space, CRLF endings, ``: ping`` comments, finish + usage in the last chunk, no [DONE]-less end."""
    first = [
        chunk({"role": "assistant", "content": "", "reasoning": "need weather"}),
        chunk(
            {
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Lima"}'},
                    }
                ],
            }
        ),
        chunk(
            {
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "clock", "arguments": '{"zone": "PET"}'}}
                ],
            }
        ),
        chunk({"content": ""}, "tool_calls", usage=oa_usage(70, 12)),
    ]
    pieces = sse_lines(first, nl=nl, space=False, comments=True)
    joined = b"".join(pieces)
    vendor.add(
        sse_reply([joined[i : i + 13] for i in range(0, len(joined), 13)]),  # events split anywhere
        sse_reply(sse_lines(oa_text("ok", prompt=80, completion=1), nl=nl, space=False)),
    )
    model = "local-qwen"  # bare name = OpenAI-compatible
    result = await Runner.run(openai_agent(vendor, monkeypatch, key=None, tools=[weather, clock], model=model), "go")
    assert result.output == "ok"
    msgs = vendor.posts()[1].json["messages"]
    assert vendor.posts()[0].json["model"] == "local-qwen"
    calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msgs[2]["tool_calls"]]
    assert calls == [("call_0", "weather", {"city": "Lima"}), ("call_1", "clock", {"zone": "PET"})]
    assert [(m["tool_call_id"], m["content"]) for m in msgs[3:]] == [
        ("call_0", "sunny in Lima"),
        ("call_1", "noon in PET"),
    ]
    assert result.usage == Usage(input_tokens=150, output_tokens=13)


async def test_openai_tool_calls_without_index_or_id(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that sends two complete calls in one delta, with neither ``index`` nor ``id``."""
    first = [
        chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"type": "function", "function": {"name": "weather", "arguments": '{"city": "Kyiv"}'}},
                    {"type": "function", "function": {"name": "clock", "arguments": '{"zone": "EET"}'}},
                ],
            }
        ),
        chunk({}, "tool_calls", usage=oa_usage(10, 10)),
    ]
    vendor.add(sse_reply(sse_lines(first)), sse_reply(sse_lines(oa_text("ok"))))
    events, result = await collect(Runner.stream(openai_agent(vendor, monkeypatch, tools=[weather, clock]), "go"))
    outputs = sorted(e.output for e in events if isinstance(e, ev_mod.ToolCallCompleted))
    assert outputs == ["noon in EET", "sunny in Kyiv"]
    msgs = vendor.posts()[1].json["messages"]
    ids = [c["id"] for c in msgs[2]["tool_calls"]]
    assert len(set(ids)) == 2 and [m["tool_call_id"] for m in msgs[3:]] == ids


async def test_openai_tool_call_id_repeated_on_every_fragment(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some gateways repeat ``id`` (and even ``name``) on every fragment and omit ``index``."""
    first = [chunk({"role": "assistant"})]
    for piece in ('{"city"', ': "Pa', 'ris"}'):
        first.append(
            chunk(
                {
                    "tool_calls": [
                        {"id": "call_rep", "type": "function", "function": {"name": "weather", "arguments": piece}}
                    ]
                }
            )
        )
    first += [chunk({}, "tool_calls"), chunk(no_choices=True, usage=oa_usage(5, 5))]
    vendor.add(sse_reply(sse_lines(first)), sse_reply(sse_lines(oa_text("ok"))))
    result = await Runner.run(openai_agent(vendor, monkeypatch, tools=[weather]), "go")
    assert result.output == "ok"
    msgs = vendor.posts()[1].json["messages"]
    assert msgs[2]["tool_calls"] == [
        {"id": "call_rep", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
    ]
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_rep", "content": "sunny in Paris"}


async def test_openai_keyless_compatible_endpoint(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(sse_reply(sse_lines(oa_text("no key needed"))))
    result = await Runner.run(openai_agent(vendor, monkeypatch, key=None), "hi")
    assert result.output == "no key needed"
    assert "authorization" not in vendor.posts()[0].headers


@pytest.mark.parametrize("prefix", ["openai:", "oai:", "openai-chat:", ""])
async def test_openai_model_string_aliases(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    vendor.add(sse_reply(sse_lines(oa_text("alias ok"))))
    result = await Runner.run(
        openai_agent(vendor, monkeypatch, model=f"{prefix}qwen2.5:7b" if prefix else "llama3.1"), "hi"
    )
    assert result.output == "alias ok"
    assert vendor.posts()[0].json["model"] == ("qwen2.5:7b" if prefix else "llama3.1")


async def test_openai_finish_reason_length(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(sse_reply(sse_lines(oa_text("truncat", finish="length"))))
    result = await Runner.run(openai_agent(vendor, monkeypatch), "hi")
    assert result.output == "truncat" and result.finish_reason == "length"


# ============================================================================ OpenAI: settings and structured output


class Forecast(pydantic.BaseModel):
    city: str
    degrees: int


async def test_openai_settings_mapping_on_compatible_host(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_tokens=321,
        stop=["END"],
        parallel_tool_calls=False,
        provider_options={
            "openai": {"seed": 7, "stream_options": None, "top_p": 0.5},
            "openai-chat": {"seed": 8},
            "anthropic": {"top_k": 3},
        },
    )
    vendor.add(sse_reply(sse_lines(oa_text("ok"))))
    await Runner.run(openai_agent(vendor, monkeypatch, tools=[weather], settings=settings), "hi")
    body = vendor.posts()[0].json
    assert body["max_tokens"] == 321 and "max_completion_tokens" not in body
    assert body["temperature"] == 0.2 and body["top_p"] == 0.5
    assert body["stop"] == ["END"]
    assert body["parallel_tool_calls"] is False
    assert body["seed"] == 8  # the later vendor key wins
    assert "stream_options" not in body  # None deletes
    assert "top_k" not in body  # another vendor's options are not sent


async def test_openai_official_dialect_mapping(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = OpenAIChatProvider("gpt-test", base_url=vendor.root, api_key="sk-x", official_dialect=True)
    async with provider:
        vendor.add(sse_reply(sse_lines(oa_text('{"city": "Bern", "degrees": 21}'))))
        agent = Agent(name="o", model=provider, settings=ModelSettings(max_tokens=99), retry=NO_RETRY)
        result = await Runner.run(agent, "weather?", output_type=Forecast)
    body = vendor.posts()[0].json
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
    assert body["response_format"]["type"] == "json_schema"
    assert result.output == Forecast(city="Bern", degrees=21)


async def test_openai_structured_output_prompt_contract_by_default(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor.add(sse_reply(sse_lines(oa_text('Here you go:\n```json\n{"city": "Rome", "degrees": 30}\n```'))))
    result = await Runner.run(openai_agent(vendor, monkeypatch), "forecast", output_type=Forecast)
    assert result.output == Forecast(city="Rome", degrees=30)
    body = vendor.posts()[0].json
    assert "response_format" not in body
    prompt = json.dumps(body["messages"])
    assert "degrees" in prompt  # the schema is described in the prompt instead


async def test_openai_structured_output_native_when_supported(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = OpenAIChatProvider("gpt-test", base_url=vendor.root, supports_json_schema=True)
    try:
        vendor.add(sse_reply(sse_lines(oa_text('{"city": "Oslo", "degrees": -3}'))))
        result = await Runner.run(Agent(name="o", model=provider, retry=NO_RETRY), "forecast", output_type=Forecast)
    finally:
        await provider.aclose()
    assert result.output == Forecast(city="Oslo", degrees=-3)
    fmt = vendor.posts()[0].json["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["degrees"]["type"] == "integer"
    assert isinstance(fmt["json_schema"]["name"], str) and fmt["json_schema"]["name"]


# ============================================================================ errors (both vendors)


OPENAI_ERRORS = [
    (
        400,
        {
            "error": {
                "message": "Invalid 'messages': empty.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": None,
            }
        },
        False,
    ),
    (
        401,
        {
            "error": {
                "message": "Incorrect API key provided: sk-***.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
        False,
    ),
    (
        404,
        {
            "error": {
                "message": "The model `gpt-nope` does not exist",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
        False,
    ),
    (408, {"error": {"message": "Request timed out.", "type": "timeout", "param": None, "code": None}}, True),
    (
        429,
        {
            "error": {
                "message": "Rate limit reached for gpt-test.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        True,
    ),
    (
        500,
        {
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
        True,
    ),
    (
        503,
        {
            "error": {
                "message": "The engine is currently overloaded.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
        True,
    ),
    (529, {"error": {"message": "Overloaded upstream.", "type": "server_error", "param": None, "code": None}}, True),
]


@pytest.mark.parametrize(("status", "body", "retryable"), OPENAI_ERRORS, ids=[str(s) for s, _, _ in OPENAI_ERRORS])
async def test_openai_error_statuses_json(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, status: int, body: Any, retryable: bool
) -> None:
    vendor.add(json_reply(status, body))
    with pytest.raises(ProviderError) as info:
        await Runner.run(openai_agent(vendor, monkeypatch, retry=NO_RETRY), "hi")
    err = info.value
    assert not isinstance(err, ContextOverflowError)
    assert (err.vendor, err.model, err.status_code, err.retryable) == ("openai", "gpt-test", status, retryable)
    assert body["error"]["message"] in str(err)
    assert len(vendor.posts()) == 1


ANTHROPIC_ERRORS = [
    (400, "invalid_request_error", "messages: roles must alternate", False),
    (401, "authentication_error", "invalid x-api-key", False),
    (403, "permission_error", "Your API key does not have permission", False),
    (404, "not_found_error", "model: claude-nope", False),
    (408, "timeout_error", "Request timed out", True),
    (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", True),
    (500, "api_error", "An unexpected error has occurred internal to Anthropic's systems.", True),
    (503, "api_error", "Service unavailable", True),
    (529, "overloaded_error", "Overloaded", True),
]


@pytest.mark.parametrize(
    ("status", "kind", "message", "retryable"), ANTHROPIC_ERRORS, ids=[str(s) for s, *_ in ANTHROPIC_ERRORS]
)
async def test_anthropic_error_statuses_json(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, status: int, kind: str, message: str, retryable: bool
) -> None:
    vendor.add(
        json_reply(status, {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011"})
    )
    with pytest.raises(ProviderError) as info:
        await Runner.run(anthropic_agent(vendor, monkeypatch, retry=NO_RETRY), "hi")
    err = info.value
    assert (err.vendor, err.model, err.status_code, err.retryable) == ("anthropic", "claude-test", status, retryable)
    assert message in str(err)


@pytest.mark.parametrize("which", ["openai", "anthropic"])
@pytest.mark.parametrize(("status", "retryable"), [(502, True), (503, True), (404, False), (401, False)])
async def test_html_error_bodies_are_readable(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, which: str, status: int, retryable: bool
) -> None:
    vendor.add(Canned(status, "text/html", [HTML_502], chunked=False))
    agent = (openai_agent if which == "openai" else anthropic_agent)(vendor, monkeypatch, retry=NO_RETRY)
    with pytest.raises(ProviderError) as info:
        await Runner.run(agent, "hi")
    err = info.value
    assert err.status_code == status and err.retryable is retryable and err.vendor == which
    assert "502 Bad Gateway" in str(err) and "nginx" in str(err)


async def test_openai_connection_refused_is_retryable(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderError) as info:
        await Runner.run(Agent(name="x", model="openai:gpt-test", retry=NO_RETRY), "hi")
    assert info.value.retryable is True and info.value.status_code is None


async def test_read_timeout_is_retryable(vendor: VendorServer) -> None:
    # The server sends one event and then goes quiet for longer than the read timeout.
    vendor.add(sse_reply(sse_lines([chunk({"content": "x"})], done=False), stall=1.5))
    provider = OpenAIChatProvider("gpt-test", base_url=vendor.root, timeout=0.3)
    try:
        with pytest.raises(ProviderError) as info:
            await Runner.run(Agent(name="x", model=provider, retry=NO_RETRY), "hi")
    finally:
        await provider.aclose()
    assert info.value.retryable is True and "timed out" in str(info.value)


async def test_openai_429_then_success(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(
        json_reply(429, {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}),
        sse_reply(sse_lines(oa_text("second time lucky", prompt=5, completion=3))),
    )
    agent = openai_agent(vendor, monkeypatch, retry=RetryPolicy(backoff_base=0.001))
    events, result = await collect(Runner.stream(agent, "hi"))
    assert result.output == "second time lucky" and result.turns == 1
    assert len(vendor.posts()) == 2 and vendor.posts()[0].json == vendor.posts()[1].json
    assert not any(isinstance(e, ev_mod.OutputDiscarded) for e in events)  # nothing streamed before the 429
    assert result.usage == Usage(input_tokens=5, output_tokens=3)


async def test_anthropic_529_then_success(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(
        json_reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        sse_reply(an_text("fine now")),
    )
    result = await Runner.run(anthropic_agent(vendor, monkeypatch, retry=RetryPolicy(backoff_base=0.001)), "hi")
    assert result.output == "fine now" and len(vendor.posts()) == 2


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked-reset", "close-delimited"])
async def test_openai_stream_cut_midway_restarts_once(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, chunked: bool
) -> None:
    pieces = sse_lines(oa_text("a fairly long answer that gets cut and retried", prompt=20, completion=10))
    vendor.add(sse_reply(pieces, chunked=chunked, cut_after=4), sse_reply(pieces))
    agent = openai_agent(vendor, monkeypatch, retry=RetryPolicy(backoff_base=0.001))
    events, result = await collect(Runner.stream(agent, "hi"))
    kinds = [type(e).__name__ for e in events]
    assert kinds.count("OutputDiscarded") == 1
    assert kinds.index("TextDelta") < kinds.index("OutputDiscarded") < kinds.index("MessageCompleted")
    assert result.output == "a fairly long answer that gets cut and retried"
    assert result.usage == Usage(input_tokens=20, output_tokens=10)  # the cut attempt reported no usage
    assert len(vendor.posts()) == 2
    texts = [e for e in result.entries if isinstance(e, AssistantTextEntry)]
    assert [t.content for t in texts] == ["a fairly long answer that gets cut and retried"]


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked-reset", "close-delimited"])
async def test_anthropic_stream_cut_midway_restarts_once(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, chunked: bool
) -> None:
    pieces = an_text("another long answer, cut then replayed", input_tokens=12, output_tokens=8)
    vendor.add(sse_reply(pieces, chunked=chunked, cut_after=5), sse_reply(pieces))
    events, result = await collect(
        Runner.stream(anthropic_agent(vendor, monkeypatch, retry=RetryPolicy(backoff_base=0.001)), "hi")
    )
    assert [type(e).__name__ for e in events].count("OutputDiscarded") == 1
    assert result.output == "another long answer, cut then replayed"
    assert result.usage == Usage(input_tokens=12, output_tokens=8)


async def test_cut_without_retry_surfaces_retryable_error(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor.add(sse_reply(sse_lines(oa_text("cut here please")), cut_after=3))
    with pytest.raises(ProviderError) as info:
        await Runner.run(openai_agent(vendor, monkeypatch, retry=NO_RETRY), "hi")
    assert info.value.retryable is True and info.value.vendor == "openai"


async def test_anthropic_error_event_mid_stream_then_success(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = [
        an_start(),
        *an_text_block(0, "partial")[:3],
        b'event: error\ndata: {"type": "error", "error": {"details": null, "type": "overloaded_error", "message": '
        b'"Overloaded"}}\n\n',
    ]
    vendor.add(sse_reply(broken), sse_reply(an_text("complete")))
    events, result = await collect(Runner.stream(anthropic_agent(vendor, monkeypatch), "hi"))
    assert result.output == "complete"
    assert [type(e).__name__ for e in events].count("OutputDiscarded") == 1


async def test_anthropic_error_event_not_retryable(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = [
        an_start(),
        b'event: error\ndata: {"type": "error", "error": {"type": "invalid_request_error", "message": "bad '
        b'thing"}}\n\n',
    ]
    vendor.add(sse_reply(broken))
    with pytest.raises(ProviderError) as info:
        await Runner.run(anthropic_agent(vendor, monkeypatch), "hi")
    assert info.value.retryable is False and "bad thing" in str(info.value)
    assert len(vendor.posts()) == 1


async def test_openai_error_chunk_mid_stream(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenRouter-style: an error object inside a 200 stream, with a numeric code."""
    pieces = sse_lines(
        [
            chunk({"content": "par"}),
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "error": {"code": 502, "message": "Upstream provider went away"},
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
            },
        ],
        done=False,
    )
    vendor.add(sse_reply(pieces), sse_reply(sse_lines(oa_text("recovered"))))
    events, result = await collect(Runner.stream(openai_agent(vendor, monkeypatch), "hi"))
    assert result.output == "recovered"
    assert [type(e).__name__ for e in events].count("OutputDiscarded") == 1


# ============================================================================ context overflow


OPENAI_OVERFLOWS = [
    (
        "openai",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "130512 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        128000,
    ),
    (
        "vllm",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (5000 "
            "in the messages, 120 in the completion). Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        4096,
    ),
    (
        "llama.cpp",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
        8192,
    ),
    (
        "openai-no-number",
        400,
        {
            "error": {
                "message": "Input is too long.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
        None,
    ),
]


@pytest.mark.parametrize(("label", "status", "body", "window"), OPENAI_OVERFLOWS, ids=[o[0] for o in OPENAI_OVERFLOWS])
async def test_openai_context_overflow_shapes(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, label: str, status: int, body: Any, window: int | None
) -> None:
    vendor.add(json_reply(status, body), json_reply(status, body))
    with pytest.raises(ContextOverflowError) as info:
        await Runner.run(openai_agent(vendor, monkeypatch), "a long prompt")
    assert info.value.reported_window == window
    assert info.value.vendor == "openai" and info.value.model == "gpt-test"


ANTHROPIC_OVERFLOWS = [
    (
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 208123 tokens > 200000 maximum"},
        },
        200000,
    ),
    (
        413,
        {
            "type": "error",
            "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."},
        },
        None,
    ),
]


@pytest.mark.parametrize(("status", "body", "window"), ANTHROPIC_OVERFLOWS, ids=["too-long", "too-large"])
async def test_anthropic_context_overflow_shapes(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, status: int, body: Any, window: int | None
) -> None:
    vendor.add(json_reply(status, body), json_reply(status, body))
    with pytest.raises(ContextOverflowError) as info:
        await Runner.run(anthropic_agent(vendor, monkeypatch), "a long prompt")
    assert info.value.reported_window == window
    assert info.value.vendor == "anthropic"


# ============================================================================ Anthropic: happy paths


async def test_anthropic_text_thinking_usage_and_headers(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = [
        an_start(input_tokens=7, cache_read=1500, cache_write=300),
        ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "The user wants "}),
        ev("ping"),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "a greeting."}),
        ev("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "EqQBCkgIARABGAIiQL"}),
        ev("content_block_stop", index=0),
        *an_text_block(1, "Hi there, friend."),
        *an_end("end_turn", 42),
    ]
    vendor.add(sse_reply(pieces))
    events, result = await collect(Runner.stream(anthropic_agent(vendor, monkeypatch), "greet me"))
    assert result.output == "Hi there, friend."
    assert "".join(e.delta for e in events if isinstance(e, ev_mod.ReasoningDelta)) == "The user wants a greeting."
    assert result.finish_reason == "end_turn"
    assert result.usage == Usage(input_tokens=1807, output_tokens=42, cache_read_tokens=1500, cache_write_tokens=300)
    (thinking,) = [e for e in result.entries if isinstance(e, ReasoningEntry)]
    assert (
        thinking.content == "The user wants a greeting." and thinking.metadata.get("signature") == "EqQBCkgIARABGAIiQL"
    )
    (req,) = vendor.posts()
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-outsider"
    assert req.headers["anthropic-version"] == "2023-06-01"
    body = req.json
    assert body["model"] == "claude-test" and body["stream"] is True
    assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
    assert body["system"] in ("answer briefly", [{"type": "text", "text": "answer briefly"}])
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "greet me"}]}] or body[
        "messages"
    ] == [{"role": "user", "content": "greet me"}]


async def test_anthropic_tool_round_trip_with_thinking_replayed(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = [
        an_start(input_tokens=300, cache_read=0, cache_write=0),
        ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Two lookups."}),
        ev("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig-1"}),
        ev("content_block_stop", index=0),
        *an_text_block(1, "Checking."),
        ev(
            "content_block_start",
            index=2,
            content_block={"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {}},
        ),
        ev("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": ""}),
        ev("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": '{"city": "Na'}),
        ev(
            "content_block_start",
            index=3,
            content_block={"type": "tool_use", "id": "toolu_01B", "name": "clock", "input": {}},
        ),
        ev("content_block_delta", index=3, delta={"type": "input_json_delta", "partial_json": '{"zone":'}),
        ev("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": 'irobi"}'}),
        ev("content_block_stop", index=2),
        ev("content_block_delta", index=3, delta={"type": "input_json_delta", "partial_json": ' "EAT"}'}),
        ev("content_block_stop", index=3),
        *an_end("tool_use", 80),
    ]
    vendor.add(
        sse_reply(first), sse_reply(an_text("Nairobi: sunny, noon.", input_tokens=20, cache_read=400, output_tokens=6))
    )
    settings = ModelSettings(provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2000}}})
    result = await Runner.run(
        anthropic_agent(vendor, monkeypatch, tools=[weather, clock], settings=settings), "Nairobi?"
    )
    assert result.output == "Nairobi: sunny, noon."
    assert result.usage == Usage(input_tokens=720, output_tokens=86, cache_read_tokens=400)
    r1, r2 = vendor.posts()
    tools = {t["name"]: t for t in r1.json["tools"]}
    assert tools["weather"]["description"] == "Current weather for a city."
    assert tools["weather"]["input_schema"]["properties"]["city"]["type"] == "string"
    assert r1.json["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    msgs = r2.json["messages"]
    assert len(msgs) == 3
    assert msgs[1]["role"] == "assistant"
    assert msgs[1]["content"] == [
        {"type": "thinking", "thinking": "Two lookups.", "signature": "sig-1"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {"city": "Nairobi"}},
        {"type": "tool_use", "id": "toolu_01B", "name": "clock", "input": {"zone": "EAT"}},
    ]
    assert msgs[2]["role"] == "user"
    results = {b["tool_use_id"]: b for b in msgs[2]["content"]}
    assert set(results) == {"toolu_01A", "toolu_01B"}
    assert all(b["type"] == "tool_result" and not b.get("is_error") for b in results.values())
    assert results["toolu_01A"]["content"] in ("sunny in Nairobi", [{"type": "text", "text": "sunny in Nairobi"}])


async def test_anthropic_tool_without_arguments_and_no_event_lines(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that drops the ``event:`` lines (only ``data:`` with ``type``) and a no-argument tool."""

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    raw = [
        an_start(),
        ev(
            "content_block_start",
            index=0,
            content_block={"type": "tool_use", "id": "toolu_P", "name": "ping", "input": {}},
        ),
        ev("content_block_stop", index=0),
        *an_end("tool_use", 3),
    ]
    stripped = [b"\n".join(line for line in p.split(b"\n") if not line.startswith(b"event:")) for p in raw]
    vendor.add(sse_reply(stripped), sse_reply(an_text("pong received")))
    result = await Runner.run(anthropic_agent(vendor, monkeypatch, tools=[ping]), "ping it")
    assert result.output == "pong received"
    msgs = vendor.posts()[1].json["messages"]
    assert msgs[1]["content"] == [{"type": "tool_use", "id": "toolu_P", "name": "ping", "input": {}}]
    assert msgs[2]["content"][0]["tool_use_id"] == "toolu_P"


async def test_anthropic_settings_mapping(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ModelSettings(
        temperature=0.1,
        top_p=0.8,
        max_tokens=777,
        stop=["\n\nHuman:", "STOP"],
        parallel_tool_calls=False,
        provider_options={
            "anthropic": {"top_k": 5, "temperature": None, "metadata": {"user_id": "u1"}},
            "claude": {"top_k": 6},
            "openai": {"seed": 1},
        },
    )
    vendor.add(sse_reply(an_text("ok")))
    await Runner.run(anthropic_agent(vendor, monkeypatch, tools=[weather], settings=settings), "hi")
    body = vendor.posts()[0].json
    assert body["max_tokens"] == 777
    assert body["stop_sequences"] == ["\n\nHuman:", "STOP"] and "stop" not in body
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert "parallel_tool_calls" not in body
    assert body["top_p"] == 0.8 and "temperature" not in body
    assert body["top_k"] == 6 and body["metadata"] == {"user_id": "u1"} and "seed" not in body


async def test_anthropic_keyless_and_alias(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(sse_reply(an_text("alias ok")))
    result = await Runner.run(anthropic_agent(vendor, monkeypatch, key=None, model="claude:claude-test"), "hi")
    assert result.output == "alias ok"
    assert "x-api-key" not in vendor.posts()[0].headers


async def test_anthropic_structured_output_uses_prompt_contract(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor.add(sse_reply(an_text('{"city": "Lisbon", "degrees": 25}')))
    result = await Runner.run(anthropic_agent(vendor, monkeypatch), "forecast", output_type=Forecast)
    assert result.output == Forecast(city="Lisbon", degrees=25)
    body = vendor.posts()[0].json
    assert "response_format" not in body and "degrees" in json.dumps(body["system"])


async def test_anthropic_max_tokens_and_pause_turn_pass_through(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor.add(sse_reply(an_text("cut", stop="max_tokens")))
    result = await Runner.run(anthropic_agent(vendor, monkeypatch), "hi")
    assert result.finish_reason == "max_tokens" and result.output == "cut"


# ============================================================================ model strings, env, registry, ownership


async def test_model_from_env_anthropic(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_MODEL", "anthropic:claude-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.root)
    vendor.add(sse_reply(an_text("from env")))
    result = await Runner.run(Agent(name="e", model=model_from_env(), retry=NO_RETRY), "hi")
    assert result.output == "from env" and vendor.posts()[0].path == "/v1/messages"


async def test_model_from_env_openai_and_missing(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError):
        model_from_env()
    assert model_from_env(required=False) is None
    monkeypatch.setenv("LOVIA_MODEL", "openai:gpt-test")
    monkeypatch.setenv("OPENAI_BASE_URL", vendor.root)
    vendor.add(sse_reply(sse_lines(oa_text("env openai"))))
    result = await Runner.run(Agent(name="e", model=model_from_env(), retry=NO_RETRY), "hi")
    assert result.output == "env openai"


async def test_unknown_prefix_is_a_user_error() -> None:
    with pytest.raises(UserError):
        await Runner.run(Agent(name="e", model="nosuchvendor:thing", retry=NO_RETRY), "hi")


async def test_register_provider_and_run_owned_close(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    closed: list[Any] = []

    class Tracked(OpenAIChatProvider):
        async def aclose(self) -> None:
            closed.append(self)
            await super().aclose()

    def factory(model: str, **kw: Any) -> Tracked:
        provider = Tracked(model, base_url=vendor.root, **kw)
        built.append(provider)
        return provider

    register_provider("outsidergw", factory)
    vendor.add(sse_reply(sse_lines(oa_text("gateway ok"))), sse_reply(sse_lines(oa_text("gateway again"))))
    result = await Runner.run(Agent(name="g", model="outsidergw:team/big", retry=NO_RETRY), "hi")
    assert result.output == "gateway ok"
    assert vendor.posts()[0].json["model"] == "team/big"
    assert len(built) == 1 and closed == built  # built from a string: closed by the run

    mine = Tracked("gpt-test", base_url=vendor.root)
    result = await Runner.run(Agent(name="g", model=mine, retry=NO_RETRY), "hi")
    assert result.output == "gateway again" and mine not in closed  # caller-owned: left open
    await mine.aclose()


async def test_run_owned_provider_closed_after_failure(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    class Tracked(AnthropicProvider):
        async def aclose(self) -> None:
            closed.append(self.model)
            await super().aclose()

    register_provider("outsiderfail", lambda model, **kw: Tracked(model, base_url=vendor.root, **kw))
    vendor.add(json_reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "nope"}}))
    with pytest.raises(ProviderError):
        await Runner.run(Agent(name="g", model="outsiderfail:claude-x", retry=NO_RETRY), "hi")
    assert closed == ["claude-x"]


# ============================================================================ more real-server habits


async def test_openai_azure_style_prefilter_chunk_and_usage_on_every_chunk(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Azure opens with a ``choices: []`` chunk carrying filter results; vLLM with continuous usage
    stats repeats a cumulative ``usage`` on every chunk (the last one counts)."""
    objs = [
        {
            "id": "",
            "object": "",
            "created": 0,
            "model": "",
            "choices": [],
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
        },
        chunk(
            {"role": "assistant", "content": "a"}, usage={"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}
        ),
        chunk({"content": "b"}, usage={"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10}),
        chunk({}, "stop", usage={"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11}),
    ]
    vendor.add(sse_reply(sse_lines(objs)))
    result = await Runner.run(openai_agent(vendor, monkeypatch), "hi")
    assert result.output == "ab" and result.usage == Usage(input_tokens=8, output_tokens=3)


async def test_openai_finish_without_done_is_complete(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(sse_reply(sse_lines(oa_text("no done marker"), done=False)))
    result = await Runner.run(openai_agent(vendor, monkeypatch, retry=NO_RETRY), "hi")
    assert result.output == "no done marker" and len(vendor.posts()) == 1


async def test_openai_reasoning_replayed_on_compatible_tool_turn(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeepSeek-style servers want the turn's ``reasoning_content`` back next to its tool calls."""
    first = [
        chunk({"role": "assistant", "content": None, "reasoning_content": "look it up"}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_d",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Baku"}'},
                    }
                ]
            }
        ),
        chunk({}, "tool_calls", usage=oa_usage(10, 10)),
    ]
    vendor.add(sse_reply(sse_lines(first)), sse_reply(sse_lines(oa_text("ok"))))
    await Runner.run(openai_agent(vendor, monkeypatch, tools=[weather], model="openai:deepseek-reasoner"), "go")
    assistant = vendor.posts()[1].json["messages"][2]
    assert assistant["reasoning_content"] == "look it up" and assistant["tool_calls"][0]["id"] == "call_d"


async def test_openai_server_ignoring_stream_flag(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some proxies answer ``stream: true`` with one plain JSON completion."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "plain json answer"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7},
    }
    vendor.add(json_reply(200, body))
    result = await Runner.run(openai_agent(vendor, monkeypatch, retry=NO_RETRY), "hi")
    assert result.output == "plain json answer" and result.usage == Usage(input_tokens=4, output_tokens=3)


async def test_anthropic_input_plus_max_tokens_overflow(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anthropic's other overflow wording: input + max_tokens above the context limit."""
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 195000 + 16384 > 200000, decrease input "
            "length or `max_tokens` and try again",
        },
    }
    vendor.add(json_reply(400, body), json_reply(400, body))
    with pytest.raises(ContextOverflowError) as info:
        await Runner.run(anthropic_agent(vendor, monkeypatch), "a long prompt")
    assert info.value.reported_window == 200000


async def test_anthropic_cumulative_usage_in_message_delta(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newer API versions repeat the (cumulative) input/cache counts in ``message_delta``."""
    pieces = [
        an_start(input_tokens=5, cache_read=50, cache_write=0),
        *an_text_block(0, "ok"),
        ev(
            "message_delta",
            delta={"stop_reason": "end_turn", "stop_sequence": None},
            usage={
                "input_tokens": 5,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 50,
                "output_tokens": 12,
            },
        ),
        ev("message_stop"),
    ]
    vendor.add(sse_reply(pieces))
    result = await Runner.run(anthropic_agent(vendor, monkeypatch), "hi")
    assert result.usage == Usage(input_tokens=55, output_tokens=12, cache_read_tokens=50)


async def test_anthropic_redacted_thinking_round_trips(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    first = [
        an_start(),
        ev("content_block_start", index=0, content_block={"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}),
        ev("content_block_stop", index=0),
        ev(
            "content_block_start",
            index=1,
            content_block={"type": "tool_use", "id": "toolu_R", "name": "weather", "input": {}},
        ),
        ev("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": '{"city": "Riga"}'}),
        ev("content_block_stop", index=1),
        *an_end("tool_use", 4),
    ]
    vendor.add(sse_reply(first), sse_reply(an_text("done")))
    settings = ModelSettings(provider_options={"claude": {"thinking": {"type": "enabled", "budget_tokens": 1024}}})
    await Runner.run(anthropic_agent(vendor, monkeypatch, tools=[weather], settings=settings), "go")
    content = vendor.posts()[1].json["messages"][1]["content"]
    assert content[0] == {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}
    assert content[1]["type"] == "tool_use" and content[1]["input"] == {"city": "Riga"}


async def test_anthropic_404_hint_names_the_v1_convention(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor.add(json_reply(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not Found"}}))
    with pytest.raises(ProviderError) as info:
        await Runner.run(anthropic_agent(vendor, monkeypatch, retry=NO_RETRY), "hi")
    assert info.value.status_code == 404 and "/v1" in (info.value.hint or "")


async def test_openai_non_streamed_tool_call_reply(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    body = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_j1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": "Quito"}'},
                        },
                        {
                            "id": "call_j2",
                            "type": "function",
                            "function": {"name": "clock", "arguments": '{"zone": "ECT"}'},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7},
    }
    vendor.add(json_reply(200, body), sse_reply(sse_lines(oa_text("ok"))))
    result = await Runner.run(openai_agent(vendor, monkeypatch, tools=[weather, clock], retry=NO_RETRY), "hi")
    assert result.output == "ok"
    msgs = vendor.posts()[1].json["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in msgs[3:]] == [
        ("call_j1", "sunny in Quito"),
        ("call_j2", "noon in ECT"),
    ]


@pytest.mark.parametrize(
    ("status", "body", "needle", "retryable"),
    [
        (404, {"error": 'model "qwen9" not found, try pulling it first'}, "try pulling it first", False),  # Ollama
        (
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            "Loading model",
            True,
        ),  # llama.cpp
        (
            400,
            {
                "object": "error",
                "message": "[{'type': 'missing', 'loc': ('body', 'messages')}]",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            "missing",
            False,
        ),  # vLLM
    ],
    ids=["ollama", "llama.cpp", "vllm"],
)
async def test_openai_compatible_error_shapes(
    vendor: VendorServer, monkeypatch: pytest.MonkeyPatch, status: int, body: Any, needle: str, retryable: bool
) -> None:
    vendor.add(json_reply(status, body))
    with pytest.raises(ProviderError) as info:
        await Runner.run(openai_agent(vendor, monkeypatch, key=None, retry=NO_RETRY, model="qwen9"), "hi")
    assert info.value.status_code == status and info.value.retryable is retryable and needle in str(info.value)


async def test_anthropic_cache_system_breakpoints(vendor: VendorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.add(sse_reply(an_text("ok", cache_write=900)))
    settings = ModelSettings(provider_options={"anthropic": {"cache_system": True}})
    result = await Runner.run(anthropic_agent(vendor, monkeypatch, tools=[weather, clock], settings=settings), "hi")
    body = vendor.posts()[0].json
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_system" not in body
    assert result.usage.cache_write_tokens == 900 and result.usage.input_tokens == 925
