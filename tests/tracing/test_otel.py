"""OpenTelemetryTracer against the SDK's in-memory exporter: span tree, gen_ai.* attributes, links."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions
from lovia.exceptions import ProviderError
from lovia.messages import Usage
from lovia.reliability import RetryPolicy
from lovia.stores import SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.tracing import OpenTelemetryTracer, SpanName


@tool
def lookup(city: str) -> str:
    """Look up the weather."""
    return f"sunny in {city}"


@tool
def explode(x: int) -> str:
    """Always fails."""
    raise ValueError("kaboom")


async def _no_sleep(_: float) -> None:
    return None


def _setup(capture_content: bool = False) -> tuple[OpenTelemetryTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryTracer(tracer_provider=provider, capture_content=capture_content), exporter


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return sorted(
        (s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id),
        key=lambda s: s.start_time or 0,
    )


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


async def test_run_with_tools_handoff_and_retry_builds_the_expected_tree() -> None:
    tracer, exporter = _setup()
    specialist = Agent(
        name="specialist",
        model=ScriptedProvider([text("It is sunny.", usage=Usage(30, 5, cache_read_tokens=10))], model="spec-1"),
    )
    triage = Agent(
        name="triage",
        model=ScriptedProvider(
            [
                fail(ProviderError("overloaded", retryable=True, status_code=529)),
                call("lookup", {"city": "Oslo"}, call_id="c1"),
                call("explode", {"x": 1}, call_id="c2"),
                call("transfer_to_specialist", {"reason": "expert"}, call_id="c3"),
            ],
            model="triage-1",
        ),
        tools=[lookup, explode],
        handoffs=[specialist],
    )
    result = await Runner.run(
        triage, "weather in Oslo?", tracer=tracer, retry=RetryPolicy(max_attempts=3, sleep=_no_sleep)
    )
    assert result.output == "It is sunny."
    spans = list(exporter.get_finished_spans())

    run = _one(spans, "invoke_agent triage")
    assert run.parent is None and run.kind == SpanKind.INTERNAL
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "triage"
    assert run.attributes["lovia.run_id"] == result.run_id
    assert run.attributes["lovia.run.turns"] == 4
    assert run.attributes["lovia.run.resumed"] is False

    turns = _children(spans, run)
    assert [t.name for t in turns] == ["turn 1", "turn 2", "turn 3", "turn 4"]

    # Turn 1: a retried model call (two attempts, the first an error) and one tool call.
    t1 = _children(spans, turns[0])
    assert [s.name for s in t1] == ["chat triage-1", "chat triage-1", "execute_tool lookup"]
    failed, ok, tool_span = t1
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes is not None
    assert failed.attributes["error.type"] == "ProviderError"
    assert any(e.name == "exception" for e in failed.events)
    assert ok.status.status_code != StatusCode.ERROR and ok.kind == SpanKind.CLIENT
    assert ok.attributes is not None
    assert ok.attributes["gen_ai.operation.name"] == "chat"
    assert ok.attributes["gen_ai.request.model"] == "triage-1"
    assert ok.attributes["gen_ai.system"] == "scripted"
    assert ok.attributes["gen_ai.provider.name"] == "scripted"
    assert ok.attributes["gen_ai.usage.input_tokens"] == 1
    assert ok.attributes["gen_ai.usage.output_tokens"] == 1
    assert tuple(ok.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "lookup"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c1"
    assert "gen_ai.tool.call.result" not in tool_span.attributes  # content is opt-in

    # Turn 2: the failing tool records its error on its own span only.
    boom = _one(spans, "execute_tool explode")
    assert boom.status.status_code == StatusCode.ERROR and boom.attributes is not None
    assert boom.attributes["error.type"] == "ValueError"
    assert turns[1].status.status_code != StatusCode.ERROR

    # Turn 3: the transfer tool, then the handoff span.
    t3 = [s.name for s in _children(spans, turns[2])]
    assert t3 == ["chat triage-1", "execute_tool transfer_to_specialist", "handoff"]
    handoff = _one(spans, "handoff")
    assert handoff.attributes is not None
    assert handoff.attributes["lovia.handoff.from_agent"] == "triage"
    assert handoff.attributes["lovia.handoff.to_agent"] == "specialist"

    # Turn 4 runs on the specialist's model, with cache tokens.
    spec_call = _children(spans, turns[3])[0]
    assert spec_call.attributes is not None
    assert spec_call.attributes["gen_ai.request.model"] == "spec-1"
    assert spec_call.attributes["gen_ai.usage.cache_read.input_tokens"] == 10
    assert tuple(spec_call.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}  # type: ignore[union-attr]


async def test_agent_as_tool_sub_run_nests_under_the_tool_call() -> None:
    tracer, exporter = _setup()
    helper = Agent(name="helper", model=ScriptedProvider([text("42")]))
    boss = Agent(
        name="boss",
        model=ScriptedProvider([call("ask_helper", {"input": "meaning?"}, call_id="h1"), text("it is 42")]),
        tools=[helper.as_tool()],
    )
    await Runner.run(boss, "ask the helper", tracer=tracer)
    spans = list(exporter.get_finished_spans())
    tool_span = _one(spans, "execute_tool ask_helper")
    child_run = _one(spans, "invoke_agent helper")
    assert child_run.parent is not None and tool_span.context is not None
    assert child_run.parent.span_id == tool_span.context.span_id
    assert child_run.context is not None
    assert child_run.context.trace_id == tool_span.context.trace_id
    assert [s.name for s in _children(spans, child_run)] == ["turn 1"]


async def test_errors_are_recorded_on_the_run_span() -> None:
    tracer, exporter = _setup()
    agent = Agent(name="a", model=ScriptedProvider([fail(ProviderError("bad request", status_code=400))]))
    with pytest.raises(ProviderError):
        await Runner.run(agent, "hi", tracer=tracer)
    run = _one(list(exporter.get_finished_spans()), "invoke_agent a")
    assert run.status.status_code == StatusCode.ERROR and run.attributes is not None
    assert run.attributes["error.type"] == "ProviderError"
    assert len([e for e in run.events if e.name == "exception"]) == 1


async def test_content_is_exported_only_when_opted_in() -> None:
    for capture in (False, True):
        tracer, exporter = _setup(capture_content=capture)
        model = ScriptedProvider([call("lookup", {"city": "Lima"}), text("secret answer")])
        await Runner.run(Agent(name="a", model=model, tools=[lookup]), "hi", tracer=tracer)
        spans = list(exporter.get_finished_spans())
        chat = [s for s in spans if s.name == "chat"][-1]
        tool_span = _one(spans, "execute_tool lookup")
        assert chat.attributes is not None and tool_span.attributes is not None
        assert ("gen_ai.output.messages" in chat.attributes) is capture
        assert ("gen_ai.tool.call.arguments" in tool_span.attributes) is capture
        assert ("gen_ai.tool.call.result" in tool_span.attributes) is capture
        if capture:
            assert chat.attributes["gen_ai.output.messages"] == "secret answer"
            assert tool_span.attributes["gen_ai.tool.call.arguments"] == '{"city": "Lima"}'
            assert tool_span.attributes["gen_ai.tool.call.result"] == "sunny in Lima"


async def test_a_resumed_run_links_to_its_first_attempt(tmp_path: Any) -> None:
    tracer, exporter = _setup()
    cp = SQLiteCheckpointer(str(tmp_path / "cp.db"))
    opts = CheckpointOptions(cp, run_id="order-7")
    first = Agent(
        name="a",
        model=ScriptedProvider([call("lookup", {"city": "Rome"}), fail(ProviderError("gone", status_code=400))]),
        tools=[lookup],
    )
    with pytest.raises(ProviderError):
        await Runner.run(first, "go", tracer=tracer, checkpoint=opts)
    second = Agent(name="a", model=ScriptedProvider([text("done")]), tools=[lookup])
    result = await Runner.run(second, [], tracer=tracer, checkpoint=opts)
    assert result.output == "done"
    runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent a"]
    assert len(runs) == 2
    attempt1, attempt2 = sorted(runs, key=lambda s: s.start_time or 0)
    assert attempt1.attributes is not None and attempt2.attributes is not None
    assert attempt1.attributes["lovia.run.resumed"] is False and attempt2.attributes["lovia.run.resumed"] is True
    assert not attempt1.links
    assert len(attempt2.links) == 1 and attempt1.context is not None
    saves = [s for s in exporter.get_finished_spans() if s.name == "checkpoint_save"]
    assert saves and all(s.parent is not None for s in saves)
    assert any(s.attributes and s.attributes.get("lovia.checkpoint.status") == "completed" for s in saves)
    link = attempt2.links[0]
    assert link.context.span_id == attempt1.context.span_id
    assert link.context.trace_id == attempt1.context.trace_id
    assert link.attributes is not None and link.attributes["lovia.link"] == "first_attempt"
    await cp.close()


async def test_a_resumed_run_links_to_its_first_attempt_across_processes(tmp_path: Any) -> None:
    # Two tracers that share nothing (as two processes would): the link comes from the checkpoint.
    (tracer1, exporter1), (tracer2, exporter2) = _setup(), _setup()
    cp = SQLiteCheckpointer(str(tmp_path / "cp.db"))
    opts = CheckpointOptions(cp, run_id="order-8")
    first = Agent(name="a", model=ScriptedProvider([fail(ProviderError("gone", status_code=400))]), tools=[lookup])
    with pytest.raises(ProviderError):
        await Runner.run(first, "go", tracer=tracer1, checkpoint=opts)
    snap = await cp.load("order-8")
    [attempt1] = [s for s in exporter1.get_finished_spans() if s.name == "invoke_agent a"]
    assert snap is not None and snap.head.trace is not None and attempt1.context is not None
    assert int(snap.head.trace["span_id"], 16) == attempt1.context.span_id
    second = Agent(name="a", model=ScriptedProvider([text("done")]), tools=[lookup])
    assert (await Runner.run(second, [], tracer=tracer2, checkpoint=opts)).output == "done"
    [attempt2] = [s for s in exporter2.get_finished_spans() if s.name == "invoke_agent a"]
    assert len(attempt2.links) == 1
    link = attempt2.links[0]
    assert (link.context.trace_id, link.context.span_id) == (attempt1.context.trace_id, attempt1.context.span_id)
    assert link.attributes is not None and link.attributes["lovia.link"] == "first_attempt"
    await cp.close()


def test_span_names_are_strings() -> None:
    assert SpanName.RUN == "run" and str(SpanName.MODEL_CALL) == "model_call"
    assert {n.value for n in SpanName} >= {"run", "turn", "model_call", "tool_call", "handoff", "guardrail"}


def test_missing_sdk_is_a_user_error_with_a_hint(tmp_path: Any) -> None:
    import subprocess
    import sys

    # Hide the opentelemetry package from a fresh interpreter.
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
        "            raise ImportError('blocked')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    code = (
        "from lovia.tracing import OpenTelemetryTracer\n"
        "from lovia.exceptions import UserError\n"
        "try:\n    OpenTelemetryTracer()\nexcept UserError as e:\n    print('HINT', e.hint)\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert "HINT pip install 'lovia[otel]'" in out.stdout, out.stderr


async def test_guardrail_spans_and_a_tripped_guardrail_is_an_error() -> None:
    tracer, exporter = _setup()

    def polite(value: Any, ctx: Any) -> str | None:
        return None

    def no_secrets(value: Any, ctx: Any) -> str | None:
        return "leaks a secret" if "secret" in str(value) else None

    from lovia.exceptions import GuardrailTripped

    agent = Agent(
        name="g",
        model=ScriptedProvider([text("the secret is 42")]),
        input_guardrails=[polite],
        output_guardrails=[no_secrets],
    )
    with pytest.raises(GuardrailTripped):
        await Runner.run(agent, "tell me", tracer=tracer)
    spans = list(exporter.get_finished_spans())
    run = _one(spans, "invoke_agent g")
    guard_in, guard_out = _one(spans, "guardrail input"), _one(spans, "guardrail output")
    assert guard_in.parent is not None and run.context is not None
    assert guard_in.parent.span_id == run.context.span_id
    assert guard_in.status.status_code != StatusCode.ERROR
    assert guard_out.status.status_code == StatusCode.ERROR and guard_out.attributes is not None
    assert guard_out.attributes["error.type"] == "GuardrailTripped"
    assert guard_out.attributes["lovia.guardrail.kind"] == "output"
    assert run.status.status_code == StatusCode.ERROR


def test_span_names_given_as_the_enum_and_unknown_keys_are_mapped() -> None:
    tracer, exporter = _setup()
    with tracer.span(SpanName.TOOL_CALL, name="lookup", call_id="c9", shard=3) as span:
        span.set_attribute("attempt", 2)
        span.set_attribute("tags", ("a", "b"))
        span.set_attribute("ignored", None)
    with tracer.span("custom_step", label="x") as span:
        span.set_attribute("finish_reason", "stop")
    spans = list(exporter.get_finished_spans())
    tool_span, custom = _one(spans, "execute_tool lookup"), _one(spans, "custom_step")
    assert tool_span.attributes is not None and custom.attributes is not None
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c9"
    assert tool_span.attributes["lovia.shard"] == 3
    assert tool_span.attributes["lovia.attempt"] == 2
    assert tuple(tool_span.attributes["lovia.tags"]) == ("a", "b")
    assert "lovia.ignored" not in tool_span.attributes
    assert custom.kind == SpanKind.INTERNAL and custom.attributes["lovia.label"] == "x"
    assert tuple(custom.attributes["lovia.finish_reason"]) == ("stop",)


async def test_capture_content_can_be_switched_after_construction() -> None:
    tracer, exporter = _setup(capture_content=False)
    turns = [call("lookup", {"city": "Lima"}), text("first"), call("lookup", {"city": "Pisa"}), text("2")]
    model = ScriptedProvider(turns)
    agent = Agent(name="a", model=model, tools=[lookup])
    await Runner.run(agent, "hi", tracer=tracer)
    tracer.capture_content = True
    await Runner.run(agent, "again", tracer=tracer)
    tools = sorted(
        (s for s in exporter.get_finished_spans() if s.name == "execute_tool lookup"), key=lambda s: s.start_time or 0
    )
    assert [s.attributes.get("gen_ai.tool.call.result") for s in tools if s.attributes is not None] == [
        None,
        "sunny in Pisa",
    ]


async def test_spans_the_sampler_drops_cost_no_attributes_and_break_nothing() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OpenTelemetryTracer(tracer_provider=provider, capture_content=True)
    model = ScriptedProvider([call("lookup", {"city": "Oslo"}), text("done")])
    result = await Runner.run(Agent(name="a", model=model, tools=[lookup]), "hi", tracer=tracer)
    assert result.output == "done"
    assert list(exporter.get_finished_spans()) == []
    with tracer.span("model_call", model="m", turn=1) as span:
        assert not span._recording
        span.set_attribute("output_text", "not built")
