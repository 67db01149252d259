"""Tracing: a tiny span protocol with no-op, console, in-memory and OpenTelemetry implementations.

Spans the loop opens (see :class:`SpanName`): ``run`` (agent, run_id; at end turns, total_tokens,
resumed), ``turn`` (turn), ``model_call`` (model, turn, system; at end input/output/cache tokens,
finish_reason), ``tool_call`` (name, call_id), ``handoff`` (from_agent, to_agent), ``guardrail``
(kind) and ``checkpoint_save``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, TextIO, runtime_checkable

if TYPE_CHECKING:
    from ._otel import OpenTelemetryTracer

__all__ = [
    "ConsoleTracer",
    "InMemoryTracer",
    "NoopTracer",
    "OpenTelemetryTracer",
    "RecordedSpan",
    "Span",
    "SpanName",
    "Tracer",
    "detail_span",
    "handoff_span",
    "link_first_attempt",
    "model_call_span",
    "record_model_response",
    "record_run_end",
    "record_tool_io",
    "run_span",
    "span_ref",
    "tool_call_span",
]


class SpanName(str, Enum):
    """The names of the spans lovia opens (a ``str``, so ``SpanName.RUN == "run"``)."""

    RUN = "run"
    TURN = "turn"
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    HANDOFF = "handoff"
    GUARDRAIL = "guardrail"
    CHECKPOINT_SAVE = "checkpoint_save"

    def __str__(self) -> str:
        return self.value


@runtime_checkable
class Span(Protocol):
    """An open span."""

    def set_attribute(self, key: str, value: Any) -> None: ...

    def record_exception(self, exc: BaseException) -> None: ...


@runtime_checkable
class Tracer(Protocol):
    """Opens spans: ``with tracer.span("tool_call", name=...) as span: ...``."""

    def span(self, name: str, /, **attrs: Any) -> AbstractContextManager[Span]: ...


@dataclass(slots=True)
class RecordedSpan:
    """A span kept by :class:`InMemoryTracer`: its name, attributes, duration and exception."""

    name: str
    attrs: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    """Milliseconds from start to end (0 while the span is open)."""
    exception: BaseException | None = None
    """The exception that escaped the span, if any."""
    parent: RecordedSpan | None = None
    """The span that was open around this one in the same task (``None`` for a root)."""
    start: float = 0.0
    """``time.perf_counter()`` when the span opened."""

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute."""
        self.attrs[key] = value

    def record_exception(self, exc: BaseException) -> None:
        """Remember the exception that ended the span."""
        self.exception = exc

    @property
    def attributes(self) -> dict[str, Any]:
        """Alias of ``attrs``."""
        return self.attrs

    @property
    def error(self) -> BaseException | None:
        """Alias of ``exception``."""
        return self.exception


class _NoopSpan:
    __slots__ = ()

    def set_attribute(self, key: str, value: Any) -> None:
        """Ignore."""

    def record_exception(self, exc: BaseException) -> None:
        """Ignore."""


_NOOP_SPAN = _NoopSpan()


class _NoopContext:
    __slots__ = ()

    def __enter__(self) -> _NoopSpan:
        return _NOOP_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NOOP_CONTEXT = _NoopContext()


class NoopTracer:
    """The default: records nothing and costs almost nothing."""

    def span(self, name: str, /, **attrs: Any) -> AbstractContextManager[Span]:
        """A shared no-op span."""
        return _NOOP_CONTEXT


