"""OpenTelemetryTracer's direct path to the SDK's span processors against the public-API path.

With the SDK's ``TracerProvider`` the adapter builds ``ReadableSpan`` objects itself; these tests
hold it to what the SDK would have exported (same spans from the same runs through the public
API), to the provider's sampler, id generator, resource, scope and limits, and to context
propagation for user code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, StatusCode, TraceState
from opentelemetry.util.types import Attributes

from lovia import Agent, Runner, tool
from lovia._otel import _DirectSpan, _Span
from lovia._otel_sdk import SDK_VERSIONS, sdk_pipeline
from lovia.exceptions import ProviderError
from lovia.reliability import RetryPolicy
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.tracing import OpenTelemetryTracer

_user_provider: TracerProvider | None = None


@tool
def lookup(city: str) -> str:
    """Look up the weather, with a span of the caller's own inside."""
    assert _user_provider is not None
    with _user_provider.get_tracer("user.code").start_as_current_span("user.lookup") as mine:
        mine.set_attribute("user.city", city)
    current = trace.get_current_span()  # the tool span, seen through the OpenTelemetry API
    current.set_attribute("user.note", "set by the tool")
    current.add_event("user.event", {"n": 1})
    return f"sunny in {city}"


@tool
def explode(x: int) -> str:
    """Always fails."""
    raise ValueError("kaboom")


class StartWatcher(SpanProcessor):
    """A processor that works when a span starts: the adapter must hand it live SDK spans."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        self.started.append(span.name)
        span.set_attribute("watcher.saw_start", True)


def _provider(**kwargs: Any) -> tuple[TracerProvider, InMemorySpanExporter]:
    global _user_provider
    exporter = InMemorySpanExporter()
    provider = TracerProvider(**kwargs)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _user_provider = provider
    return provider, exporter


async def _scenario(tracer: OpenTelemetryTracer) -> None:
    agent = Agent(
        name="triage",
        model=ScriptedProvider(
            [
                fail(ProviderError("overloaded", retryable=True, status_code=529)),
                call("lookup", {"city": "Oslo"}, call_id="c1"),
                call("explode", {"x": 1}, call_id="c2"),
                text("done"),
            ],
            model="m-1",
        ),
        tools=[lookup, explode],
    )
    result = await Runner.run(agent, "go", tracer=tracer, retry=RetryPolicy(max_attempts=3, sleep=_no_sleep))
    assert result.output == "done"


async def _no_sleep(_: float) -> None:
    return None


def _shape(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Everything about the spans but ids and times, with parents named instead of numbered."""
    by_id = {s.context.span_id: s.name for s in spans if s.context is not None}
    out = []
    for s in sorted(spans, key=lambda s: (s.start_time or 0, s.name)):
        attrs = {k: v for k, v in (s.attributes or {}).items() if k != "lovia.run_id" and not k.startswith("watcher.")}
        events = [(e.name, sorted((e.attributes or {}).keys())) for e in s.events]
        out.append(
            (
                s.name,
                s.kind,
                by_id.get(s.parent.span_id) if s.parent is not None else None,
                attrs,
                s.status.status_code,
                s.status.description,
                events,
                len(s.links),
                s.resource.attributes.get("service.name"),
                s.instrumentation_scope.name if s.instrumentation_scope else None,
            )
        )
    return out


def test_the_installed_sdk_takes_the_direct_path() -> None:
    # Fails loudly when the SDK is upgraded past the versions the direct path was checked against
    # or its internals moved: review lovia/_otel_sdk.py against the new SDK, then widen SDK_VERSIONS.
    from opentelemetry.sdk.version import __version__

    provider, _ = _provider()
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    assert sdk_pipeline(provider.get_tracer("lovia")) is not None, (__version__, SDK_VERSIONS)
    assert isinstance(tracer.span("tool_call", name="x"), _DirectSpan)


