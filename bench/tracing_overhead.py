"""What tracing costs per step: the same runs with tracing off, with the bare SDK and with OpenTelemetry on.

What a step is: one turn of the loop, i.e. one model call (request, streamed deltas folded and
handed to the consumer, usage) plus the tool calls that answer asked for (argument validation,
execution, result entry) and the loop's bookkeeping around them. Every workload below is the
same two-step run, "What is 2 + 3?": step 1 is a model call that asks for ``add(2, 3)`` and the
tool call; step 2 is a model call that streams the final answer. Traced, a run is six spans
(``invoke_agent``, two ``turn``, two ``chat``, one ``execute_tool``), three per step. Since every
run has the same two steps, the overhead per step in percent is the overhead per run in percent.

Traced spans go to the real SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (what a service
uses) and an exporter that counts and drops the spans, so what is measured is creating,
attributing, ending and batching spans, not the network I/O of an exporter (which runs in the
processor's thread anyway).

Workloads (``--profile``):

- ``scripted``: ``ScriptedProvider`` (no I/O), a 10-character answer one character per delta:
  the smallest step the loop can take, so the relative overhead is as large as it gets.
- ``streamed``: the same with a paragraph-long answer in ~70 word-sized deltas.
- ``http``: ``OpenAIChatProvider`` against the fake OpenAI-compatible server of the provider tests
  (``tests/providers/servers.py``, run in a subprocess so its work is not on our clock), over one
  keep-alive ``httpx`` client: a step includes a real loopback HTTP round trip, request building
  and SSE parsing, which is what a user pays per step with an endpoint on the same machine (a
  remote model's latency only makes the share of tracing smaller).

Four modes share the process, the provider, the agent set-up and the warm-up:

- ``off``: the default ``NoopTracer``.
- ``sdk``: the SDK's floor through its public API, inside the same run. :class:`SdkFloorTracer`
  emits exactly the spans ``OpenTelemetryTracer`` exports for this workload (recorded once
  beforehand): the n-th span a run opens is started with ``Tracer.start_span`` with its final
  name, kind and all of its attributes in one call, made current and ended, and nothing else
  happens. No adapter going through ``Tracer.start_span`` can emit the same spans for less.
- ``direct``: the floor of the direct path ``on`` takes (below). :class:`DirectFloorTracer` replays the same spans
  (finished attributes at the start) doing only what the direct path owes the SDK: ask the
  provider's sampler, take ids from its id generator, make a span with the new context current,
  and hand one ``ReadableSpan`` per span to the processors.
- ``on``: ``OpenTelemetryTracer``. With the SDK's ``TracerProvider`` it does not go through
  ``Tracer.start_span``: it records each span's data itself and hands the provider's processors
  a finished ``ReadableSpan`` (docs/observability.md), so ``on`` can be below ``sdk``; ``on``
  minus ``sdk`` (negative then) is what that path saves after paying for lovia's own mapping,
  and ``on`` minus ``direct`` is lovia's own work (mapping attributes, naming spans, the loop's
  tracing calls).

The modes take turns run by run in a rotating order, so load changes on a shared machine hit them
alike; ``--repeats`` repetitions of ``--runs`` runs per mode. Building the agent is outside the
clock. The clock is CPU time of this process (``time.process_time``, all threads, so the batch
processor's thread counts): on a shared machine, time spent waiting for a core is nobody's;
``http`` also shows wall-clock time. Printed per workload: the median per run and per step of
each mode (with the range of the per-repetition medians and the mean), the overhead on vs off
and the floors sdk and direct vs off as ratios of medians (with the interquartile range over repetitions and
the ratio of means), the SDK's cost per span inside the run and in a tight loop (spans per run x
cost per span against the untraced run), lovia's cost per span on top of that floor (negative
when the direct path saves more than lovia's mapping costs), the direct-path floor per span and
lovia's own work on it, and a PASS/MISS line for the
overhead against ``--limit`` (default 15%), which on a miss names the floor when the floor alone
is above the limit. ``--check`` exits 1 when the ``http`` workload misses.

    .venv/bin/python bench/tracing_overhead.py                 # all workloads
    .venv/bin/python bench/tracing_overhead.py --profile http --check   # exit 1 on an http MISS
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry import context as otel_context  # noqa: E402
from opentelemetry import trace as otel_trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from lovia import Agent, Runner, tool  # noqa: E402
from lovia._otel_sdk import UNSET as _UNSET  # noqa: E402
from lovia._otel_sdk import sdk_pipeline  # noqa: E402
from lovia.messages import Usage  # noqa: E402
from lovia.providers.openai_chat import OpenAIChatProvider  # noqa: E402
from lovia.testing import ScriptedProvider, ScriptedTurn, call, text  # noqa: E402
from lovia.tracing import OpenTelemetryTracer  # noqa: E402
from lovia.transcript import FinishDelta, TextDelta, UsageDelta  # noqa: E402

STEPS_PER_RUN = 2  # two turns: model call + tool call, then model call + answer
QUESTION = "What is 2 + 3?"
ANSWER = (
    "Two plus three is five. Addition combines two quantities into one total, so taking two items and then "
    "three more gives five items in all. You can check it by counting up from two: three, four, five. The "
    "add tool agrees, which is a nice sanity check for such a small sum, and the result is the same in any "
    "number base larger than five, because the digits involved never need a carry."
)
PROFILES = ("scripted", "streamed", "http")
MODES = ("off", "sdk", "direct", "on")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class CountingDropExporter(SpanExporter):
    """Counts the spans it is handed and drops them."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


