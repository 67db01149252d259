"""A chat's first ``text_delta`` frame leaves the server as soon as the model's first token
arrives, even when the model sends a long answer in one burst."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from lovia import Agent
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.web import create_app
from tests.providers.servers import FakeServer, Reply, openai_chunk, openai_stream, openai_text_stream

from .helpers import ThreadServer

TOKENS = 2_000


class HeldTail(list[bytes]):
    """A reply body written as ``burst``, then, once ``release`` is set (or 30 s passed), ``tail``."""

    def __init__(self, burst: bytes, tail: bytes) -> None:
        super().__init__([burst, tail])
        self.release = threading.Event()
        self.tail_sent = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        yield self[0]
        self.release.wait(30)
        self.tail_sent.set()
        yield self[1]


def _answer() -> HeldTail:
    tokens = [openai_chunk({"role": "assistant", "content": ""})]
    tokens += [openai_chunk({"content": f"w{i} "}) for i in range(TOKENS)]
    tail = [openai_chunk({}, finish_reason="stop"), openai_chunk(usage={"prompt_tokens": 3, "completion_tokens": 9})]
    return HeldTail(openai_stream(tokens, done=False), openai_stream(tail))


def _streamed_so_far(app: Any) -> int:
    """How many ``text_delta`` frames the chat's live run has handed to its streams."""
    runs = app.state.deps.supervisor.live_runs
    return sum(1 for item in runs[0].buffer if item.get("event") == "text_delta") if runs else -1


class FirstFrameProbe:
    """The app, noting how many ``text_delta`` frames its run had produced when the response
    wrote its first one to the socket (``None`` until then)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state
        self.produced_at_first_write: int | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def noting(message: Any) -> None:
            body = message.get("body", b"") if message.get("type") == "http.response.body" else b""
            if self.produced_at_first_write is None and b"event: text_delta" in body:
                self.produced_at_first_write = _streamed_so_far(self.app)
            await send(message)

        await self.app(scope, receive, noting)


def test_the_first_frame_of_a_burst_is_written_before_the_burst_is_parsed(tmp_path: Path) -> None:
    """The model sends 2,000 tokens at once and holds the end of its stream until the client has
    the first frame. A server that parses what it has read before writing anything writes its
    first frame only once a whole read (hundreds of tokens) is through; this one writes it after
    the first few tokens."""
    body = _answer()
    with FakeServer() as fake:
        fake.enqueue(Reply(chunks=body, headers={"Content-Type": "text/event-stream"}))
        fake.responder = lambda _request: Reply.sse(openai_text_stream("A title"))  # a title, if one is asked
        model = OpenAIChatProvider("fake-model", base_url=fake.base_url, api_key="sk-test")
        app = FirstFrameProbe(create_app(Agent(name="bot", model=model), db_path=tmp_path / "w.db"))
        deltas: list[str] = []
        names: list[str] = []
        with (
            ThreadServer(app) as srv,
            httpx.stream("POST", f"{srv.url}/api/chat/stream", json={"message": "talk"}, timeout=60) as reply,
        ):
            assert reply.status_code == 200
            event = ""
            for line in reply.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    names.append(event)
                elif line.startswith("data: ") and event == "text_delta":
                    if not deltas:
                        assert not body.tail_sent.is_set(), "the first frame waited for the model's stream to end"
                        body.release.set()
                    deltas.append(json.loads(line[6:])["delta"])
    produced = app.produced_at_first_write
    assert produced is not None and 1 <= produced <= 20, f"{produced} frames were made before the first was written"
    assert deltas[0] == "w0 "
    assert "".join(deltas) == "".join(f"w{i} " for i in range(TOKENS))
    assert names[-1] == "done"