class InMemoryTracer:
    """Keeps every span in ``spans`` (for tests and debugging), with its ``parent``.

    Spans are listed in the order they open. ``detail_spans=True`` also records the finer spans
    (``turn``, ``guardrail``, ``checkpoint_save``); by default only ``run``, ``model_call``,
    ``tool_call`` and ``handoff``.
    """

    def __init__(self, *, detail_spans: bool = False) -> None:
        self.spans: list[RecordedSpan] = []
        self.detail_spans = detail_spans
        from contextvars import ContextVar

        self._current: ContextVar[RecordedSpan | None] = ContextVar(f"lovia_span_{id(self)}", default=None)

    @contextmanager
    def span(self, name: str, /, **attrs: Any) -> Iterator[RecordedSpan]:
        """Record a span around the block."""
        rec = RecordedSpan(name=str(name), attrs=dict(attrs), parent=self._current.get(), start=time.perf_counter())
        self.spans.append(rec)
        token = self._current.set(rec)
        try:
            yield rec
        except BaseException as exc:
            rec.record_exception(exc)
            raise
        finally:
            rec.duration_ms = (time.perf_counter() - rec.start) * 1000
            self._current.reset(token)
            self._finished(rec)

    def _finished(self, rec: RecordedSpan) -> None:
        """Called as each span ends (a hook for subclasses)."""


class ConsoleTracer(InMemoryTracer):
    """Logs each span that took at least ``min_duration_ms`` when it ends, indented by depth.

    The lines go to ``logger`` at INFO, by default the ``lovia.tracing`` logger (so they show once
    logging is on, e.g. with :func:`lovia.enable_logging`); with ``stream=`` they are printed to
    that stream instead. The format is for people and may change.
    """

    def __init__(
        self,
        *,
        logger: logging.Logger | None = None,
        min_duration_ms: float = 0.0,
        stream: TextIO | None = None,
        detail_spans: bool = False,
    ) -> None:
        super().__init__(detail_spans=detail_spans)
        self.logger = logger
        self.min_duration_ms = min_duration_ms
        self.stream = stream

    def _finished(self, rec: RecordedSpan) -> None:
        if rec.duration_ms >= self.min_duration_ms:
            self._print(rec)

    def _print(self, rec: RecordedSpan) -> None:
        depth, parent = 0, rec.parent
        while parent is not None:
            depth, parent = depth + 1, parent.parent
        attrs_text = " ".join(f"{k}={v}" for k, v in rec.attrs.items())
        status = " error" if rec.exception else ""
        line = f"{'  ' * depth}{rec.name} {rec.duration_ms:.1f}ms{status} {attrs_text}".rstrip()
        if self.stream is not None and self.logger is None:
            print(f"[lovia] {line}", file=self.stream)
        else:
            (self.logger or _CONSOLE_LOGGER).info("%s", line)


_CONSOLE_LOGGER = logging.getLogger("lovia.tracing")


# ---------------------------------------------------------------------- helpers the loop calls

DETAIL_SPANS = frozenset({SpanName.TURN.value, SpanName.GUARDRAIL.value, SpanName.CHECKPOINT_SAVE.value})


def detail_span(tracer: Tracer, name: str, /, **attrs: Any) -> AbstractContextManager[Span]:
    """Open one of the finer spans (turn, guardrail, checkpoint save) if the tracer wants them.

    A tracer opts in with a true ``detail_spans`` attribute (``OpenTelemetryTracer`` does by
    default); others keep seeing only the four coarse span kinds.
    """
    if getattr(tracer, "detail_spans", False):
        return tracer.span(name, **attrs)
    return _NOOP_CONTEXT


def run_span(tracer: Tracer, *, agent: str, run_id: str) -> AbstractContextManager[Span]:
    """Open the ``run`` span."""
    return tracer.span(SpanName.RUN.value, agent=agent, run_id=run_id)


def model_call_span(
    tracer: Tracer, *, model: str | None, turn: int, system: str | None = None
) -> AbstractContextManager[Span]:
    """Open a ``model_call`` span (one per attempt, so a retried call shows as two)."""
    if system is None:
        return tracer.span(SpanName.MODEL_CALL.value, model=model, turn=turn)
    return tracer.span(SpanName.MODEL_CALL.value, model=model, turn=turn, system=system)


