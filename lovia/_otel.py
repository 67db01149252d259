"""OpenTelemetry adapter for lovia's span protocol (extra ``lovia[otel]``).

Our span names and attributes are mapped onto the GenAI semantic conventions: a ``run`` becomes an
``invoke_agent`` span, a ``model_call`` a ``chat`` client span with ``gen_ai.request.model``,
``gen_ai.usage.*`` and ``gen_ai.response.finish_reasons``, a ``tool_call`` an ``execute_tool``
span with ``gen_ai.tool.name``. Parenthood follows the OpenTelemetry context (a contextvar), so a
sub-run of an agent-as-tool nests under its ``tool_call`` and joins the caller's trace.

Spans open on every model and tool call, so they are kept cheap. With the SDK's own
``TracerProvider`` no SDK ``Span`` is created: :class:`_DirectSpan` keeps the span's data and
hands the provider's processors one finished ``ReadableSpan`` (:mod:`lovia._otel_sdk` says when
that path is taken and what it applies); any other provider goes through the public API
(:class:`_Span`). Either way each span kind's key mapping, constant attributes, display-name
rule and kind are resolved once per tracer (:class:`_Kind`), values of the common types pass
through untouched, and attributes no one exports (content without ``capture_content``, anything
on a span the sampler dropped) are not built.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .exceptions import UserError

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import SpanContext, SpanKind, TracerProvider

__all__ = ["OpenTelemetryTracer"]

_COMMON = {
    "run_id": "lovia.run_id",
    "turn": "lovia.turn",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
}
_KEYS: dict[str, dict[str, str]] = {
    "run": {
        "agent": "gen_ai.agent.name",
        "turns": "lovia.run.turns",
        "total_tokens": "lovia.usage.total_tokens",
        "resumed": "lovia.run.resumed",
        "session_id": "gen_ai.conversation.id",
    },
    "model_call": {
        "model": "gen_ai.request.model",
        "system": "gen_ai.provider.name",
        "response_model": "gen_ai.response.model",
        "finish_reason": "gen_ai.response.finish_reasons",
        "output_text": "gen_ai.output.messages",
        "input_messages": "gen_ai.input.messages",
    },
    "tool_call": {
        "name": "gen_ai.tool.name",
        "call_id": "gen_ai.tool.call.id",
        "arguments": "gen_ai.tool.call.arguments",
        "result": "gen_ai.tool.call.result",
    },
    "handoff": {"from_agent": "lovia.handoff.from_agent", "to_agent": "lovia.handoff.to_agent"},
    "guardrail": {"kind": "lovia.guardrail.kind", "name": "lovia.guardrail.name", "tripped": "lovia.guardrail.tripped"},
    "checkpoint_save": {"status": "lovia.checkpoint.status"},
}
_OPERATION = {"run": "invoke_agent", "model_call": "chat", "tool_call": "execute_tool"}
# The display name the conventions ask for, ``{operation} {target}``: (prefix, attribute of the target).
_LABEL = {
    "run": ("invoke_agent", "agent"),
    "model_call": ("chat", "model"),
    "tool_call": ("execute_tool", "name"),
    "turn": ("turn", "turn"),
    "guardrail": ("guardrail", "kind"),
}
# Prompt/completion text and tool payloads: only exported with capture_content=True.
_CONTENT = frozenset({"output_text", "input_messages", "arguments", "result"})
_SKIP = ""  # the mapped key of an attribute that is not exported
_PLAIN = frozenset({str, int, bool, float})
_MAX_REMEMBERED_RUNS = 10_000
_MAX_CACHED = 256  # cap on lazily mapped span names and keys (callers name them in code, but still)

try:  # module globals: the quickest lookup on the hot path
    from time import time_ns as _time_ns

    from opentelemetry.context import attach as _attach
    from opentelemetry.context import detach as _detach
    from opentelemetry.context import get_current as _get_current
    from opentelemetry.sdk.trace import ReadableSpan as _ReadableSpan
    from opentelemetry.sdk.trace.sampling import Decision as _Decision
    from opentelemetry.trace import NonRecordingSpan as _NonRecordingSpan
    from opentelemetry.trace import SpanContext as _SpanContext
    from opentelemetry.trace import Status as _Status
    from opentelemetry.trace import StatusCode as _StatusCode
    from opentelemetry.trace import TraceFlags as _TraceFlags
    from opentelemetry.trace import get_current_span as _get_current_span
    from opentelemetry.trace import set_span_in_context as _set_span_in_context

    # The direct path needs the SDK as well; with the API alone spans go through the public API.
    from ._otel_sdk import UNSET as _UNSET
    from ._otel_sdk import LiveSpan as _LiveSpan
    from ._otel_sdk import Recorded as _Recorded
    from ._otel_sdk import SdkPipeline as _SdkPipeline
    from ._otel_sdk import end_span as _end_span
    from ._otel_sdk import exception_event as _exception_event
    from ._otel_sdk import sdk_pipeline as _sdk_pipeline

    _RECORD_AND_SAMPLE = _Decision.RECORD_AND_SAMPLE
    _DROP = _Decision.DROP
    _new_live = _LiveSpan.__new__
    _SAMPLED = _TraceFlags.SAMPLED
    _RANDOM = getattr(_TraceFlags, "RANDOM_TRACE_ID", 0)
    _FLAGS = {f: _TraceFlags(f) for f in (0, _SAMPLED, _RANDOM, _SAMPLED | _RANDOM)}
except ImportError:  # the extra is missing: OpenTelemetryTracer() says how to install it

    class _Recorded:  # type: ignore[no-redef]
        __slots__ = ()


_INPUT_TOKENS = _COMMON["input_tokens"]
_OUTPUT_TOKENS = _COMMON["output_tokens"]
_CACHE_READ = _COMMON["cache_read_tokens"]
_CACHE_WRITE = _COMMON["cache_write_tokens"]
_FINISH_REASONS = _KEYS["model_call"]["finish_reason"]
_OUTPUT_TEXT = _KEYS["model_call"]["output_text"]


def _otel_key(span_name: str, key: str) -> str:
    table = _KEYS.get(span_name)
    if table is not None and key in table:
        return table[key]
    return _COMMON.get(key) or f"lovia.{key}"


def _otel_value(key: str, value: Any) -> Any:
    # Sequences become tuples, as the SDK stores them (the direct path hands values on as they are).
    if key == "finish_reason":
        return (str(value),)
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return tuple(value)
    return str(value)


class _Kind:
    """Everything about one span name that does not change between spans, resolved once."""

    __slots__ = (
        "base",
        "capture",
        "is_model",
        "is_run",
        "keys",
        "kind",
        "label",
        "label_key",
        "name",
        "passthrough",
        "start_span",
    )

    def __init__(self, name: str, kind: SpanKind, capture: bool, start_span: Any) -> None:
        self.name = name
        self.kind = kind
        self.capture = capture
        self.start_span = start_span
        self.is_run = name == "run"
        self.is_model = name == "model_call"
        operation = _OPERATION.get(name)
        self.base: dict[str, Any] = {} if operation is None else {"gen_ai.operation.name": operation}
        self.label, self.label_key = _LABEL.get(name, (name, ""))
        self.keys: dict[str, str] = {}
        for key in (*_COMMON, *_KEYS.get(name, ())):
            self.key(key)
        # Keys whose plain values are exported as they are (not content, not the finish reason).
        self.passthrough = {k: v for k, v in self.keys.items() if v and k != "finish_reason"}

    def key(self, key: str) -> str:
        """The exported name of ``key`` on this kind of span (``_SKIP`` for content not captured)."""
        mapped = self.keys.get(key)
        if mapped is None:
            mapped = _SKIP if key in _CONTENT and not self.capture else _otel_key(self.name, key)
            if len(self.keys) < _MAX_CACHED:
                self.keys[key] = mapped
        return mapped

    def start(self, attrs: dict[str, Any]) -> OtelSpan:
        """Start the SDK span for ``attrs`` (our names): display name, kind and mapped attributes."""
        name, out = self.build(attrs)
        span: OtelSpan = self.start_span(name, kind=self.kind, attributes=out)
        return span

    def build(self, attrs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The display name and the exported attributes of a span opened with ``attrs`` (our names)."""
        out = self.base.copy()
        passthrough = self.passthrough
        for key, value in attrs.items():
            mapped = passthrough.get(key)
            if mapped is not None and type(value) in _PLAIN:
                out[mapped] = value
            elif value is not None:  # an unknown key, a value to convert, content (maybe not captured)
                mapped = self.keys.get(key) or self.key(key)
                if mapped:
                    out[mapped] = _otel_value(key, value)
        if self.is_model:
            system = attrs.get("system")
            if system is not None:
                out["gen_ai.system"] = str(system)
        name = self.label
        if self.label_key:  # ``{operation} {target}``, just the operation when the target is missing
            target = attrs.get(self.label_key)
            if target is not None and target != "":
                name = f"{name} {target}"
        return name, out


