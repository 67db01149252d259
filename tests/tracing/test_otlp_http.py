"""Spans exported over OTLP/HTTP to a real receiver process, then read back from it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from lovia import Agent, Runner, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.tracing import OpenTelemetryTracer

RECEIVER = Path(__file__).with_name("otlp_receiver.py")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
def receiver() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(RECEIVER)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _provider(endpoint: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "lovia-test"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5)))
    return provider


async def test_spans_reach_an_otlp_http_receiver(receiver: str) -> None:
    provider = _provider(f"{receiver}/v1/traces")
    agent = Agent(
        name="calc", model=ScriptedProvider([call("add", {"a": 2, "b": 3}), text("5")], model="m-1"), tools=[add]
    )
    result = await Runner.run(agent, "2+3?", tracer=OpenTelemetryTracer(tracer_provider=provider))
    assert result.output == "5"
    assert provider.force_flush(10_000)
    spans: list[dict[str, Any]] = httpx.get(f"{receiver}/spans", timeout=5).json()
    by_name = {s["name"]: s for s in spans}
    assert set(by_name) >= {"invoke_agent calc", "turn 1", "turn 2", "chat m-1", "execute_tool add"}
    run = by_name["invoke_agent calc"]
    assert run["parent_span_id"] == "" and run["service"] == "lovia-test" and run["scope"] == "lovia"
    assert {s["trace_id"] for s in spans} == {run["trace_id"]}
    tool_span = by_name["execute_tool add"]
    assert tool_span["attributes"]["gen_ai.tool.name"] == "add"
    assert tool_span["parent_span_id"] == by_name["turn 1"]["span_id"]
    chats = [s for s in spans if s["name"] == "chat m-1"]
    assert len(chats) == 2
    assert all(c["kind"] == 3 for c in chats)  # SPAN_KIND_CLIENT
    assert sorted(tuple(c["attributes"]["gen_ai.response.finish_reasons"]) for c in chats) == [
        ("stop",),
        ("tool_calls",),
    ]
    assert all(c["attributes"]["gen_ai.usage.input_tokens"] == 1 for c in chats)
    provider.shutdown()


async def test_an_unreachable_collector_does_not_fail_the_run(receiver: str) -> None:
    provider = _provider(f"{receiver}/wrong/path")  # the receiver answers 404
    agent = Agent(name="calc", model=ScriptedProvider([text("ok")]))
    result = await Runner.run(agent, "hi", tracer=OpenTelemetryTracer(tracer_provider=provider))
    assert result.output == "ok"
    provider.force_flush(10_000)
    assert httpx.get(f"{receiver}/spans", timeout=5).json() == []
    provider.shutdown()
