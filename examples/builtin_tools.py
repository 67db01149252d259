"""Built-in tools against a real local web server: web_fetch, its SSRF refusal, now and ask_human.

Run it: ``python examples/builtin_tools.py`` (offline: the model is scripted, the server is local).

What you see: a page fetched as fenced Markdown; the same server refused when reached through a
redirect to 127.0.0.1 (internal addresses are refused unless the operator allows them); the time
from ``now``; and a question answered by an operator coroutine through a ``HumanChannel``.
"""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lovia import Agent, Runner, events
from lovia.testing import ScriptedProvider, call, text
from lovia.tools import HttpReader, HumanChannel, ask_human, now, web_fetch

PAGE = b"<html><head><title>Release notes</title></head><body><h1>v2</h1><p>Faster <b>resume</b>.</p></body></html>"


class Site(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/notes":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)
        else:  # a redirect into the machine itself
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/notes")
            self.send_header("Content-Length", "0")
            self.end_headers()


async def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://localhost:{server.server_address[1]}"
    channel = HumanChannel()
    model = ScriptedProvider(
        [
            call("web_fetch", {"url": f"{base}/notes"}),
            call("web_fetch", {"url": f"{base}/sneaky"}),
            call("now", {"tz": "UTC"}),
            call("ask_human", {"question": "Publish the summary?", "options": [{"label": "yes"}, {"label": "no"}]}),
            text("Summary published."),
        ]
    )
    # The operator allows this one host; 127.0.0.1 (where the redirect goes) stays refused.
    fetch = web_fetch(HttpReader(allowed_hosts=("localhost",)))
    agent = Agent(name="researcher", model=model, tools=[fetch, now, ask_human(channel)])

    async def operator() -> None:
        async for question in channel.questions():
            print(f"operator asked: {question.question} {[o.label for o in question.options]} -> yes")
            channel.answer(question.id, "yes")

    desk = asyncio.ensure_future(operator())
    handle = Runner.stream(agent, "Summarise the release notes.")
    async for event in handle:
        if isinstance(event, events.ToolCallCompleted):
            print(f"[{event.call.name}] {event.output}\n")
    result = await handle.result()
    channel.close()
    await desk
    server.shutdown()
    server.server_close()
    print("answer:", result.output)


if __name__ == "__main__":
    asyncio.run(main())
