"""The reference's observability page, checked from the outside.

Each test restates a behaviour the reference's observability page (with the ``lovia.tracing``,
``lovia.hooks``, ``lovia.log_config`` and ``Usage`` listings of its API page, and the event
tables of its streaming page) documents for hooks, tracers and their spans, logging and usage
accounting, and checks lovia against it with public names only. The model is always a
``ScriptedProvider``; the OpenTelemetry tests use the SDK's in-memory exporter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pytest

from lovia import (
    Agent,
    AgentHooks,
    CheckpointOptions,
    ContextOverflowError,
    InMemoryCheckpointer,
    PluginInstance,
    ProviderError,
    RetryPolicy,
    RunCancelled,
    RunContext,
    Runner,
    enable_logging,
    events,
    tool,
)
from lovia.log_config import ColorFormatter, supports_color
from lovia.messages import AssistantTurn, ToolCall, Usage
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.tracing import (
    ConsoleTracer,
    InMemoryTracer,
    NoopTracer,
    RecordedSpan,
    SpanName,
    handoff_span,
    model_call_span,
    record_run_end,
    run_span,
    tool_call_span,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def calc(*turns: Any, hooks: AgentHooks | None = None, name: str = "calc") -> Agent[Any]:
    script = list(turns) or [call("add", {"a": 1, "b": 2}, call_id="c1"), text("3")]
    return Agent(name=name, model=ScriptedProvider(script), tools=[add, explode], hooks=hooks)


@pytest.fixture(autouse=True)
def _restore_lovia_logger() -> Iterator[None]:
    # Each test starts from the logger as a fresh process has it (other tests may have enabled it).
    logger = logging.getLogger("lovia")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    logger.handlers[:] = [h for h in handlers if type(h) is logging.NullHandler]
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


# ====================================================================== hooks


async def test_hooks_by_type_by_tuple_and_catch_all() -> None:
    hooks = AgentHooks()
    tools_seen: list[tuple[str, str | None]] = []
    ends: list[str] = []
    firehose: list[str] = []

    @hooks.on(events.ToolCallStarted)
    async def log_tool(ev: events.ToolCallStarted, ctx: RunContext[Any]) -> None:
        tools_seen.append((ev.call.name, ctx.session_id))

    @hooks.on((events.RunCompleted, events.RunFailed))
    def at_end(ev: Any, ctx: RunContext[Any]) -> None:
        ends.append("ok" if isinstance(ev, events.RunCompleted) else "failed")

    @hooks.on_any
    def everything(ev: events.Event, ctx: RunContext[Any]) -> None:
        firehose.append(type(ev).__name__)

    from lovia import InMemorySession

    await Runner.run(calc(hooks=hooks), "1+2", session=InMemorySession(), session_id="s-42")
    assert tools_seen == [("add", "s-42")]
    assert ends == ["ok"]
    assert firehose[0] == "RunStarted" and firehose[-1] == "RunCompleted"
    assert {"TurnStarted", "ToolCallStarted", "ToolCallCompleted", "TurnEnded", "TextDelta"} <= set(firehose)

    with pytest.raises(AssertionError):  # the script runs dry on the second run
        await Runner.run(Agent(name="x", model=ScriptedProvider([]), hooks=hooks), "again")
    assert ends == ["ok", "failed"]


async def test_hooks_see_exactly_the_events_the_stream_yields_in_order() -> None:
    hooks = AgentHooks()
    hooked: list[events.Event] = []
    hooks.on_any(lambda ev, ctx: hooked.append(ev))
    handle = Runner.stream(calc(hooks=hooks), "1+2")
    streamed = [ev async for ev in handle]
    await handle.result()
    assert len(hooked) == len(streamed)
    assert all(a is b for a, b in zip(hooked, streamed, strict=True))


async def test_hooks_fire_when_nobody_consumes_the_stream() -> None:
    hooks = AgentHooks()
    seen: list[str] = []
    hooks.on(events.ToolCallCompleted)(lambda ev, ctx: seen.append(ev.output))
    await Runner.run(calc(hooks=hooks), "1+2")
    assert seen == ["3"]


async def test_base_class_subscription_catches_the_family() -> None:
    hooks = AgentHooks()
    family: list[str] = []
    hooks.on(events.ToolEvent)(lambda ev, ctx: family.append(type(ev).__name__))
    await Runner.run(calc(hooks=hooks), "1+2")
    assert family == ["ToolCallStarted", "ToolCallCompleted"]


async def test_catch_alls_run_first_then_typed_handlers_in_registration_order() -> None:
    hooks = AgentHooks()
    order: list[str] = []
    hooks.on(events.RunStarted)(lambda ev, ctx: order.append("typed-1"))
    hooks.on(events.RunEvent)(lambda ev, ctx: order.append("typed-2") if isinstance(ev, events.RunStarted) else None)
    hooks.on_any(lambda ev, ctx: order.append("any-1") if isinstance(ev, events.RunStarted) else None)
    hooks.on(events.RunStarted)(lambda ev, ctx: order.append("typed-3"))
    hooks.on_any(lambda ev, ctx: order.append("any-2") if isinstance(ev, events.RunStarted) else None)
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("ok")]), hooks=hooks), "hi")
    assert order == ["any-1", "any-2", "typed-1", "typed-2", "typed-3"]


async def test_a_raising_hook_is_logged_as_a_warning_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    hooks = AgentHooks()
    after: list[str] = []

    @hooks.on(events.ToolCallStarted)
    def broken_metrics(ev: Any, ctx: Any) -> None:
        raise ConnectionError("metrics backend down")

    hooks.on(events.ToolCallStarted)(lambda ev, ctx: after.append(ev.call.name))
    with caplog.at_level(logging.WARNING, logger="lovia"):
        result = await Runner.run(calc(hooks=hooks), "1+2")
    assert result.output == "3" and after == ["add"]
    [record] = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], ConnectionError)]
    assert record.levelno == logging.WARNING
    assert "metrics backend down" in caplog.text  # the traceback is in the log


async def test_a_hook_can_trip_the_cancel_token() -> None:
    hooks = AgentHooks()

    @hooks.on(events.ToolCallCompleted)
    def stop(ev: Any, ctx: RunContext[Any]) -> None:
        ctx.cancel_token.cancel("enough")

    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), text("never")])
    with pytest.raises(RunCancelled):
        await Runner.run(Agent(name="a", model=provider, tools=[add], hooks=hooks), "go")
    assert len(provider.calls) == 1


async def test_a_hook_can_steer_through_the_mailbox() -> None:
    hooks = AgentHooks()

    @hooks.on(events.ToolCallCompleted)
    def nudge(ev: Any, ctx: RunContext[Any]) -> None:
        ctx.mailbox.push("Also mention the units.")

    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), text("2 apples")])
    handle = Runner.stream(Agent(name="a", model=provider, tools=[add], hooks=hooks), "1 apple + 1 apple?")
    seen = [ev async for ev in handle]
    await handle.result()
    injected = [ev for ev in seen if isinstance(ev, events.UserMessageInjected)]
    assert [ev.content for ev in injected] == ["Also mention the units."]
    assert any(m.role == "user" and m.content == "Also mention the units." for m in provider.calls[1])


async def test_hook_context_is_the_live_run_context() -> None:
    hooks = AgentHooks()
    snapshots: list[tuple[str, int, int, int]] = []

    @hooks.on(events.TurnEnded)
    def record(ev: events.TurnEnded, ctx: RunContext[Any]) -> None:
        snapshots.append((ctx.agent.name, ev.turn, ctx.usage.total_tokens, len(ctx.entries)))

    result = await Runner.run(calc(hooks=hooks), "1+2")
    assert [s[:2] for s in snapshots] == [("calc", 1), ("calc", 2)]
    assert snapshots[0][2] < snapshots[1][2] == result.usage.total_tokens  # usage accumulates live
    assert snapshots[0][3] < snapshots[1][3]  # the transcript grows live


async def test_plugin_hooks_are_dispatched_alongside_the_agents() -> None:
    from_plugin: list[str] = []
    from_agent: list[str] = []
    plugin_hooks = AgentHooks()
    plugin_hooks.on(events.RunCompleted)(lambda ev, ctx: from_plugin.append(ev.result.output))

    class Curator:
        name = "curator"

        async def setup(self) -> PluginInstance:
            return PluginInstance(hooks=plugin_hooks)

    hooks = AgentHooks()
    hooks.on(events.RunCompleted)(lambda ev, ctx: from_agent.append(ev.result.output))
    agent = Agent(name="a", model=ScriptedProvider([text("done")]), hooks=hooks, plugins=[Curator()])
    await Runner.run(agent, "hi")
    assert from_plugin == ["done"] and from_agent == ["done"]


# ====================================================================== events carry what the tables say


async def test_events_carry_their_documented_fields() -> None:
    agent = calc(call("add", {"a": 2, "b": 5}, call_id="k1"), call("nope", {}, call_id="k2"), text("7"))
    handle = Runner.stream(agent, "2+5")
    seen = [ev async for ev in handle]
    result = await handle.result()
    started = next(ev for ev in seen if isinstance(ev, events.RunStarted))
    assert started.agent is agent
    turns = [
        (type(ev).__name__, ev.turn, ev.agent.name)
        for ev in seen
        if isinstance(ev, (events.TurnStarted, events.TurnEnded))
    ]
    assert turns == [
        ("TurnStarted", 1, "calc"),
        ("TurnEnded", 1, "calc"),
        ("TurnStarted", 2, "calc"),
        ("TurnEnded", 2, "calc"),
        ("TurnStarted", 3, "calc"),
        ("TurnEnded", 3, "calc"),
    ]
    completed = [ev for ev in seen if isinstance(ev, events.ToolCallCompleted)]
    ok = next(ev for ev in completed if ev.call.id == "k1")
    assert ok.result == 7 and ok.output == "7" and ok.is_error is False and ok.call.name == "add"
    unknown = next(ev for ev in completed if ev.call.id == "k2")
    assert unknown.is_error is True and unknown.output
    # a call rejected before execution has no ToolCallStarted
    assert [ev.call.id for ev in seen if isinstance(ev, events.ToolCallStarted)] == ["k1"]
    messages = [ev for ev in seen if isinstance(ev, events.MessageCompleted)]
    assert messages and all(ev.entries for ev in messages)
    terminal = seen[-1]
    assert isinstance(terminal, events.RunCompleted) and terminal.result is result
    assert sum(isinstance(ev, (events.RunCompleted, events.RunFailed)) for ev in seen) == 1


async def test_a_failing_tool_emits_tool_call_failed_and_the_run_goes_on() -> None:
    agent = calc(call("explode", {"reason": "disk"}, call_id="e1"), text("could not do it"))
    handle = Runner.stream(agent, "go")
    seen = [ev async for ev in handle]
    result = await handle.result()
    assert result.output == "could not do it"
    [failed] = [ev for ev in seen if isinstance(ev, events.ToolCallFailed)]
    assert isinstance(failed.error, RuntimeError) and "boom: disk" in str(failed.error)
    assert failed.call is not None and failed.call.id == "e1"
    [completed] = [ev for ev in seen if isinstance(ev, events.ToolCallCompleted)]
    assert completed.is_error is True and completed.call.id == "e1" and completed.output
    assert not any(isinstance(ev, events.RunFailed) for ev in seen)


class FlakyOnce:
    """A provider whose first stream breaks after a few characters with a retryable error."""

    def __init__(self) -> None:
        self.inner = ScriptedProvider([text("steady answer")])
        self.calls = 0

    @property
    def name(self) -> str:
        return "flaky"

    @property
    def model(self) -> str:
        return "flaky-1"

    @property
    def supports_json_schema(self) -> bool:
        return False

    async def stream(
        self, entries: Any, *, tools: Any = None, response_format: Any = None, settings: Any = None
    ) -> AsyncIterator[Any]:
        self.calls += 1
        if self.calls == 1:
            from lovia.transcript import TextDelta

            yield TextDelta("par")
            raise ProviderError("connection reset", status_code=503, retryable=True)
        async for delta in self.inner.stream(entries, tools=tools, response_format=response_format, settings=settings):
            yield delta


async def test_a_retried_model_call_emits_output_discarded_then_model_retrying() -> None:
    delays: list[float] = []

    async def no_wait(delay: float) -> None:
        delays.append(delay)

    provider = FlakyOnce()
    agent = Agent(name="a", model=provider, retry=RetryPolicy(max_attempts=2, sleep=no_wait))  # type: ignore[arg-type]
    tracer = InMemoryTracer()
    handle = Runner.stream(agent, "hi", tracer=tracer)
    seen = [ev async for ev in handle]
    result = await handle.result()
    assert result.output == "steady answer" and provider.calls == 2
    names = [type(ev).__name__ for ev in seen]
    assert names.index("OutputDiscarded") < names.index("ModelRetrying")
    [retrying] = [ev for ev in seen if isinstance(ev, events.ModelRetrying)]
    assert isinstance(retrying.error, ProviderError)
    assert (retrying.attempt, retrying.max_attempts) == (1, 2)
    assert delays == [retrying.delay]
    streamed = "".join(ev.delta for ev in seen if isinstance(ev, events.TextDelta))
    assert streamed == "par" + "steady answer"  # the discarded part was streamed, then voided
    assert [s.attrs["turn"] for s in tracer.spans if s.name == "model_call"] == [1, 1]  # one span per attempt


async def test_a_failed_run_ends_the_stream_with_run_failed() -> None:
    handle = Runner.stream(Agent(name="a", model=ScriptedProvider([])), "hi")
    seen = [ev async for ev in handle]  # iteration itself does not raise
    assert isinstance(seen[-1], events.RunFailed) and isinstance(seen[-1].error, AssertionError)
    with pytest.raises(AssertionError):
        await handle.result()


# ====================================================================== tracing


async def test_in_memory_tracer_records_the_four_span_kinds_with_attributes() -> None:
    hooks = AgentHooks()
    run_ids: list[str | None] = []
    hooks.on(events.RunStarted)(lambda ev, ctx: run_ids.append(ctx.run_id))
    tracer = InMemoryTracer()
    result = await Runner.run(calc(hooks=hooks), "1+2", tracer=tracer)
    by_name: dict[str, list[RecordedSpan]] = {}
    for span in tracer.spans:
        by_name.setdefault(span.name, []).append(span)
    assert set(by_name) == {"run", "model_call", "tool_call"}
    [run] = by_name["run"]
    assert run.attrs["agent"] == "calc" and run.attrs["run_id"] == run_ids[0]
    assert run.attrs["turns"] == 2 and run.attrs["total_tokens"] == result.usage.total_tokens
    assert run.attrs["resumed"] is False
    assert [s.attrs["turn"] for s in by_name["model_call"]] == [1, 2]
    assert all("model" in s.attrs for s in by_name["model_call"])
    [tool_span] = by_name["tool_call"]
    assert tool_span.attrs["name"] == "add" and tool_span.attrs["call_id"] == "c1"
    assert all(s.exception is None and s.duration_ms >= 0 for s in tracer.spans)


async def test_model_call_span_names_the_model() -> None:
    provider = ScriptedProvider([text("hi")])
    provider.model = "tiny-1"
    tracer = InMemoryTracer()
    await Runner.run(Agent(name="a", model=provider), "hi", tracer=tracer)
    [model_span] = [s for s in tracer.spans if s.name == "model_call"]
    assert model_span.attrs["model"] == "tiny-1" and model_span.attrs["turn"] == 1


async def test_parallel_tool_calls_each_get_a_span() -> None:
    tracer = InMemoryTracer()
    agent = calc(batch(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), text("2 and 4"))
    await Runner.run(agent, "go", tracer=tracer)
    tool_spans = [s for s in tracer.spans if s.name == "tool_call"]
    assert len(tool_spans) == 2 and len({s.attrs["call_id"] for s in tool_spans}) == 2


async def test_handoff_span_and_the_tracer_follows_the_active_agent() -> None:
    billing = Agent(name="billing", model=ScriptedProvider([text("refund issued")]))
    triage = Agent(name="triage", model=ScriptedProvider([call("transfer_to_billing", {})]), handoffs=[billing])
    tracer = InMemoryTracer()
    result = await Runner.run(triage, "refund please", tracer=tracer)
    assert result.output == "refund issued"
    [handoff] = [s for s in tracer.spans if s.name == "handoff"]
    assert handoff.attrs == {"from_agent": "triage", "to_agent": "billing"}
    assert [s.attrs["turn"] for s in tracer.spans if s.name == "model_call"] == [1, 2]
    [run] = [s for s in tracer.spans if s.name == "run"]
    assert run.attrs["turns"] == 2
    # the tracer is a run-level knob: agents have no tracer field
    assert "tracer" not in {f.name for f in dataclasses.fields(Agent)}


class NestingTracer:
    """A user-written tracer: implements the one-method protocol and records nesting."""

    def __init__(self) -> None:
        self.finished: list[tuple[str, dict[str, Any], tuple[str, ...]]] = []
        self.errors: list[tuple[str, BaseException]] = []
        self._stack: ContextVar[tuple[str, ...]] = ContextVar("stack", default=())

    @contextmanager
    def span(self, name: str, /, **attributes: Any) -> Iterator[Any]:
        outer = self._stack.get()
        token = self._stack.set((*outer, str(name)))
        attrs = dict(attributes)
        tracer = self

        class _Span:
            def set_attribute(self, key: str, value: object) -> None:
                attrs[key] = value

            def record_exception(self, exc: BaseException) -> None:
                tracer.errors.append((str(name), exc))

        try:
            yield _Span()
        finally:
            self._stack.reset(token)
            self.finished.append((str(name), attrs, outer))


async def test_a_custom_tracer_receives_spans_and_sub_runs_join_the_trace() -> None:
    summarizer = Agent(name="summarizer", model=ScriptedProvider([text("bullets")]))
    lead = Agent(
        name="lead",
        model=ScriptedProvider([call("ask_summarizer", {"input": "long text"}), text("done")]),
        tools=[summarizer.as_tool(description="Summarize.")],
    )
    tracer = NestingTracer()
    await Runner.run(lead, "summarize", tracer=tracer)
    runs = [(attrs["agent"], outer) for name, attrs, outer in tracer.finished if name == "run"]
    assert ("lead", ()) in runs
    [(_, sub_outer)] = [r for r in runs if r[0] == "summarizer"]
    assert sub_outer[0] == "run" and sub_outer[-1] == "tool_call"  # nested inside the lead's tool call
    lead_run = next(attrs for name, attrs, outer in tracer.finished if name == "run" and outer == ())
    assert lead_run["turns"] == 2 and "total_tokens" in lead_run


async def test_a_failing_run_records_the_exception_on_its_span() -> None:
    tracer = NestingTracer()
    with pytest.raises(AssertionError):
        await Runner.run(Agent(name="a", model=ScriptedProvider([])), "hi", tracer=tracer)
    assert any(name == "run" and isinstance(exc, AssertionError) for name, exc in tracer.errors)
    memory = InMemoryTracer()
    with pytest.raises(AssertionError):
        await Runner.run(Agent(name="a", model=ScriptedProvider([])), "hi", tracer=memory)
    [run] = [s for s in memory.spans if s.name == "run"]
    assert isinstance(run.exception, AssertionError)


async def test_runs_without_a_tracer_and_the_noop_tracer() -> None:
    assert (await Runner.run(calc(), "1+2")).output == "3"
    assert (await Runner.run(calc(), "1+2", tracer=NoopTracer())).output == "3"
    with NoopTracer().span("anything", key="value") as span:
        span.set_attribute("k", 1)
        span.record_exception(RuntimeError("ignored"))


def test_recorded_span_fields_and_methods() -> None:
    span = RecordedSpan(name="tool_call", attrs={"name": "add"})
    assert span.duration_ms == 0.0 and span.exception is None
    span.set_attribute("call_id", "c1")
    error = ValueError("bad")
    span.record_exception(error)
    assert span.attrs == {"name": "add", "call_id": "c1"} and span.exception is error
    assert RecordedSpan("x").attrs == {}


def test_in_memory_tracer_measures_and_records_exceptions() -> None:
    tracer = InMemoryTracer()
    with tracer.span("outer", a=1) as outer:
        outer.set_attribute("b", 2)
        with pytest.raises(KeyError), tracer.span("inner"):
            raise KeyError("x")
    inner = next(s for s in tracer.spans if s.name == "inner")
    assert isinstance(inner.exception, KeyError)
    outer_rec = next(s for s in tracer.spans if s.name == "outer")
    assert outer_rec.attrs == {"a": 1, "b": 2} and outer_rec.exception is None
    assert outer_rec.duration_ms >= inner.duration_ms >= 0


def test_span_helpers_open_the_documented_spans() -> None:
    tracer = InMemoryTracer()
    with run_span(tracer, agent="a", run_id="r1") as span:
        with model_call_span(tracer, model="m", turn=1):
            pass
        with tool_call_span(tracer, name="add", call_id="c1"):
            pass
        with handoff_span(tracer, from_agent="a", to_agent="b"):
            pass
        record_run_end(span, turns=1, total_tokens=12)
    got = {s.name: s.attrs for s in tracer.spans}
    assert got["run"] == {"agent": "a", "run_id": "r1", "turns": 1, "total_tokens": 12}
    assert got["model_call"] == {"model": "m", "turn": 1}
    assert got["tool_call"] == {"name": "add", "call_id": "c1"}
    assert got["handoff"] == {"from_agent": "a", "to_agent": "b"}
    assert {"run", "model_call", "tool_call", "handoff"} <= {s.value for s in SpanName}
    assert SpanName("run") == "run"


async def test_console_tracer_logs_an_indented_tree(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="lovia"):
        await Runner.run(calc(), "1+2", tracer=ConsoleTracer())
    lines = [r.getMessage() for r in caplog.records if "tool_call" in r.getMessage() or "run" in r.getMessage()]
    run_line = next(line for line in lines if line.lstrip().startswith("run"))
    tool_line = next(line for line in lines if line.lstrip().startswith("tool_call"))
    indent = len(tool_line) - len(tool_line.lstrip())
    assert indent > len(run_line) - len(run_line.lstrip())  # nested spans are indented deeper
    assert "add" in tool_line


async def test_console_tracer_shows_once_logging_is_enabled() -> None:
    out = io.StringIO()
    enable_logging(stream=out, color=False)
    await Runner.run(calc(), "1+2", tracer=ConsoleTracer())
    printed = out.getvalue()
    for name in ("run", "model_call", "tool_call"):
        assert f" {name} " in printed, name


async def test_console_tracer_skips_spans_shorter_than_min_duration(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    async def slow() -> str:
        """Takes 60 ms."""
        await asyncio.sleep(0.06)
        return "done"

    agent = Agent(name="a", model=ScriptedProvider([call("slow", {}), text("ok")]), tools=[slow])
    with caplog.at_level(logging.INFO, logger="lovia"):
        await Runner.run(agent, "go", tracer=ConsoleTracer(min_duration_ms=40))
    messages = [r.getMessage().lstrip() for r in caplog.records]
    assert any(m.startswith("tool_call") for m in messages)
    assert any(m.startswith("run") for m in messages)
    assert not any(m.startswith("model_call") for m in messages)  # scripted model calls are instant


async def test_a_replayed_run_is_quiet() -> None:
    checkpointer = InMemoryCheckpointer()
    first_tracer = InMemoryTracer()
    first = await Runner.run(
        calc(), "1+2", checkpoint=CheckpointOptions(checkpointer, "run-quiet"), tracer=first_tracer
    )
    assert {"model_call", "tool_call"} <= {s.name for s in first_tracer.spans}

    hooks = AgentHooks()
    hooked: list[str] = []
    hooks.on_any(lambda ev, ctx: hooked.append(type(ev).__name__))
    replay_model = ScriptedProvider([])  # a replay must not reach the model
    tracer = InMemoryTracer()
    handle = Runner.stream(
        Agent(name="calc", model=replay_model, tools=[add], hooks=hooks),
        "1+2",
        checkpoint=CheckpointOptions(checkpointer, "run-quiet"),
        tracer=tracer,
    )
    streamed = [type(ev).__name__ for ev in [ev async for ev in handle]]
    again = await handle.result()
    assert again.output == first.output == "3"
    assert again.usage.total_tokens == first.usage.total_tokens  # usage still comes back
    assert replay_model.calls == []
    assert streamed[-1] == "RunCompleted"
    per_turn = {"TurnStarted", "TurnEnded", "ToolCallStarted", "ToolCallCompleted", "TextDelta", "MessageCompleted"}
    assert not per_turn & set(streamed)
    assert not per_turn & set(hooked)
    assert not {"model_call", "tool_call"} & {s.name for s in tracer.spans}


# ====================================================================== OpenTelemetry


def _otel_pipeline() -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def test_open_telemetry_tracer_exports_one_trace_per_run() -> None:
    from lovia.tracing import OpenTelemetryTracer

    provider, exporter = _otel_pipeline()
    await Runner.run(calc(), "1+2", tracer=OpenTelemetryTracer(tracer_provider=provider))
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1 and "calc" in roots[0].name
    tool_span = next(s for s in spans if "add" in s.name and s is not roots[0])
    assert tool_span.parent is not None
    assert any(v == "c1" for v in tool_span.attributes.values())


async def test_open_telemetry_content_is_only_exported_when_asked() -> None:
    from lovia.tracing import OpenTelemetryTracer

    secret_answer = "The secret answer is 3"
    found: dict[bool, str] = {}
    for capture in (False, True):
        provider, exporter = _otel_pipeline()
        agent = calc(call("add", {"a": 1, "b": 2}, call_id="c1"), text(secret_answer))
        await Runner.run(agent, "1+2", tracer=OpenTelemetryTracer(tracer_provider=provider, capture_content=capture))
        found[capture] = " ".join(
            str(value) for span in exporter.get_finished_spans() for value in (span.attributes or {}).values()
        )
    assert secret_answer not in found[False] and '"a": 1' not in found[False]
    assert secret_answer in found[True] and '"a": 1' in found[True]


# ====================================================================== logging


def test_the_lovia_logger_is_silent_by_default() -> None:
    logger = logging.getLogger("lovia")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)


async def test_enable_logging_prints_the_run_narrative() -> None:
    out = io.StringIO()
    logger = enable_logging("DEBUG", stream=out, color=False)
    assert logger is logging.getLogger("lovia") and logger.level == logging.DEBUG
    billing = Agent(
        name="billing", model=ScriptedProvider([call("explode", {"reason": "x"}), text("sorry")]), tools=[explode]
    )
    triage = Agent(
        name="triage",
        model=ScriptedProvider([call("add", {"a": 1, "b": 2}), call("transfer_to_billing", {})]),
        tools=[add],
        handoffs=[billing],
    )
    await Runner.run(triage, "go")
    log = out.getvalue()
    for word in ("run.start", "model.done", "tool.start", "tool.error", "run.handoff", "run.done"):
        assert word in log, word
    assert "\x1b[" not in log
    done = [line for line in log.splitlines() if "model.done" in line]
    assert len(done) == 4  # two turns of triage, two of billing
    assert "turn=1" in done[0] and "tokens=" in done[0] and "in=" in done[0] and "out=" in done[0]


async def test_model_done_reports_the_turns_own_tokens() -> None:
    out = io.StringIO()
    enable_logging("DEBUG", stream=out, color=False)
    turns = [
        AssistantTurn(
            content=None,
            tool_calls=[ToolCall(id="t", name="add", arguments='{"a": 1, "b": 1}')],
            usage=Usage(1520, 321),
        ),
        AssistantTurn(content="2", usage=Usage(1700, 12)),
    ]
    await Runner.run(Agent(name="a", model=ScriptedProvider(turns), tools=[add]), "1+1")
    done = [line for line in out.getvalue().splitlines() if "model.done" in line]
    assert "turn=1" in done[0] and "tokens=1841" in done[0] and "in=1520" in done[0] and "out=321" in done[0]
    assert "turn=2" in done[1] and "tokens=1712" in done[1]


async def test_enable_logging_defaults_info_and_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logger = enable_logging()
    assert logger.level == logging.INFO
    await Runner.run(Agent(name="bot", model=ScriptedProvider([text("ok")])), "hi")
    err = capsys.readouterr().err
    assert "run.start" in err and "run.done" in err
    assert "model.done" not in err  # a DEBUG line


def test_enable_logging_is_idempotent_and_does_not_propagate() -> None:
    logger = logging.getLogger("lovia")
    first, second, third = io.StringIO(), io.StringIO(), io.StringIO()
    enable_logging(stream=first)
    count = len(logger.handlers)
    enable_logging(stream=second)
    enable_logging("WARNING", stream=third)
    assert len(logger.handlers) == count  # its own handler was replaced, not added again
    assert logger.level == logging.WARNING and logger.propagate is False
    logger.warning("context.overflow window=1")
    assert "context.overflow" in third.getvalue()
    assert first.getvalue() == second.getvalue() == ""


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_propagate_true_hands_records_to_the_root_logger() -> None:
    root = logging.getLogger()
    collect = _Collect()
    root.addHandler(collect)
    try:
        enable_logging(stream=io.StringIO(), propagate=True)
        Runner.run_sync(Agent(name="bot", model=ScriptedProvider([text("ok")])), "hi")
        assert any(m.startswith("run.done") for m in collect.messages)
        collect.messages.clear()
        enable_logging(stream=io.StringIO())
        Runner.run_sync(Agent(name="bot", model=ScriptedProvider([text("ok")])), "hi")
        assert collect.messages == []
    finally:
        root.removeHandler(collect)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_color_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = FakeTerminal()
    assert supports_color(tty) and not supports_color(io.StringIO())
    enable_logging(stream=tty)
    logging.getLogger("lovia").info("run.start agent=x")
    assert "\x1b[" in tty.getvalue()

    monkeypatch.setenv("NO_COLOR", "1")
    plain = FakeTerminal()
    assert not supports_color(plain)
    enable_logging(stream=plain)
    logging.getLogger("lovia").info("run.start agent=x")
    assert "run.start agent=x" in plain.getvalue() and "\x1b[" not in plain.getvalue()

    forced = io.StringIO()
    enable_logging(stream=forced, color=True)
    logging.getLogger("lovia").warning("context.overflow")
    assert "\x1b[" in forced.getvalue()


def test_color_formatter_wraps_the_line() -> None:
    record = logging.LogRecord("lovia", logging.WARNING, __file__, 1, "model.retry attempt=%d", (2,), None)
    line = ColorFormatter("%(levelname)s %(message)s").format(record)
    assert "WARNING model.retry attempt=2" in line and line.startswith("\x1b[")


class OverflowOnce:
    """A provider whose first request is too long for its window; later ones are answered."""

    def __init__(self) -> None:
        self.inner = ScriptedProvider([text("fits now")])
        self.calls = 0

    @property
    def name(self) -> str:
        return "overflow"

    @property
    def model(self) -> str:
        return "small-window"

    @property
    def supports_json_schema(self) -> bool:
        return False

    async def stream(
        self, entries: Any, *, tools: Any = None, response_format: Any = None, settings: Any = None
    ) -> AsyncIterator[Any]:
        self.calls += 1
        if self.calls == 1:
            raise ContextOverflowError("prompt is too long", reported_window=100)
        async for delta in self.inner.stream(entries, tools=tools, response_format=response_format, settings=settings):
            yield delta


async def test_context_overflow_is_logged() -> None:
    out = io.StringIO()
    enable_logging("DEBUG", stream=out, color=False)
    provider = OverflowOnce()
    try:
        result = await Runner.run(Agent(name="a", model=provider), "hello")  # type: ignore[arg-type]
    except ContextOverflowError:
        pass  # nothing to compact in a one-message prompt: the overflow surfaces
    else:
        assert result.output == "fits now"
    line = next(line for line in out.getvalue().splitlines() if "context.overflow" in line)
    assert "WARNING" in line


# ====================================================================== usage accounting


async def test_usage_adds_up_across_turns_and_sub_runs() -> None:
    helper = Agent(name="helper", model=ScriptedProvider([AssistantTurn(content="sub answer", usage=Usage(7, 3))]))
    lead_turns = [
        AssistantTurn(
            content=None,
            tool_calls=[ToolCall(id="t1", name="ask_helper", arguments='{"input": "help"}')],
            usage=Usage(input_tokens=100, output_tokens=10, cache_read_tokens=60),
        ),
        AssistantTurn(content="final", usage=Usage(input_tokens=200, output_tokens=20, cache_write_tokens=50)),
    ]
    hooks = AgentHooks()
    completed: list[Usage] = []
    hooks.on(events.RunCompleted)(lambda ev, ctx: completed.append(ev.result.usage))
    lead = Agent(name="lead", model=ScriptedProvider(lead_turns), tools=[helper.as_tool()], hooks=hooks)
    result = await Runner.run(lead, "go")
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens) == (307, 33)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (60, 50)
    assert usage.total_tokens == 340  # cache tokens subdivide input, they are not added
    assert completed[-1].total_tokens == 340


def test_usage_fields_and_arithmetic() -> None:
    usage = Usage(input_tokens=1520, output_tokens=321, cache_read_tokens=1000)
    assert usage.total_tokens == 1841
    other = usage.clone()
    other.add(Usage(input_tokens=10, output_tokens=1, cache_write_tokens=5))
    assert (other.input_tokens, other.output_tokens, other.cache_write_tokens) == (1530, 322, 5)
    assert usage.total_tokens == 1841  # the clone is independent
