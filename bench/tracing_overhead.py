"""What tracing costs per step: the same scripted runs with tracing off and with OpenTelemetry on.

A run is "one tool call, then a final answer": three steps (two model calls, one tool call) and
six spans when traced (run, two turns, two model calls, one tool call). Tracing off is the
default ``NoopTracer``. Tracing on is ``OpenTelemetryTracer`` over the real SDK
``TracerProvider`` with a ``SimpleSpanProcessor`` and an exporter that drops spans
(``--exporter noop``, the default) or keeps them in memory (``--exporter memory``, cleared between
repetitions), so what is measured is creating, attributing and ending spans, not network I/O.

Three profiles: ``minimal`` scripts a 10-character answer one character per delta (the smallest
step the loop can take, as in ``loop_overhead.py``); ``streamed`` scripts a short paragraph in
~70 word-sized chunks; ``http`` talks to a local OpenAI-compatible server (a subprocess of this
script, ``--serve``) through ``OpenAIChatProvider``: the real adapter's request building, HTTP
and SSE parsing, which is what a step costs the client with a real endpoint (minus the network).

The clock is CPU time of this process (``time.process_time``): on a shared machine, time spent
waiting for a core is not the loop's. Repetitions alternate off/on so drift hits both alike.
Printed per profile: the median CPU time per run and per step for both, and the ratio on/off of
the medians (and of the minima). ``--check`` exits 1 when the ``http`` ratio exceeds ``--limit``.

    .venv/bin/python bench/tracing_overhead.py
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, Runner, tool
from lovia.messages import Usage
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.testing import ScriptedProvider, ScriptedTurn, call, text
from lovia.tracing import OpenTelemetryTracer
from lovia.transcript import FinishDelta, TextDelta, UsageDelta

STEPS_PER_RUN = 3  # two model calls and one tool call
ANSWER = (
    "Two plus three is five. Addition combines two quantities into one total, so taking two items and then "
    "three more gives five items in all. You can check it by counting up from two: three, four, five. The "
    "add tool agrees, which is a nice sanity check for such a small sum, and the result is the same in any "
    "number base larger than five, because the digits involved never need a carry."
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class DropExporter(SpanExporter):
    """Accepts and discards spans."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _answer_turn(profile: str) -> ScriptedTurn:
    if profile == "minimal":
        return text("2 + 3 = 5.")
    words = ANSWER.split(" ")
    chunks = [TextDelta(w + " ") for w in words]
    return ScriptedTurn((*chunks, UsageDelta(Usage(input_tokens=60, output_tokens=len(words))), FinishDelta("stop")))


# --------------------------------------------------------------------------- the local endpoint


def _sse(chunks: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    out: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": choices,
    }
    if usage is not None:
        out["usage"] = usage
    return out


TOOL_REPLY = _sse(
    [
        _chunk({"role": "assistant", "content": None}),
        _chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": ""}}
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 2, '}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"b": 3}'}}]}),
        _chunk({}, finish="tool_calls"),
        _chunk(usage={"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}),
    ]
)
TEXT_REPLY = _sse(
    [_chunk({"role": "assistant", "content": ""})]
    + [_chunk({"content": w + " "}) for w in ANSWER.split(" ")]
    + [_chunk({}, finish="stop"), _chunk(usage={"prompt_tokens": 70, "completion_tokens": 70, "total_tokens": 140})]
)


class _Endpoint(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered = any(m.get("role") == "tool" for m in body.get("messages", []))
        payload = TEXT_REPLY if answered else TOOL_REPLY
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _serve() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    return 0


# --------------------------------------------------------------------------- timing


def _model(profile: str, base_url: str | None, client: Any) -> Any:
    if profile == "http":
        return OpenAIChatProvider("bench", api_key="x", base_url=base_url, client=client)
    return ScriptedProvider([call("add", {"a": 2, "b": 3}), _answer_turn(profile)])


async def _runs(n: int, tracer: Any, profile: str, base_url: str | None = None, client: Any = None) -> float:
    """CPU seconds per run."""
    start = time.process_time()
    for _ in range(n):
        agent = Agent(name="calc", model=_model(profile, base_url, client), tools=[add])
        await Runner.run(agent, "What is 2 + 3?", tracer=tracer)
    return (time.process_time() - start) / n


async def _measure(runs: int, repeats: int, exporter_kind: str, profile: str) -> tuple[list[float], list[float], int]:
    if profile != "http":
        return await _measure_with(runs, repeats, exporter_kind, profile, None, None)
    import httpx

    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
        async with httpx.AsyncClient(timeout=30) as client:
            return await _measure_with(runs, repeats, exporter_kind, profile, base_url, client)
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


async def _measure_with(
    runs: int, repeats: int, exporter_kind: str, profile: str, base_url: str | None, client: Any
) -> tuple[list[float], list[float], int]:
    exporter: SpanExporter = InMemorySpanExporter() if exporter_kind == "memory" else DropExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    await _runs(max(10, runs // 10), None, profile, base_url, client)  # warm up both paths
    await _runs(max(10, runs // 10), tracer, profile, base_url, client)
    off: list[float] = []
    on: list[float] = []
    spans = 0
    for _ in range(repeats):
        gc.collect()
        off.append(await _runs(runs, None, profile, base_url, client))
        gc.collect()
        on.append(await _runs(runs, tracer, profile, base_url, client))
        if isinstance(exporter, InMemorySpanExporter):
            spans = len(exporter.get_finished_spans()) // runs
            exporter.clear()
    provider.shutdown()
    return off, on, spans


def _report(profile: str, off: list[float], on: list[float], spans: int, limit: float) -> float:
    off_med, on_med = statistics.median(off), statistics.median(on)
    ratio = on_med / off_med
    print(f"profile {profile}:")
    for label, values, med in (("off", off, off_med), ("on ", on, on_med)):
        low, high = min(values) * 1e3, max(values) * 1e3
        print(f"  {label}: {med * 1e3:.3f} ms/run  {med / STEPS_PER_RUN * 1e3:.3f} ms/step  [{low:.3f}-{high:.3f}]")
    if spans:
        print(f"  spans per run: {spans}")
    print(
        f"  ratio on/off: {ratio:.3f} ({(ratio - 1) * 100:+.1f}% per step;"
        f" min/min {min(on) / min(off):.3f}; limit {(limit - 1) * 100:.0f}%)"
    )
    return ratio


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="runs per repetition (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=7, help="repetitions of each mode (default %(default)s)")
    parser.add_argument("--exporter", choices=["noop", "memory"], default="noop")
    parser.add_argument("--profile", choices=["minimal", "streamed", "http", "all"], default="all")
    parser.add_argument("--check", action="store_true", help="exit 1 when the http ratio exceeds --limit")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=float, default=1.15)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve()
    print(f"tracing overhead: {args.runs} runs x {args.repeats} repetitions, exporter={args.exporter}, CPU time")
    ratios: dict[str, float] = {}
    for profile in ("minimal", "streamed", "http") if args.profile == "all" else (args.profile,):
        off, on, spans = asyncio.run(_measure(args.runs, args.repeats, args.exporter, profile))
        ratios[profile] = _report(profile, off, on, spans, args.limit)
    checked = ratios.get("http", max(ratios.values()))
    return 1 if args.check and checked > args.limit else 0


if __name__ == "__main__":
    sys.exit(main())