async def test_the_direct_path_exports_what_the_public_api_path_exports() -> None:
    direct_provider, direct = _provider(resource=Resource.create({"service.name": "svc"}))
    await _scenario(OpenTelemetryTracer(tracer_provider=direct_provider))

    public_provider, public = _provider(resource=Resource.create({"service.name": "svc"}))
    watcher = StartWatcher()
    public_provider.add_span_processor(watcher)
    public_tracer = OpenTelemetryTracer(tracer_provider=public_provider)
    assert isinstance(public_tracer.span("run", run_id="r"), _Span)  # a busy on_start: the public API
    await _scenario(public_tracer)

    direct_spans, public_spans = direct.get_finished_spans(), public.get_finished_spans()
    assert watcher.started and len(watcher.started) == len(public_spans)
    assert all(s.attributes and s.attributes["watcher.saw_start"] for s in public_spans)
    assert _shape(direct_spans) == _shape(public_spans)
    assert len(direct_spans) == 11  # run, 3 turns, 4 model calls (one retried), 2 tools, the user's span
    tool_span = next(s for s in direct_spans if s.name == "execute_tool lookup")
    assert tool_span.attributes is not None and tool_span.attributes["user.note"] == "set by the tool"
    boom = next(s for s in direct_spans if s.name == "execute_tool explode")
    assert boom.status.status_code == StatusCode.ERROR and boom.events[0].name == "exception"
    assert boom.events[0].attributes is not None
    assert "ValueError: kaboom" in str(boom.events[0].attributes["exception.stacktrace"])


async def test_a_users_span_inside_a_tool_is_a_child_of_the_tool_span() -> None:
    provider, exporter = _provider()
    await _scenario(OpenTelemetryTracer(tracer_provider=provider))
    spans = exporter.get_finished_spans()
    tool_span = next(s for s in spans if s.name == "execute_tool lookup")
    mine = next(s for s in spans if s.name == "user.lookup")
    assert tool_span.context is not None and mine.context is not None and mine.parent is not None
    assert mine.parent.span_id == tool_span.context.span_id
    assert mine.context.trace_id == tool_span.context.trace_id
    assert mine.instrumentation_scope is not None and mine.instrumentation_scope.name == "user.code"
    assert [e.name for e in tool_span.events] == ["user.event"]


async def test_a_run_inside_a_users_span_joins_its_trace() -> None:
    provider, exporter = _provider()
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    with provider.get_tracer("user.code").start_as_current_span("request") as outer:
        await Runner.run(Agent(name="a", model=ScriptedProvider([text("hi")])), "x", tracer=tracer)
    run = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent a")
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id
    assert run.context is not None and run.context.trace_id == outer.get_span_context().trace_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # every span was detached again