# --------------------------------------------------------------------------- the local endpoint


def _serve() -> int:
    """Serve the tool-call and answer streams from the provider tests' fake server until killed."""
    from tests.providers.servers import FakeServer, RecordedRequest, Reply, openai_text_stream, openai_tool_stream

    tool_reply = Reply.sse(openai_tool_stream([("call_1", "add", '{"a": 2, "b": 3}')]))
    answer_reply = Reply.sse(
        openai_text_stream(ANSWER, usage={"prompt_tokens": 70, "completion_tokens": 70, "total_tokens": 140})
    )
    server = FakeServer()

    def respond(request: RecordedRequest) -> Reply:
        server.requests.clear()  # the bench sends thousands; nothing reads them
        answered = any(m.get("role") == "tool" for m in request.json.get("messages", []))
        return answer_reply if answered else tool_reply

    server.responder = respond
    with server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the bench closes our stdin (or kills us)
    return 0


class _Endpoint:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://"):
            self.close()
            raise RuntimeError(f"the endpoint did not start: {self.base_url!r}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


# --------------------------------------------------------------------------- workloads


def _answer_turn(profile: str) -> ScriptedTurn:
    if profile == "scripted":
        return text("2 + 3 = 5.")
    words = ANSWER.split(" ")
    chunks = [TextDelta(w + " ") for w in words]
    return ScriptedTurn((*chunks, UsageDelta(Usage(input_tokens=60, output_tokens=len(words))), FinishDelta("stop")))


def _agent_factory(profile: str, base_url: str | None, client: Any) -> Callable[[], Agent[Any]]:
    if profile == "http":
        return lambda: Agent(
            name="calc", model=OpenAIChatProvider("bench", api_key="x", base_url=base_url, client=client), tools=[add]
        )
    return lambda: Agent(
        name="calc", model=ScriptedProvider([call("add", {"a": 2, "b": 3}), _answer_turn(profile)]), tools=[add]
    )


async def _timed(agent: Agent[Any], tracer: Any) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = await Runner.run(agent, QUESTION, tracer=tracer)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.turns == STEPS_PER_RUN, result.turns
    return cpu, wall


@dataclass
class Samples:
    """One mode's timings: per repetition, one value per run."""

    cpu: list[list[float]] = field(default_factory=list)
    wall: list[list[float]] = field(default_factory=list)


@dataclass
class Measured:
    """The timings of one workload, per mode (``off``, ``sdk``, ``on``)."""

    profile: str
    modes: dict[str, Samples] = field(default_factory=lambda: {m: Samples() for m in MODES})
    spans_per_run: float = 0.0
    span_cost: float = 0.0  # CPU seconds per span of the SDK alone, in a tight loop


class _ReplaySpan:
    __slots__ = ("_attrs", "_kind", "_name", "_span", "_start", "_token")

    def __init__(self, start: Any, name: str, kind: Any, attrs: dict[str, Any]) -> None:
        self._start, self._name, self._kind, self._attrs = start, name, kind, attrs

    def __enter__(self) -> _ReplaySpan:
        self._span = self._start(self._name, kind=self._kind, attributes=self._attrs)
        self._token = otel_context.attach(otel_trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)
        self._span.end()

    def set_attribute(self, key: str, value: Any) -> None:
        """Already given at the start."""

    def record_response(self, response: Any) -> None:
        """Already given at the start."""

    def record_exception(self, exc: BaseException) -> None:
        """Not expected in these workloads."""


class SdkFloorTracer:
    """The SDK's public-API floor inside the same run: emits the spans a traced run exports, nothing else.

    Given the spans of one run as ``OpenTelemetryTracer`` exported them, the n-th ``span()`` call
    of a run starts the n-th of those spans with ``Tracer.start_span``, its final name, kind and
    all of its attributes at once, makes it current and ends it; setting attributes later costs
    nothing. No adapter using ``Tracer.start_span`` can emit the same spans for less (it cannot
    know a call's usage when the call starts), so the difference to tracing off is what the SDK's
    span objects cost, measured with the loop around it.
    """

    detail_spans = True

    def __init__(self, provider: TracerProvider, spans: Sequence[ReadableSpan]) -> None:
        start = provider.get_tracer("lovia").start_span
        ordered = sorted(spans, key=lambda s: s.start_time or 0)
        self._script = [(start, s.name, s.kind, dict(s.attributes or {})) for s in ordered]
        self._next = 0

    def span(self, name: str, /, **attrs: Any) -> _ReplaySpan:
        """The next recorded span (the first again at each ``run``)."""
        if name == "run":
            self._next = 0
        spec = self._script[self._next]
        self._next += 1
        return _ReplaySpan(*spec)


class _DirectReplaySpan:
    __slots__ = ("_spec", "_token")

    def __init__(self, spec: tuple[Any, ...]) -> None:
        self._spec = spec

    def __enter__(self) -> _DirectReplaySpan:
        pipe, name, kind, attrs = self._spec
        context = otel_context.get_current()
        parent = otel_trace.get_current_span(context).get_span_context()
        trace_id = parent.trace_id if parent.is_valid else pipe.generate_trace_id()
        result = pipe.sampler.should_sample(context, trace_id, name, kind, attrs, ())
        flags = otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED | pipe.random_flag)
        ctx = otel_trace.SpanContext(trace_id, pipe.generate_span_id(), False, flags, result.trace_state)
        self._spec = (pipe, name, kind, attrs, ctx, parent if parent.is_valid else None, time.time_ns())
        self._token = otel_context.attach(otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(ctx), context))
        return self

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)
        pipe, name, kind, attrs, ctx, parent, start = self._spec
        span = ReadableSpan(
            name,
            ctx,
            parent,
            pipe.tracer.resource,
            attrs,
            (),
            (),
            kind,
            pipe.info,
            _UNSET,
            start,
            time.time_ns(),
            pipe.scope,
        )
        for on_end in pipe.on_ends:
            on_end(span)

    def set_attribute(self, key: str, value: Any) -> None:
        """Already given at the start."""

    def record_response(self, response: Any) -> None:
        """Already given at the start."""

    def record_exception(self, exc: BaseException) -> None:
        """Not expected in these workloads."""


