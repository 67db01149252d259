"""The direct path from lovia's spans to the OpenTelemetry SDK's span processors.

With the SDK's own ``TracerProvider``, :class:`~lovia.tracing.OpenTelemetryTracer` does not open
SDK ``Span`` objects: a span's data (name, ids, parent, times, attributes, status, events, links)
is kept in lovia's own span while it is open, and at its end one ``ReadableSpan`` is built and
handed to the provider's span processors, the object the SDK itself would have handed them. The
provider's sampler, id generator, resource, instrumentation scope and span limits are applied the
way the SDK's ``Tracer.start_span`` applies them.

The path is only taken when it yields what the SDK would: :func:`sdk_pipeline` is the one place
that reads SDK internals (span limits, scope, tracer config, the processors), it accepts only the
SDK versions this module was checked against, and it declines (the adapter then uses the public
API) whenever a processor does work when a span starts (``on_start``/``_on_ending`` need a live
SDK span), the tracer is disabled, or the SDK's self-metrics are on.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace as trace_api
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, Status, StatusCode

if TYPE_CHECKING:
    from opentelemetry.util.types import AnyValue, Attributes

__all__ = [
    "UNSET",
    "SDK_VERSIONS",
    "Extra",
    "LiveSpan",
    "Recorded",
    "SdkPipeline",
    "end_span",
    "exception_event",
    "sdk_pipeline",
]

SDK_VERSIONS = ((1, 45), (1, 46))
"""``[lowest, above highest)`` SDK ``major.minor`` whose internals this module was checked against."""

# Processors whose on_start and _on_ending are known to do nothing: they only need the ended span.
_INERT_ON_START = frozenset(
    {sdk_trace.SpanProcessor.on_start, SimpleSpanProcessor.on_start, BatchSpanProcessor.on_start}
)
_INERT_ON_ENDING = frozenset(
    {sdk_trace.SpanProcessor._on_ending, SimpleSpanProcessor._on_ending, BatchSpanProcessor._on_ending}
)
_MULTI = (sdk_trace.SynchronousMultiSpanProcessor, sdk_trace.ConcurrentMultiSpanProcessor)
UNSET = _UNSET = Status(StatusCode.UNSET)


def _version(text: str) -> tuple[int, int]:
    try:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


try:
    from opentelemetry.sdk.version import __version__ as _sdk_version

    _INSTALLED = _version(_sdk_version)
except ImportError:  # pragma: no cover - every SDK release has it
    _INSTALLED = (0, 0)


class SdkPipeline:
    """What the SDK's ``Tracer`` would apply to a span, read once (see :func:`sdk_pipeline`)."""

    __slots__ = (
        "generate_span_id",
        "generate_trace_id",
        "info",
        "limits",
        "max_attributes",
        "on_ends",
        "plain",
        "processors",
        "random_flag",
        "sampler",
        "scope",
        "tracer",
    )

    def __init__(self, tracer: Any, processors: tuple[Any, ...], limits: Any, scope: InstrumentationScope) -> None:
        self.tracer = tracer  # its ``resource`` is read at each span's end: the SDK replaces it after a fork
        self.processors = processors
        multi = tracer.span_processor
        # The synchronous multi-processor only loops over its processors: call them directly.
        synchronous = type(multi) is sdk_trace.SynchronousMultiSpanProcessor
        self.on_ends = tuple(p.on_end for p in processors) if synchronous else (multi.on_end,)
        self.sampler = tracer.sampler
        ids = tracer.id_generator
        self.generate_trace_id = ids.generate_trace_id
        self.generate_span_id = ids.generate_span_id
        is_random = getattr(ids, "is_trace_id_random", None)
        self.random_flag = trace_api.TraceFlags.RANDOM_TRACE_ID if is_random is not None and is_random() else 0
        self.info = tracer.instrumentation_info
        self.scope = scope
        self.limits = limits
        self.max_attributes: int = sys.maxsize if limits.max_span_attributes is None else limits.max_span_attributes
        # Our own attribute values are already valid; without a length limit they need no cleaning.
        self.plain = limits.max_span_attribute_length is None


def sdk_pipeline(tracer: object, previous: SdkPipeline | None = None) -> SdkPipeline | None:
    """The direct path for spans of the SDK ``tracer``, or ``None`` to use the public API.

    The only function that reads SDK internals; ``previous`` is returned when nothing changed
    (the processors are a new tuple whenever one is added).
    """
    if type(tracer) is not sdk_trace.Tracer:  # another SDK, the API's no-op tracer, a subclass
        return None
    low, high = SDK_VERSIONS
    if not low <= _INSTALLED < high:
        return None
    try:
        multi = tracer.span_processor
        processors = multi._span_processors
        if previous is not None and previous.tracer is tracer and previous.processors is processors:
            return previous if tracer._tracer_config.is_enabled else None
        from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics

        limits = tracer._span_limits
        scope = tracer._instrumentation_scope
        enabled = tracer._tracer_config.is_enabled
        quiet = type(tracer._tracer_metrics) is NoOpTracerMetrics
    except (AttributeError, ImportError, TypeError):
        return None
    if not (enabled is True and quiet and type(multi) in _MULTI and isinstance(processors, tuple)):
        return None
    if not isinstance(limits, sdk_trace.SpanLimits) or not isinstance(scope, InstrumentationScope):
        return None
    for processor in processors:
        kind = type(processor)
        if kind.on_start not in _INERT_ON_START or kind._on_ending not in _INERT_ON_ENDING:
            return None
    return SdkPipeline(tracer, processors, limits, scope)


class Extra:
    """What few spans have: events, links, a status other than UNSET."""

    __slots__ = ("events", "links", "status")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.links: list[Link] = []
        self.status: Status = _UNSET