def tool_call_span(tracer: Tracer, *, name: str, call_id: str) -> AbstractContextManager[Span]:
    """Open a ``tool_call`` span."""
    return tracer.span(SpanName.TOOL_CALL.value, name=name, call_id=call_id)


def handoff_span(tracer: Tracer, *, from_agent: str, to_agent: str) -> AbstractContextManager[Span]:
    """Open a ``handoff`` span."""
    return tracer.span(SpanName.HANDOFF.value, from_agent=from_agent, to_agent=to_agent)


def record_run_end(span: Span, *, turns: int, total_tokens: int, resumed: bool | None = None) -> None:
    """Set the attributes a finished run adds to its span (in one call when the span takes several)."""
    if type(span) is _NoopSpan:
        return
    bulk = getattr(span, "set_attributes", None)
    if bulk is None:
        span.set_attribute("turns", turns)
        span.set_attribute("total_tokens", total_tokens)
        if resumed is not None:
            span.set_attribute("resumed", resumed)
        return
    attrs: dict[str, Any] = {"turns": turns, "total_tokens": total_tokens}
    if resumed is not None:
        attrs["resumed"] = resumed
    bulk(attrs)


def record_model_response(span: Span, response: Any) -> None:
    """Put one model response's usage, finish reason and (opt-in) text on its span.

    ``response`` is anything with ``usage`` (a :class:`~lovia.messages.Usage`), ``finish_reason``
    and ``text`` (a list of fragments), like the loop's turn assembler. The text is only joined
    when the span asks for content (``span.captures_content``), so this stays cheap otherwise.
    """
    if type(span) is _NoopSpan:
        return
    own = getattr(span, "record_response", None)
    if own is not None:  # the tracer maps the response itself (OpenTelemetry: one SDK call)
        own(response)
        return
    attrs: dict[str, Any] = {}
    usage = getattr(response, "usage", None)
    if usage is not None:
        attrs["input_tokens"] = usage.input_tokens
        attrs["output_tokens"] = usage.output_tokens
        if usage.cache_read_tokens:
            attrs["cache_read_tokens"] = usage.cache_read_tokens
        if usage.cache_write_tokens:
            attrs["cache_write_tokens"] = usage.cache_write_tokens
    reason = getattr(response, "finish_reason", None)
    if reason:
        attrs["finish_reason"] = reason
    if getattr(span, "captures_content", False):
        text = getattr(response, "text", None)
        if text:
            attrs["output_text"] = "".join(text) if isinstance(text, Sequence) else str(text)
    bulk = getattr(span, "set_attributes", None)
    if bulk is not None:
        bulk(attrs)
    else:
        for key, value in attrs.items():
            span.set_attribute(key, value)


def record_tool_io(span: Span, arguments: str, result: Any) -> None:
    """Put a tool call's arguments (raw JSON) and result text on its span, only when content is captured."""
    if not getattr(span, "captures_content", False):
        return
    span.set_attribute("arguments", arguments)
    span.set_attribute("result", result if isinstance(result, str) else repr(result))


def __getattr__(name: str) -> Any:
    # The OpenTelemetry adapter imports nothing heavy itself, but keep it out of the import path.
    if name == "OpenTelemetryTracer":
        from ._otel import OpenTelemetryTracer

        return OpenTelemetryTracer
    raise AttributeError(f"module 'lovia.tracing' has no attribute {name!r}")


def span_ref(span: Span) -> dict[str, str] | None:
    """``{"trace_id", "span_id"}`` of ``span`` when its tracer has ids (OpenTelemetry), else ``None``.

    A run keeps its first attempt's reference in the checkpoint head, so a resumed attempt, in
    any process, can :func:`link_first_attempt` to it.
    """
    ref = getattr(span, "trace_ref", None)
    return ref() if callable(ref) else None


def link_first_attempt(span: Span, ref: dict[str, str]) -> None:
    """Link a resumed run's span to its first attempt (a no-op for tracers without links)."""
    link = getattr(span, "link_first_attempt", None)
    if callable(link):
        link(ref)