class DirectFloorTracer:
    """The floor of the direct path ``OpenTelemetryTracer`` takes with the SDK's provider.

    Like :class:`SdkFloorTracer` it replays a traced run's spans, finished attributes given at
    the start, but the way the direct path does it and with nothing of lovia's: ask the sampler,
    take ids from the id generator, make a span with the new context current, then hand one
    ``ReadableSpan`` to the processors. What is left of ``on`` above it is lovia's own work
    (mapping attributes, naming spans, the loop's tracing calls).
    """

    detail_spans = True

    def __init__(self, provider: TracerProvider, spans: Sequence[ReadableSpan]) -> None:
        pipe = sdk_pipeline(provider.get_tracer("lovia"))
        assert pipe is not None, "the direct path is not available with this SDK"
        ordered = sorted(spans, key=lambda s: s.start_time or 0)
        self._script = [(pipe, s.name, s.kind, dict(s.attributes or {})) for s in ordered]
        self._next = 0

    def span(self, name: str, /, **attrs: Any) -> _DirectReplaySpan:
        """The next recorded span (the first again at each ``run``)."""
        if name == "run":
            self._next = 0
        spec = self._script[self._next]
        self._next += 1
        return _DirectReplaySpan(spec)


async def _one_run_spans(make: Callable[[], Agent[Any]]) -> list[ReadableSpan]:
    """The spans one traced run exports (kept in memory)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await Runner.run(make(), QUESTION, tracer=OpenTelemetryTracer(tracer_provider=provider))
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    return spans


def _span_cost(spans: list[ReadableSpan], n: int = 300, repeats: int = 5) -> float:
    """CPU seconds per span the SDK spends on ``spans`` alone, in a tight loop (batch processor)."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(CountingDropExporter()))
    tracer = SdkFloorTracer(provider, spans)
    times: list[float] = []
    for _ in range(repeats + 1):
        gc.collect()
        t0 = time.process_time()
        for _ in range(n):
            for spec in tracer._script:
                with _ReplaySpan(*spec):
                    pass
        times.append((time.process_time() - t0) / (n * len(spans)))
    provider.shutdown()
    return statistics.median(times[1:])