class Recorded:
    """The part of a direct-path span that :class:`LiveSpan` and :func:`end_span` work on."""

    __slots__ = ("_clean", "_ctx", "_extra", "_name", "_out", "_recording")

    _ctx: trace_api.SpanContext
    _name: str
    _out: dict[str, Any]
    _clean: bool  # only lovia's own (already valid) values in ``_out``
    _recording: bool  # false before the start, after the end, and for spans the sampler dropped
    _extra: Extra | None

    def _raw(self, attributes: Mapping[str, Any]) -> None:
        if self._recording:
            # A cleaned copy now, as the SDK takes one: later changes to the caller's values do not leak in.
            self._out.update(BoundedAttributes(None, attributes))
            self._clean = False

    def _more(self) -> Extra:
        extra = self._extra
        if extra is None:
            extra = self._extra = Extra()
        return extra

    def _set_status(self, status: Status) -> None:
        # The SDK's rule: an OK status is final, UNSET never overwrites.
        if not self._recording or status.status_code is StatusCode.UNSET:
            return
        extra = self._more()
        if extra.status.status_code is not StatusCode.OK:
            extra.status = status

    def _add_event(self, event: Event) -> None:
        if self._recording:
            self._more().events.append(event)

    def _add_link(self, context: trace_api.SpanContext, attributes: Attributes) -> None:
        if self._recording and (context.is_valid or attributes):  # the SDK's test of a usable link
            self._more().links.append(Link(context, attributes))


def exception_event(
    exc: BaseException, attributes: Attributes = None, timestamp: int | None = None, escaped: bool = False
) -> Event:
    """The ``exception`` event the SDK's ``Span.record_exception`` adds (before limits)."""
    module = type(exc).__module__
    qualname = type(exc).__qualname__
    attrs: dict[str, AnyValue] = {
        "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
        "exception.message": str(exc),
        "exception.stacktrace": "".join(traceback.format_exception(exc)),
        "exception.escaped": str(escaped),
    }
    if attributes:
        attrs.update(attributes)
    return Event("exception", attrs, timestamp)


class LiveSpan(trace_api.Span):
    """The current OpenTelemetry span user code sees inside a direct-path span (a tool, a hook).

    It carries the span's context, so spans the user opens become its children, and what the user
    sets on it (attributes, events, links, status, name) lands on lovia's span. ``end`` does
    nothing: lovia ends its spans when their block closes.
    """

    __slots__ = ("_span",)

    def __init__(self, span: Recorded) -> None:
        self._span = span

    def get_span_context(self) -> trace_api.SpanContext:
        """The context of lovia's span."""
        return self._span._ctx

    def is_recording(self) -> bool:
        """True until lovia's span ends."""
        return self._span._recording

    def set_attribute(self, key: str, value: AnyValue) -> None:
        """Set one attribute under exactly this key."""
        self._span._raw({key: value})

    def set_attributes(self, attributes: Mapping[str, AnyValue]) -> None:
        """Set several attributes under exactly these keys."""
        self._span._raw(attributes)

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        """Add an event."""
        self._span._add_event(Event(name, BoundedAttributes(None, attributes) if attributes else None, timestamp))

    def add_link(self, context: trace_api.SpanContext, attributes: Attributes = None) -> None:
        """Add a link."""
        self._span._add_link(context, attributes)

    def update_name(self, name: str) -> None:
        """Rename the span."""
        if self._span._recording:
            self._span._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set the status (an OK status is final, as in the SDK)."""
        self._span._set_status(status if isinstance(status, Status) else Status(status, description))

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """Record an ``exception`` event."""
        self._span._add_event(exception_event(exception, attributes, timestamp, escaped))

    def end(self, end_time: int | None = None) -> None:
        """Nothing: lovia ends this span itself."""


def _bounded_events(limits: Any, events: Sequence[Event]) -> BoundedList[Any]:
    bounded = [
        Event(
            e.name,
            BoundedAttributes(
                limits.max_event_attributes, e.attributes, immutable=True, max_value_len=limits.max_attribute_length
            ),
            e.timestamp,
        )
        for e in events
    ]
    return BoundedList.from_seq(limits.max_events, bounded)


def _bounded_links(limits: Any, links: Sequence[Link]) -> BoundedList[Any]:
    bounded = [
        Link(
            link.context,
            BoundedAttributes(
                limits.max_link_attributes, link.attributes, immutable=True, max_value_len=limits.max_attribute_length
            ),
        )
        for link in links
    ]
    return BoundedList.from_seq(limits.max_links, bounded)


def end_span(
    pipe: SdkPipeline,
    span: Recorded,
    kind: trace_api.SpanKind,
    parent: trace_api.SpanContext | None,
    start: int,
    end: int,
) -> None:
    """Hand the ended ``span`` to the provider's processors as the ``ReadableSpan`` the SDK would build."""
    out = span._out
    extra = span._extra
    limits = pipe.limits
    attributes: Any = out  # nothing to clean or drop; nobody else holds it
    if not (span._clean and pipe.plain and len(out) <= pipe.max_attributes):
        attributes = BoundedAttributes(
            limits.max_span_attributes, out, immutable=True, max_value_len=limits.max_span_attribute_length
        )
    readable = ReadableSpan(
        span._name,
        span._ctx,
        parent,
        pipe.tracer.resource,
        attributes,
        () if extra is None or not extra.events else _bounded_events(limits, extra.events),
        () if extra is None or not extra.links else _bounded_links(limits, extra.links),
        kind,
        pipe.info,
        _UNSET if extra is None else extra.status,
        start,
        end,
        pipe.scope,
    )
    for on_end in pipe.on_ends:
        on_end(readable)
