"""The floor of a streamed chat: a bare Starlette + httpx relay, no agent and no storage.

``POST /chat {"message": ...}`` asks an OpenAI-compatible model for a streamed answer and sends
each streamed piece on as an SSE ``text_delta`` frame, then a ``done`` frame: the least any web
server relaying a model's tokens must do (parse the vendor's SSE, decode the JSON, encode a
frame, write it). ``bench/web_load.py`` runs it beside ``lovia web`` as its own process:

    python bench/relay_floor.py --port 8101 --model-url http://127.0.0.1:8100/v1
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route


def build(model_url: str) -> Starlette:
    client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None))

    async def relay(message: str) -> AsyncIterator[bytes]:
        body = {"model": "floor", "stream": True, "messages": [{"role": "user", "content": message}]}
        async with client.stream("POST", f"{model_url}/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices") or [{}]
                piece = (choices[0].get("delta") or {}).get("content")
                if piece:
                    yield f"event: text_delta\ndata: {json.dumps({'delta': piece})}\n\n".encode()
        yield b'event: done\ndata: {"output":null}\n\n'

    async def chat(request: Request) -> StreamingResponse:
        message = (await request.json())["message"]
        return StreamingResponse(relay(message), media_type="text/event-stream")

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-url", required=True, help="the model's base URL, ending in /v1")
    args = parser.parse_args()
    uvicorn.run(build(args.model_url), host="127.0.0.1", port=args.port, log_level="warning")