async def _measure(profile: str, runs: int, repeats: int) -> Measured:
    endpoint = _Endpoint() if profile == "http" else None
    try:
        if endpoint is None:
            return await _measure_with(profile, runs, repeats, None, None)
        import httpx

        async with httpx.AsyncClient(timeout=30) as client:
            return await _measure_with(profile, runs, repeats, endpoint.base_url, client)
    finally:
        if endpoint is not None:
            endpoint.close()


async def _measure_with(profile: str, runs: int, repeats: int, base_url: str | None, client: Any) -> Measured:
    make = _agent_factory(profile, base_url, client)
    spans = await _one_run_spans(make)
    exporter = CountingDropExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracers: dict[str, Any] = {
        "off": None,
        "sdk": SdkFloorTracer(provider, spans),
        "direct": DirectFloorTracer(provider, spans),
        "on": OpenTelemetryTracer(tracer_provider=provider),
    }
    out = Measured(profile)
    for _ in range(max(10, runs // 5)):  # warm up every path
        for tracer in tracers.values():
            await _timed(make(), tracer)
    provider.force_flush()
    exporter.count = 0
    for rep in range(repeats):
        gc.collect()
        samples = {mode: ([], []) for mode in MODES}  # type: dict[str, tuple[list[float], list[float]]]
        for i in range(runs):
            # The modes take turns run by run, in a rotating order, so load changes on a shared
            # machine hit all of them alike.
            k = (i + rep) % len(MODES)
            for mode in MODES[k:] + MODES[:k]:
                agent = make()  # outside the clock: building the agent is not the step
                cpu, wall = await _timed(agent, tracers[mode])
                samples[mode][0].append(cpu)
                samples[mode][1].append(wall)
        for mode, (cpu_values, wall_values) in samples.items():
            out.modes[mode].cpu.append(cpu_values)
            out.modes[mode].wall.append(wall_values)
    provider.force_flush()
    out.spans_per_run = exporter.count / (runs * repeats * 3)  # the three traced modes export alike
    provider.shutdown()
    out.span_cost = _span_cost(spans)
    return out


# --------------------------------------------------------------------------- report


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def _flat(reps: list[list[float]]) -> list[float]:
    return [v for rep in reps for v in rep]


def _mode_line(label: str, reps: list[list[float]]) -> str:
    med = statistics.median(_flat(reps))
    meds = [statistics.median(r) for r in reps]
    return (
        f"    {label}: {med * 1e3:7.3f} ms/run {med / STEPS_PER_RUN * 1e3:7.3f} ms/step"
        f"  (repetitions {min(meds) * 1e3:.3f}-{max(meds) * 1e3:.3f}, mean {statistics.fmean(_flat(reps)) * 1e3:.3f})"
    )


def _ratio(base: list[list[float]], other: list[list[float]]) -> tuple[float, str]:
    """``other`` over ``base`` minus one (medians over all runs), and its spread as text."""
    overall = statistics.median(_flat(other)) / statistics.median(_flat(base)) - 1
    reps = [statistics.median(b) / statistics.median(a) - 1 for a, b in zip(base, other, strict=True)]
    low, high = _quartiles(reps)
    means = statistics.fmean(_flat(other)) / statistics.fmean(_flat(base)) - 1
    spread = f"repetitions {low * 100:+.1f}% .. {high * 100:+.1f}% (IQR), means {means * 100:+.1f}%"
    return overall, spread


def _report(m: Measured, limit: float) -> bool:
    off, sdk, direct, on = (m.modes[mode] for mode in MODES)
    spans = m.spans_per_run or 1.0
    print(
        f"{m.profile}: {STEPS_PER_RUN} steps/run, {spans:.0f} spans/run,"
        f" {len(off.cpu)} repetitions x {len(off.cpu[0])} runs per mode"
    )
    clocks = [("CPU time", off.cpu, sdk.cpu, direct.cpu, on.cpu)]
    if m.profile == "http":
        clocks.append(("wall clock", off.wall, sdk.wall, direct.wall, on.wall))
    verdict_overhead = 0.0
    floor_pct = 0.0
    for title, off_t, sdk_t, direct_t, on_t in clocks:
        print(f"  {title} (median per run and per step)")
        print(_mode_line("off", off_t))
        print(_mode_line("sdk", sdk_t) + "  <- the same spans through Tracer.start_span, nothing else")
        print(_mode_line("dir", direct_t) + "  <- the same spans the direct path's way, nothing of lovia's")
        print(_mode_line("on ", on_t))
        overhead, spread = _ratio(off_t, on_t)
        floor, floor_spread = _ratio(off_t, sdk_t)
        direct_floor, direct_spread = _ratio(off_t, direct_t)
        print(f"    overhead per step, on vs off: {overhead * 100:+.1f}%  [{spread}]")
        print(f"    SDK floor, sdk vs off:        {floor * 100:+.1f}%  [{floor_spread}]  (public API)")
        print(f"    direct-path floor, dir vs off: {direct_floor * 100:+.1f}%  [{direct_spread}]")
        if title == "CPU time":
            verdict_overhead, floor_pct = overhead, direct_floor
            base = statistics.median(_flat(off_t))
            floor_us = (statistics.median(_flat(sdk_t)) - base) * 1e6
            ours_us = (statistics.median(_flat(on_t)) - statistics.median(_flat(sdk_t))) * 1e6
            print(
                f"    per span: SDK {floor_us / spans:.1f} us in the run ({m.span_cost * 1e6:.1f} us in a tight loop:"
                f" {spans:.0f} x {m.span_cost * 1e6:.1f} = {spans * m.span_cost * 1e6:.0f} us"
                f" = {spans * m.span_cost / base * 100:.1f}% of the untraced run); lovia's adapter on top"
                f" {ours_us / spans:+.1f} us"
            )
            direct_us = (statistics.median(_flat(direct_t)) - base) * 1e6
            own_us = (statistics.median(_flat(on_t)) - statistics.median(_flat(direct_t))) * 1e6
            print(
                f"    per span: direct-path floor {direct_us / spans:.1f} us in the run, lovia's own work on it"
                f" {own_us / spans:+.1f} us"
            )
    ok = verdict_overhead <= limit
    note = ""
    if floor_pct > limit and not ok:
        note = (
            f"; the SDK's own work per span (the direct-path floor, no lovia code) is already"
            f" {floor_pct * 100:+.1f}% of a step here"
        )
    print(
        f"  {'PASS' if ok else 'MISS'} {m.profile}: {verdict_overhead * 100:+.1f}% per step (CPU time)"
        f" against at most {limit * 100:.0f}%{note}"
    )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="runs per mode per repetition (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions (default %(default)s)")
    parser.add_argument("--profile", choices=[*PROFILES, "all"], default="all")
    parser.add_argument("--limit", type=float, default=15.0, help="allowed overhead per step in percent")
    parser.add_argument("--check", action="store_true", help="exit 1 when the http workload (if run) misses")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve()
    limit = args.limit / 100
    print(
        f"tracing overhead: OpenTelemetryTracer + BatchSpanProcessor (dropping exporter) vs NoopTracer;"
        f" {args.runs} runs x {args.repeats} interleaved repetitions per mode, CPU time"
    )
    verdicts: dict[str, bool] = {}
    for profile in PROFILES if args.profile == "all" else (args.profile,):
        measured = asyncio.run(_measure(profile, args.runs, args.repeats))
        verdicts[profile] = _report(measured, limit)
    failed = [p for p, ok in verdicts.items() if not ok]
    summary = "all PASS" if not failed else "MISS on " + ", ".join(failed)
    if "http" in verdicts:
        # The target is per step of a real model call; the scripted steps do no I/O at all, so they
        # show what tracing costs relative to the loop's own work alone (docs/observability.md).
        http = "PASS" if verdicts["http"] else "MISS"
        summary += f"; the target workload (http, a step with a real model call): {http}"
    print(f"overall: {summary}")
    return 1 if args.check and not verdicts.get("http", all(verdicts.values())) else 0


if __name__ == "__main__":
    sys.exit(main())
