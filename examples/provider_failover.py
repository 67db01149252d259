"""Two vendors behind one agent: the primary is overloaded, the secondary answers.

Runs offline: a small HTTP server on 127.0.0.1 plays both vendors. The "OpenAI-compatible"
primary answers every request with HTTP 503; the "Gemini" secondary streams a real
``streamGenerateContent?alt=sse`` answer. A ``FailoverProvider`` tries the primary three times,
switches, and the run prints the ``ProviderFailedOver`` event and the answer:

    $ python examples/provider_failover.py
    primary calls: 3, then failed over: openai-chat:big-model -> gemini:gemini-2.5-flash
    answer: 'Hello from the secondary.'
    a second run goes straight to the secondary (primary calls still 3)
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lovia import Agent, Runner
from lovia.events import ProviderFailedOver
from lovia.providers import FailoverProvider, GeminiProvider, OpenAIChatProvider
from lovia.reliability import RetryPolicy

CALLS = {"primary": 0, "secondary": 0}


class TwoVendors(BaseHTTPRequestHandler):
    """``/v1/...`` is the overloaded primary, ``/v1beta/...`` the Gemini secondary."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/v1/"):
            CALLS["primary"] += 1
            body = json.dumps({"error": {"message": "overloaded", "type": "server_error"}}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        CALLS["secondary"] += 1
        chunks = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello from "}]}}]},
            {
                "candidates": [
                    {"content": {"role": "model", "parts": [{"text": "the secondary."}]}, "finishReason": "STOP"}
                ],
                "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14},
            },
        ]
        body = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), TwoVendors)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = f"http://127.0.0.1:{server.server_address[1]}"
    primary = OpenAIChatProvider("big-model", base_url=f"{root}/v1")
    secondary = GeminiProvider("gemini-2.5-flash", base_url=root, api_key="demo-key")
    async with FailoverProvider([primary, secondary], attempts=3, backoff=0.05) as model:
        agent = Agent(name="helper", instructions="Be brief.", model=model, retry=RetryPolicy(max_attempts=1))
        handle = Runner.stream(agent, "Say hello.")
        async for event in handle:
            if isinstance(event, ProviderFailedOver):
                print(
                    f"primary calls: {CALLS['primary']}, then failed over: {event.from_provider} -> {event.to_provider}"
                )
        print(f"answer: {(await handle.result()).output!r}")
        await Runner.run(agent, "Again.")
        print(f"a second run goes straight to the secondary (primary calls still {CALLS['primary']})")
    await primary.aclose()
    await secondary.aclose()
    server.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