class RecordingSampler(Sampler):
    """Samples everything but ``chat`` spans, adds an attribute and a trace state, remembers its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        self.calls.append((name, kind, dict(attributes or {}), tuple(links or ()), parent.span_id))
        if name.startswith("chat"):
            return SamplingResult(Decision.DROP)
        return SamplingResult(
            Decision.RECORD_AND_SAMPLE, {**(attributes or {}), "sampler.says": "yes"}, TraceState([("lovia", "1")])
        )

    def get_description(self) -> str:
        return "RecordingSampler"


async def test_the_sampler_is_asked_as_the_sdk_asks_it_and_obeyed() -> None:
    runs = []
    for busy_on_start in (False, True):
        sampler = RecordingSampler()
        provider, exporter = _provider(sampler=sampler)
        if busy_on_start:
            provider.add_span_processor(StartWatcher())
        await _scenario(OpenTelemetryTracer(tracer_provider=provider))
        runs.append((sampler, exporter.get_finished_spans()))
    (direct_sampler, direct_spans), (public_sampler, public_spans) = runs

    def calls(sampler: RecordingSampler) -> list[tuple[Any, ...]]:
        # run ids and parent ids differ run to run; whether there was a parent does not
        out = []
        for name, kind, attrs, links, parent in sampler.calls:
            attrs.pop("lovia.run_id", None)
            out.append((name, kind, attrs, links, bool(parent)))
        return out

    assert calls(direct_sampler) == calls(public_sampler)
    assert _shape(direct_spans) == _shape(public_spans)
    assert not any(s.name.startswith("chat") for s in direct_spans)
    for span in direct_spans:
        assert span.attributes is not None and span.attributes["sampler.says"] == "yes"
        assert span.context is not None and span.context.trace_state.get("lovia") == "1"
        assert span.context.trace_flags.sampled


class CountingIds(IdGenerator):
    def __init__(self) -> None:
        self.next = 0

    def generate_span_id(self) -> int:
        self.next += 1
        return self.next

    def generate_trace_id(self) -> int:
        return 0xABC


async def test_ids_come_from_the_providers_id_generator() -> None:
    ids = CountingIds()
    provider, exporter = _provider(id_generator=ids)
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("hi")])), "x", tracer=OpenTelemetryTracer(provider))
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans if s.context} == {0xABC}
    assert sorted(s.context.span_id for s in spans if s.context) == list(range(1, ids.next + 1))
    # CountingIds does not claim random trace ids, so the W3C random flag stays off.
    assert all(s.context and not s.context.trace_flags.random_trace_id for s in spans)


async def test_span_limits_apply_as_in_the_sdk() -> None:
    limits = SpanLimits(max_span_attributes=3, max_attribute_length=4, max_events=1, max_event_attributes=2)
    shapes = []
    for busy_on_start in (False, True):
        provider, exporter = _provider(span_limits=limits)
        if busy_on_start:
            provider.add_span_processor(StartWatcher())
        await _scenario(OpenTelemetryTracer(tracer_provider=provider, capture_content=True))
        spans = exporter.get_finished_spans()
        for span in spans:
            assert span.attributes is not None
            assert len([k for k in span.attributes if not k.startswith("watcher.")]) <= 3
            assert all(len(v) <= 4 for v in span.attributes.values() if isinstance(v, str))
            assert len(span.events) <= 1 and all(len(e.attributes or {}) <= 2 for e in span.events)
        run = next(s for s in spans if s.name == "invoke_agent triage")
        assert run.dropped_attributes > 0
        shapes.append(sorted((s.name, s.dropped_attributes > 0, len(s.events)) for s in spans))
    assert shapes[0] == shapes[1]


async def test_a_processor_added_after_the_tracer_gets_the_next_runs_spans() -> None:
    provider = TracerProvider()
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("hi")])), "x", tracer=tracer)
    assert [s.name for s in exporter.get_finished_spans()] == ["chat", "turn 1", "invoke_agent a"]
    watcher = StartWatcher()
    provider.add_span_processor(watcher)  # from the next run on, spans start as SDK spans again
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("hi")])), "x", tracer=tracer)
    assert watcher.started == ["invoke_agent a", "turn 1", "chat"]


async def test_other_providers_and_a_disabled_sdk_use_the_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent(name="a", model=ScriptedProvider([text("hi"), text("hi")]))
    api_only = OpenTelemetryTracer(tracer_provider=trace.NoOpTracerProvider())
    assert api_only._pipe is None
    assert (await Runner.run(agent, "x", tracer=api_only)).output == "hi"

    with monkeypatch.context() as env:  # the SDK's own metrics count spans in start_span/end
        env.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
        metered, metered_exporter = _provider()
        counted = OpenTelemetryTracer(tracer_provider=metered)
        assert counted._pipe is None
        assert (await Runner.run(agent, "x", tracer=counted)).output == "hi"
        assert [s.name for s in metered_exporter.get_finished_spans()] == ["chat", "turn 1", "invoke_agent a"]

    agent = Agent(name="a", model=ScriptedProvider([text("hi")]))
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    provider, exporter = _provider()
    disabled = OpenTelemetryTracer(tracer_provider=provider)
    assert disabled._pipe is None
    assert (await Runner.run(agent, "x", tracer=disabled)).output == "hi"
    assert exporter.get_finished_spans() == ()


def test_an_sdk_outside_the_checked_versions_uses_the_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    import lovia._otel_sdk as direct

    provider, exporter = _provider()
    monkeypatch.setattr(direct, "SDK_VERSIONS", ((0, 1), (0, 2)))
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    assert tracer._pipe is None
    with tracer.span("tool_call", name="t", call_id="c"):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool t"]


def test_the_current_span_user_code_sees_follows_the_sdks_rules() -> None:
    provider, exporter = _provider()
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    with tracer.span("tool_call", name="t", call_id="c") as span:
        current = trace.get_current_span()
        assert current.is_recording() and current.get_span_context() == span.context
        current.set_status(StatusCode.OK)
        current.update_name("renamed")
        current.end()  # ignored: lovia ends the span
        assert current.is_recording()
        token = otel_context.attach(trace.set_span_in_context(current))
        otel_context.detach(token)
    assert not current.is_recording()
    current.set_attribute("too.late", 1)  # after the end: ignored, as the SDK does
    [exported] = exporter.get_finished_spans()
    assert exported.name == "renamed" and exported.status.status_code == StatusCode.OK
    assert exported.attributes is not None and "too.late" not in exported.attributes


def test_an_error_does_not_override_an_ok_status_set_by_user_code() -> None:
    provider, exporter = _provider()
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    with pytest.raises(RuntimeError), tracer.span("tool_call", name="t", call_id="c"):
        trace.get_current_span().set_status(StatusCode.OK)
        raise RuntimeError("late")
    [exported] = exporter.get_finished_spans()
    assert exported.status.status_code == StatusCode.OK  # the SDK's rule: OK is final
    assert exported.attributes is not None and exported.attributes["error.type"] == "RuntimeError"
    assert [e.name for e in exported.events] == ["exception"]


class Collect(SpanProcessor):
    """Keeps every ended span, sampled or not (an exporter processor would drop unsampled ones)."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class RecordOnly(Sampler):
    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY, attributes)

    def get_description(self) -> str:
        return "RecordOnly"


