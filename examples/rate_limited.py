"""A rate-limited endpoint: the run waits as long as ``Retry-After`` says, and tells you so.

Offline: a tiny local server speaks the OpenAI chat-completions wire format. Its first answer is
``429 Too Many Requests`` with ``Retry-After: 2``; the second is a streamed reply. The run's
event stream shows ``ModelRetrying`` (attempt, delay, the error) before the retry, the same event
the web page turns into "retrying in 2 s (429)".

    python examples/rate_limited.py
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lovia import Agent, RetryPolicy, Runner, events
from lovia.providers.openai_chat import OpenAIChatProvider


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "local", "choices": []}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(body)}\n\n".encode()


class RateLimitedOnce(BaseHTTPRequestHandler):
    """429 with Retry-After on the first POST, a streamed answer afterwards."""

    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        RateLimitedOnce.calls += 1
        if RateLimitedOnce.calls == 1:
            body = json.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}}).encode()
            self.send_response(429)
            self.send_header("Retry-After", "2")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        stream = _chunk({"role": "assistant", "content": "Thanks for waiting."}) + _chunk({}, "stop")
        stream += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(stream)))
        self.end_headers()
        self.wfile.write(stream)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def main(base_url: str) -> None:
    provider = OpenAIChatProvider("local", api_key="not-needed", base_url=base_url)
    agent = Agent(name="patient", model=provider, retry=RetryPolicy(max_attempts=3, backoff_max=10.0))
    started = time.monotonic()
    async for event in Runner.stream(agent, "hello"):
        if isinstance(event, events.ModelRetrying):
            status = getattr(event.error, "status_code", None)
            print(f"retrying in {event.delay:g} s ({status}) · attempt {event.attempt + 1} of {event.max_attempts}")
        elif isinstance(event, events.RunCompleted):
            waited = time.monotonic() - started
            print(f"answer: {event.result.output!r} after {waited:.0f} s")
    await provider.aclose()


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), RateLimitedOnce)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        asyncio.run(main(f"http://127.0.0.1:{server.server_port}/v1"))
    finally:
        server.shutdown()