def _response_attributes(out: dict[str, Any], response: Any, capture: bool) -> None:
    """Put a model response's usage, finish reason and (with ``capture``) text into ``out``,
    under their exported names."""
    usage = getattr(response, "usage", None)
    if usage is not None:
        out[_INPUT_TOKENS] = usage.input_tokens
        out[_OUTPUT_TOKENS] = usage.output_tokens
        if usage.cache_read_tokens:
            out[_CACHE_READ] = usage.cache_read_tokens
        if usage.cache_write_tokens:
            out[_CACHE_WRITE] = usage.cache_write_tokens
    reason = getattr(response, "finish_reason", None)
    if reason:
        out[_FINISH_REASONS] = (str(reason),)
    if capture:
        text = getattr(response, "text", None)
        if text:
            out[_OUTPUT_TEXT] = "".join(text) if isinstance(text, Sequence) else str(text)


class _SpanBasics(ABC):
    """What both span classes answer alike: their name, whether they capture content, their
    reference for a checkpoint, and the link from a resumed run to its first attempt.

    Holds no state of its own (the subclasses keep the slots); their constructors stay inline,
    as a span is made on every model and tool call.
    """

    __slots__ = ()

    _kind: _Kind
    run_id: str | None

    @property
    def name(self) -> str:
        """Our span name (``run``, ``model_call``, ...)."""
        return self._kind.name

    @property
    def captures_content(self) -> bool:
        """Whether prompt/answer text and tool payloads are exported on this span."""
        return self._kind.capture

    @property
    @abstractmethod
    def context(self) -> SpanContext:
        """The OpenTelemetry span context (trace and span id)."""

    def trace_ref(self) -> dict[str, str]:
        """This span's trace and span id as hex text (what a checkpoint keeps of the first attempt)."""
        ctx = self.context
        return {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}

    def _first_attempt(self, ref: dict[str, str]) -> SpanContext | None:
        """The first attempt's span named by a :meth:`trace_ref`, unless it is damaged or this span."""
        from opentelemetry.trace import SpanContext, TraceFlags

        try:
            first = SpanContext(
                trace_id=int(ref["trace_id"], 16),
                span_id=int(ref["span_id"], 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        except (KeyError, ValueError):
            return None  # a damaged reference only costs the link
        if first.span_id == self.context.span_id or not first.is_valid:
            return None
        return first


class _Span(_SpanBasics):
    """Our :class:`~lovia.tracing.Span` over an OpenTelemetry span, and its own context manager.

    A plain class rather than a generator-based context manager: spans are opened on every model
    and tool call, so each saved frame counts.
    """

    __slots__ = ("_attrs", "_kind", "_linked", "_owner", "_recording", "_span", "_token", "errored", "run_id")

    _span: OtelSpan  # set on entering the block

    def __init__(self, owner: OpenTelemetryTracer, kind: _Kind, attrs: dict[str, Any]) -> None:
        self._owner = owner
        self._kind = kind
        self._attrs = attrs
        self._recording = False
        self._token: Any = None
        self.errored = False
        self._linked = False
        run_id = attrs.get("run_id") if kind.is_run else None
        self.run_id = run_id if isinstance(run_id, str) else None

    def __enter__(self) -> _Span:
        self._span = span = self._kind.start(self._attrs)
        self._recording = span.is_recording()
        if self.run_id is not None:
            self._owner._remember(self)
        self._token = _attach(_set_span_in_context(span))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is not None:
                self.record_exception(exc)
        finally:
            _detach(self._token)
            self._span.end()

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute (mapped to its ``gen_ai.*``/``lovia.*`` name; content only when opted in)."""
        if value is None:
            return
        kind = self._kind
        mapped = kind.keys.get(key) or kind.key(key)
        if not mapped:
            return
        if self._recording:
            self._span.set_attribute(mapped, _otel_value(key, value))
            if key == "system" and kind.is_model:
                self._span.set_attribute("gen_ai.system", str(value))
        if key == "resumed" and value and self.run_id is not None:
            self._owner._link_to_first_attempt(self)

    def set_attributes(self, attrs: dict[str, Any]) -> None:
        """Set several attributes at once (one call into the SDK)."""
        kind = self._kind
        mapped: dict[str, Any] = {}
        for key, value in attrs.items():
            if value is None:
                continue
            name = kind.keys.get(key) or kind.key(key)
            if name:
                mapped[name] = _otel_value(key, value)
        if mapped and self._recording:
            self._span.set_attributes(mapped)
        if self.run_id is not None and attrs.get("resumed"):
            self._owner._link_to_first_attempt(self)

    def record_response(self, response: Any) -> None:
        """A model response's usage, finish reason and (when captured) text, in one SDK call.

        The fast path of :func:`lovia.tracing.record_model_response` for this tracer: the
        attributes are built under their exported names directly.
        """
        if not self._recording:
            return
        attrs: dict[str, Any] = {}
        _response_attributes(attrs, response, self._kind.capture)
        if attrs:
            self._span.set_attributes(attrs)

    def record_exception(self, exc: BaseException) -> None:
        """Record ``exc`` as an event, set ``error.type`` and an error status."""
        from opentelemetry.trace import Status, StatusCode

        if self.errored:
            return
        self.errored = True
        self._span.record_exception(exc)
        self._span.set_attribute("error.type", type(exc).__qualname__)
        self._span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))

    @property
    def context(self) -> SpanContext:
        """The OpenTelemetry span context (trace and span id)."""
        return self._span.get_span_context()

    def link_first_attempt(self, ref: dict[str, str]) -> None:
        """Link this run span to the first attempt's run span, named by :meth:`trace_ref` (any process)."""
        first = self._first_attempt(ref)
        if first is not None:
            self._link(first, {"lovia.link": "first_attempt", "lovia.run_id": self.run_id or ""})
            self._linked = True

    def _link(self, context: SpanContext, attributes: dict[str, Any]) -> None:
        self._span.add_link(context, attributes)


class _DirectSpan(_SpanBasics, _Recorded):
    """Our :class:`~lovia.tracing.Span` on the SDK's direct path (see :mod:`lovia._otel_sdk`).

    Its data is kept here while it is open; at its end one ``ReadableSpan`` goes to the
    provider's span processors. While it is open, a :class:`~lovia._otel_sdk.LiveSpan` with its
    context is the current OpenTelemetry span, so user code sees it as the parent of its own spans.
    """

    __slots__ = (
        "_attrs",
        "_kind",
        "_linked",
        "_owner",
        "_parent",
        "_pipe",
        "_recording",
        "_start",
        "_token",
        "errored",
        "run_id",
    )

    def __init__(self, owner: OpenTelemetryTracer, kind: _Kind, attrs: dict[str, Any], pipe: _SdkPipeline) -> None:
        self._owner = owner
        self._kind = kind
        self._attrs = attrs
        self._pipe = pipe
        self._recording = False
        self.errored = False
        self._linked = False
        run_id = attrs.get("run_id") if kind.is_run else None
        self.run_id = run_id if isinstance(run_id, str) else None

    def __enter__(self) -> _DirectSpan:
        # What the SDK's Tracer.start_span does, without building an SDK span.
        kind = self._kind
        pipe = self._pipe
        name, out = kind.build(self._attrs)
        context = _get_current()
        parent: SpanContext | None = _get_current_span(context).get_span_context()
        assert parent is not None
        if parent.is_valid:
            trace_id = parent.trace_id
            random = parent.trace_flags & _RANDOM
        else:
            parent = None
            trace_id = pipe.generate_trace_id()
            random = pipe.random_flag
        # The SDK passes the context it was given (none: the current one); this is that context.
        result = pipe.sampler.should_sample(context, trace_id, name, kind.kind, out, ())
        decision = result.decision
        if decision is _RECORD_AND_SAMPLE:  # identity tests: an enum's own methods and hash are Python frames
            recording = sampled = True
        elif decision is _DROP:
            recording = sampled = False
        else:
            recording, sampled = decision.is_recording(), decision.is_sampled()
        self._ctx = ctx = _SpanContext(
            trace_id, pipe.generate_span_id(), False, _FLAGS[(_SAMPLED if sampled else 0) | random], result.trace_state
        )
        current: Any
        if recording:
            self._recording = True
            self._name = name
            self._parent = parent
            self._extra = None
            if result.attributes == out:  # the sampler kept our attributes as they are
                self._out = out
                self._clean = True
            else:
                self._out = dict(result.attributes)
                self._clean = False
            current = _new_live(_LiveSpan)  # no __init__ frame: this runs for every span
            current._span = self
            self._start = _time_ns()
        else:
            current = _NonRecordingSpan(ctx)
        if self.run_id is not None:
            self._owner._remember(self)
        self._token = _attach(_set_span_in_context(current, context))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is not None:
                self.record_exception(exc)
        finally:
            _detach(self._token)
            if self._recording:
                end = _time_ns()
                self._recording = False
                pipe = self._pipe
                out = self._out
                if self._extra is None and self._clean and pipe.plain and len(out) <= pipe.max_attributes:
                    # the common case, inline: what end_span builds, with nothing to bound
                    readable = _ReadableSpan(
                        self._name,
                        self._ctx,
                        self._parent,
                        pipe.tracer.resource,
                        out,
                        (),
                        (),
                        self._kind.kind,
                        pipe.info,
                        _UNSET,
                        self._start,
                        end,
                        pipe.scope,
                    )
                    for on_end in pipe.on_ends:
                        on_end(readable)
                else:
                    _end_span(pipe, self, self._kind.kind, self._parent, self._start, end)

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute (mapped to its ``gen_ai.*``/``lovia.*`` name; content only when opted in)."""
        if value is None:
            return
        kind = self._kind
        mapped = kind.keys.get(key) or kind.key(key)
        if not mapped:
            return
        if self._recording:
            out = self._out
            out[mapped] = value if type(value) in _PLAIN and key != "finish_reason" else _otel_value(key, value)
            if key == "system" and kind.is_model:
                out["gen_ai.system"] = str(value)
        if key == "resumed" and value and self.run_id is not None:
            self._owner._link_to_first_attempt(self)

    def set_attributes(self, attrs: dict[str, Any]) -> None:
        """Set several attributes at once."""
        for key, value in attrs.items():
            self.set_attribute(key, value)

    def record_response(self, response: Any) -> None:
        """A model response's usage, finish reason and (when captured) text, under their exported names."""
        if self._recording:
            _response_attributes(self._out, response, self._kind.capture)

    def record_exception(self, exc: BaseException) -> None:
        """Record ``exc`` as an event, set ``error.type`` and an error status."""
        if self.errored:
            return
        self.errored = True
        if not self._recording:
            return
        self._add_event(_exception_event(exc))
        self._out["error.type"] = type(exc).__qualname__
        self._set_status(_Status(_StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))

    @property
    def context(self) -> SpanContext:
        """The OpenTelemetry span context (trace and span id)."""
        return self._ctx

    def link_first_attempt(self, ref: dict[str, str]) -> None:
        """Link this run span to the first attempt's run span, named by :meth:`trace_ref` (any process)."""
        first = self._first_attempt(ref)
        if first is not None:
            self._link(first, {"lovia.link": "first_attempt", "lovia.run_id": self.run_id or ""})
            self._linked = True

    def _link(self, context: SpanContext, attributes: dict[str, Any]) -> None:
        if self._recording:
            self._add_link(context, attributes)


class OpenTelemetryTracer:
    """Emits lovia's spans to OpenTelemetry: ``Runner.run(..., tracer=OpenTelemetryTracer())``.

    Args:
        tracer_provider: where spans go; default the global provider (``trace.set_tracer_provider``).
        capture_content: also export model output text and tool arguments/results (off: they may
            hold personal data).
        tracer_name: the instrumentation scope name.
        detail_spans: also emit ``turn``, ``guardrail`` and ``checkpoint_save`` spans.

    A resumed run (same ``run_id`` re-issued through the same tracer) gets a span link to the run
    span of its first attempt; every run span also carries ``lovia.run_id`` to join attempts that
    ran in other processes.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        capture_content: bool = False,
        tracer_name: str = "lovia",
        detail_spans: bool = True,
    ) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
            raise UserError(
                "OpenTelemetryTracer needs the OpenTelemetry SDK",
                hint="pip install 'lovia[otel]' (installs opentelemetry-sdk)",
            ) from exc
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = provider.get_tracer(tracer_name)
        try:
            self._pipe: _SdkPipeline | None = _sdk_pipeline(self._tracer)
        except NameError:  # the API without the SDK
            self._pipe = None
        self._client = trace.SpanKind.CLIENT
        self._internal = trace.SpanKind.INTERNAL
        self._kinds: dict[str, _Kind] = {}
        self._capture = bool(capture_content)
        self.detail_spans = detail_spans
        self._first_attempt: OrderedDict[str, SpanContext] = OrderedDict()

    @property
    def capture_content(self) -> bool:
        """Whether model output text and tool arguments/results are exported (spans opened from now on)."""
        return self._capture

    @capture_content.setter
    def capture_content(self, value: bool) -> None:
        self._capture = bool(value)
        self._kinds = {}  # the key tables depend on it

    def span(self, name: str, /, **attrs: Any) -> _Span | _DirectSpan:
        """Open an OpenTelemetry span as the current one for the block."""
        kind = self._kinds.get(name) if type(name) is str else None
        if kind is None:
            kind = self._kind(str(name))
        if kind.is_run:  # once a run: a processor may have been added, or the tracer disabled
            self._pipe = _sdk_pipeline(self._tracer, self._pipe)
        pipe = self._pipe
        if pipe is not None:
            return _DirectSpan(self, kind, attrs, pipe)
        return _Span(self, kind, attrs)

    def _kind(self, name: str) -> _Kind:
        kind = self._kinds.get(name)
        if kind is None:
            kind = _Kind(
                name, self._client if name == "model_call" else self._internal, self._capture, self._tracer.start_span
            )
            if len(self._kinds) < _MAX_CACHED:
                self._kinds[name] = kind
        return kind

    def _remember(self, span: _Span | _DirectSpan) -> None:
        assert span.run_id is not None
        if span.run_id not in self._first_attempt:
            self._first_attempt[span.run_id] = span.context
            while len(self._first_attempt) > _MAX_REMEMBERED_RUNS:
                self._first_attempt.popitem(last=False)

    def _link_to_first_attempt(self, span: _Span | _DirectSpan) -> None:
        assert span.run_id is not None
        first = self._first_attempt.get(span.run_id)
        if first is not None and first != span.context and not span._linked:
            span._link(first, {"lovia.link": "first_attempt", "lovia.run_id": span.run_id})