async def test_record_only_spans_reach_processors_unsampled_on_both_paths() -> None:
    ended = []
    for busy_on_start in (False, True):
        provider, exporter = _provider(sampler=RecordOnly())
        collect = Collect()
        provider.add_span_processor(collect)
        if busy_on_start:
            provider.add_span_processor(StartWatcher())
        await _scenario(OpenTelemetryTracer(tracer_provider=provider))
        assert exporter.get_finished_spans() == ()  # the exporting processor drops unsampled spans
        assert collect.ended and not any(s.context and s.context.trace_flags.sampled for s in collect.ended)
        ended.append(_shape(collect.ended))
    assert ended[0] == ended[1]


async def test_the_concurrent_multi_processor_gets_the_spans_too() -> None:
    from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor

    global _user_provider
    exporter = InMemorySpanExporter()
    provider = TracerProvider(active_span_processor=ConcurrentMultiSpanProcessor(2))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _user_provider = provider
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    assert tracer._pipe is not None
    await _scenario(tracer)
    reference, reference_exporter = _provider()
    await _scenario(OpenTelemetryTracer(tracer_provider=reference))
    assert _shape(exporter.get_finished_spans()) == _shape(reference_exporter.get_finished_spans())
    provider.shutdown()


def test_values_user_code_sets_are_copied_when_set() -> None:
    provider, exporter = _provider()
    tracer = OpenTelemetryTracer(tracer_provider=provider)
    tags = ["a"]
    event_attrs: dict[str, Any] = {"k": "before"}
    with tracer.span("tool_call", name="t", call_id="c"):
        current = trace.get_current_span()
        current.set_attribute("user.tags", tags)
        current.add_event("user.event", event_attrs)
        tags.append("b")
        event_attrs["k"] = "after"
    [exported] = exporter.get_finished_spans()
    assert exported.attributes is not None and exported.attributes["user.tags"] == ("a",)
    assert exported.events[0].attributes is not None and exported.events[0].attributes["k"] == "before"
