"""Stream-parsing cost per event: lovia's adapters against the vendors' own SDK clients.

Needs the ``dev`` extra (``openai``, ``anthropic``, ``google-genai``). From the repository root:

    .venv/bin/python bench/provider_parsing.py            # 7 repetitions
    .venv/bin/python bench/provider_parsing.py --quick    # 3 repetitions, shorter streams

For each wire API (OpenAI chat completions, OpenAI Responses, Anthropic Messages, Gemini
``streamGenerateContent``) one recorded stream is built from the vendor SDK's own types (the same
builders the tests use): a long text answer and a turn of parallel tool calls whose arguments
arrive in small fragments. Both clients get the same bytes from the same in-process
``httpx.MockTransport`` (cut into 1 KiB pieces, like a network read), so the figure is client
work only: HTTP response handling, SSE framing, JSON decoding and turning events into values.

- lovia: ``provider.stream(...)`` consumed to the end (deltas assembled by the adapter).
- SDK: the SDK's raw streaming iterator consumed to the end (``chat.completions.create(stream=
  True)``, ``responses.create(stream=True)``, ``messages.create(stream=True)``,
  ``aio.models.generate_content_stream``), i.e. its lightest streaming path.

A repetition runs each pair back to back; the printed figure is microseconds per event (median
over repetitions, min-max), and the ratio is lovia / SDK per repetition (median [min-max]); below
0.5 meets the target of issue 20. Nothing is subtracted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lovia.providers import (  # noqa: E402
    AnthropicProvider,
    GeminiProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
)
from lovia.transcript import InputEntry  # noqa: E402
from tests.providers.sdk_wire import ResponsesStream, gemini_chunk, gemini_sse  # noqa: E402
from tests.providers.servers import (  # noqa: E402
    anthropic_stream,
    anthropic_text_stream,
    anthropic_tool_stream,
    openai_text_stream,
    openai_tool_stream,
)

PIECE = 1024
ENTRIES = [InputEntry(role="user", content="hi")]


def words(n: int) -> str:
    return "".join(f"w{i % 97} " for i in range(n))


def calls(n: int, size: int) -> list[tuple[str, str, str]]:
    return [(f"call_{i}", "lookup", json.dumps({"query": words(size), "page": i})) for i in range(n)]


def streams(scale: int) -> dict[str, tuple[bytes, int]]:
    """(body, event count) per wire API."""
    text = words(300 * scale)
    tool_calls = calls(4, 40 * scale)
    out: dict[str, tuple[bytes, int]] = {}
    chat = openai_text_stream(text) + openai_tool_stream(tool_calls)
    out["openai-chat"] = (chat, chat.count(b"data: "))
    responses = ResponsesStream().created().message(text, piece=3).calls(tool_calls).completed().body()
    out["openai-responses"] = (responses, responses.count(b"data: "))
    events = anthropic_text_stream(text) + anthropic_tool_stream(tool_calls)
    body = anthropic_stream(events)
    out["anthropic"] = (body, len(events))
    chunks = [gemini_chunk([{"text": text[i : i + 12]}]) for i in range(0, len(text), 12)]
    chunks += [gemini_chunk([{"function_call": {"name": "lookup", "args": json.loads(a)}}]) for _, _, a in tool_calls]
    chunks.append(gemini_chunk([], finish="STOP", usage={"prompt_token_count": 5, "candidates_token_count": 9}))
    out["gemini"] = (gemini_sse(chunks), len(chunks))
    return out


def transport(body: bytes, http: Any = httpx) -> Any:
    """A ``MockTransport`` answering every request with ``body`` in 1 KiB pieces.

    ``http`` is the HTTP package the client comes from: some SDK releases ship their own httpx
    fork (``httpx2``) and refuse the original's objects.
    """

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(body), PIECE):
            yield body[i : i + PIECE]

    def handler(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=pieces())

    return http.MockTransport(handler)


def sdk_client(sdk_factory: Callable[[Any], Any], body: bytes) -> Any:
    """Build an SDK client over ``body``, with whichever httpx package the SDK accepts."""
    try:
        return sdk_factory(httpx.AsyncClient(transport=transport(body)))
    except TypeError:
        import httpx2

        return sdk_factory(httpx2.AsyncClient(transport=transport(body, httpx2)))


async def drain(iterator: Any) -> int:
    n = 0
    async for _ in iterator:
        n += 1
    return n


# --------------------------------------------------------------------------- the pairs


def split_anthropic(body: bytes) -> list[bytes]:
    """Two Messages streams (text turn, tool turn): each client reads one response per call."""
    marker = b"event: message_stop\n"
    first_end = body.index(marker) + body[body.index(marker) :].index(b"\n\n") + 2
    return [body[:first_end], body[first_end:]]


def split_openai_chat(body: bytes) -> list[bytes]:
    done = b"data: [DONE]\n\n"
    first_end = body.index(done) + len(done)
    return [body[:first_end], body[first_end:]]


def pair(api: str, body: bytes) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """(lovia run, SDK run) over the same bytes; each consumes every response once."""
    bodies = (
        split_openai_chat(body) if api == "openai-chat" else split_anthropic(body) if api == "anthropic" else [body]
    )
    clients = [httpx.AsyncClient(transport=transport(b)) for b in bodies]
    if api == "openai-chat":
        ours = [OpenAIChatProvider("m", base_url="http://bench.test/v1", client=c) for c in clients]
    elif api == "openai-responses":
        ours = [OpenAIResponsesProvider("m", base_url="http://bench.test/v1", client=c) for c in clients]
    elif api == "anthropic":
        ours = [AnthropicProvider("m", base_url="http://bench.test/v1", client=c) for c in clients]
    else:
        ours = [GeminiProvider("m", base_url="http://bench.test", client=c) for c in clients]

    async def lovia_run() -> None:
        for provider in ours:
            await drain(provider.stream(ENTRIES))

    if api in ("openai-chat", "openai-responses"):
        import openai

        sdks = [
            sdk_client(
                lambda c: openai.AsyncOpenAI(
                    api_key="k", base_url="http://bench.test/v1", http_client=c, max_retries=0
                ),
                b,
            )
            for b in bodies
        ]

        async def sdk_run() -> None:
            for sdk in sdks:
                if api == "openai-chat":
                    stream = await sdk.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                    )
                else:
                    stream = await sdk.responses.create(model="m", input="hi", stream=True)
                await drain(stream)

    elif api == "anthropic":
        import anthropic

        sdks_a = [
            sdk_client(
                lambda c: anthropic.AsyncAnthropic(
                    api_key="k", base_url="http://bench.test", http_client=c, max_retries=0
                ),
                b,
            )
            for b in bodies
        ]

        async def sdk_run() -> None:
            for sdk in sdks_a:
                stream = await sdk.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}], stream=True
                )
                await drain(stream)

    else:
        from google import genai
        from google.genai import types

        sdk_g = genai.Client(
            api_key="k",
            http_options=types.HttpOptions(
                base_url="http://bench.test", httpx_async_client=httpx.AsyncClient(transport=transport(bodies[0]))
            ),
        )

        async def sdk_run() -> None:
            stream = await sdk_g.aio.models.generate_content_stream(model="m", contents="hi")
            await drain(stream)

    return lovia_run, sdk_run


async def timed(fn: Callable[[], Awaitable[None]], loops: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(loops):
        await fn()
    return (time.perf_counter() - start) / loops


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions, shorter streams")
    args = parser.parse_args(argv)
    repeats, scale, loops = (3, 1, 5) if args.quick else (7, 3, 10)
    print(f"stream parsing, {repeats} repetitions x {loops} calls; us per event, median [min-max]")
    print(f"{'wire API':18} {'events':>7} {'lovia':>22} {'SDK':>22} {'lovia/SDK':>20}")
    worst = 0.0
    for api, (body, events) in streams(scale).items():
        lovia_run, sdk_run = pair(api, body)
        await lovia_run()  # warm both paths (imports, first-call caches)
        await sdk_run()
        ours, theirs, ratios = [], [], []
        for _ in range(repeats):
            a = await timed(lovia_run, loops) / events
            b = await timed(sdk_run, loops) / events
            ours.append(a)
            theirs.append(b)
            ratios.append(a / b)
        ratio = statistics.median(ratios)
        worst = max(worst, ratio)

        def fmt(xs: list[float]) -> str:
            return f"{statistics.median(xs) * 1e6:.2f} [{min(xs) * 1e6:.2f}-{max(xs) * 1e6:.2f}]"

        print(
            f"{api:18} {events:>7} {fmt(ours):>22} {fmt(theirs):>22} "
            f"{ratio:>6.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
        )
    verdict = "PASS" if worst <= 0.5 else "MISS"
    print(f"{verdict}: worst lovia/SDK ratio {worst:.2f} (target <= 0.50)")
    return 0 if worst <= 0.5 else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
