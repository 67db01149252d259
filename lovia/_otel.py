"""OpenTelemetry adapter for lovia's span protocol (extra ``lovia[otel]``).

Our span names and attributes are mapped onto the GenAI semantic conventions: a ``run`` becomes an
``invoke_agent`` span, a ``model_call`` a ``chat`` client span with ``gen_ai.request.model``,
``gen_ai.usage.*`` and ``gen_ai.response.finish_reasons``, a ``tool_call`` an ``execute_tool``
span with ``gen_ai.tool.name``. Parenthood follows the OpenTelemetry context (a contextvar), so a
sub-run of an agent-as-tool nests under its ``tool_call`` and joins the caller's trace.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .exceptions import UserError

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import SpanContext, TracerProvider

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
# Prompt/completion text and tool payloads: only exported with capture_content=True.
_CONTENT = frozenset({"output_text", "input_messages", "arguments", "result"})
_MAX_REMEMBERED_RUNS = 10_000


def _otel_key(span_name: str, key: str) -> str:
    table = _KEYS.get(span_name)
    if table is not None and key in table:
        return table[key]
    return _COMMON.get(key) or f"lovia.{key}"


def _otel_value(key: str, value: Any) -> Any:
    if key == "finish_reason":
        return [str(value)]
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return list(value)
    return str(value)


def _display_name(name: str, attrs: dict[str, Any]) -> str:
    """The span name the conventions ask for: ``{operation} {target}``."""
    if name == "run":
        return f"invoke_agent {attrs.get('agent', '')}".rstrip()
    if name == "model_call":
        return f"chat {attrs.get('model') or ''}".rstrip()
    if name == "tool_call":
        return f"execute_tool {attrs.get('name', '')}".rstrip()
    if name == "turn":
        return f"turn {attrs.get('turn', '')}".rstrip()
    if name == "guardrail":
        return f"guardrail {attrs.get('kind', '')}".rstrip()
    return name


class _Span:
    """Our :class:`~lovia.tracing.Span` over an OpenTelemetry span, and its own context manager.

    A plain class rather than a generator-based context manager: spans are opened on every model
    and tool call, so each saved frame counts.
    """

    __slots__ = ("_attrs", "_linked", "_owner", "_span", "_token", "captures_content", "errored", "name", "run_id")

    def __init__(self, owner: OpenTelemetryTracer, name: str, attrs: dict[str, Any]) -> None:
        self._owner = owner
        self.name = name
        self._attrs = attrs
        self._span: OtelSpan | None = None
        self._token: Any = None
        self.captures_content = owner.capture_content
        self.errored = False
        self._linked = False
        run_id = attrs.get("run_id") if name == "run" else None
        self.run_id = run_id if isinstance(run_id, str) else None

    def __enter__(self) -> _Span:
        owner, name, attrs = self._owner, self.name, self._attrs
        attributes: dict[str, Any] = {}
        operation = _OPERATION.get(name)
        if operation is not None:
            attributes["gen_ai.operation.name"] = operation
        for key, value in attrs.items():
            if value is None or (key in _CONTENT and not self.captures_content):
                continue
            attributes[_otel_key(name, key)] = _otel_value(key, value)
        if name == "model_call" and "system" in attrs:
            attributes["gen_ai.system"] = str(attrs["system"])
        self._span = owner._tracer.start_span(
            _display_name(name, attrs), kind=owner._kinds.get(name, owner._internal), attributes=attributes
        )
        if self.run_id is not None:
            owner._remember(self)
        self._token = owner._attach(owner._set_in_context(self._span))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc is not None:
                self.record_exception(exc)
        finally:
            self._owner._detach(self._token)
            self._otel.end()

    @property
    def _otel(self) -> OtelSpan:
        assert self._span is not None, "the span is used outside its with-block"
        return self._span

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute (mapped to its ``gen_ai.*``/``lovia.*`` name; content only when opted in)."""
        if value is None or (key in _CONTENT and not self.captures_content):
            return
        self._otel.set_attribute(_otel_key(self.name, key), _otel_value(key, value))
        if key == "system" and self.name == "model_call":
            self._otel.set_attribute("gen_ai.system", str(value))
        elif key == "resumed" and value and self.run_id is not None:
            self._owner._link_to_first_attempt(self)

    def set_attributes(self, attrs: dict[str, Any]) -> None:
        """Set several attributes at once (one call into the SDK)."""
        mapped = {
            _otel_key(self.name, k): _otel_value(k, v)
            for k, v in attrs.items()
            if v is not None and (k not in _CONTENT or self.captures_content)
        }
        if mapped:
            self._otel.set_attributes(mapped)

    def record_exception(self, exc: BaseException) -> None:
        """Record ``exc`` as an event, set ``error.type`` and an error status."""
        from opentelemetry.trace import Status, StatusCode

        if self.errored:
            return
        self.errored = True
        self._otel.record_exception(exc)
        self._otel.set_attribute("error.type", type(exc).__qualname__)
        self._otel.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))

    @property
    def context(self) -> SpanContext:
        """The OpenTelemetry span context (trace and span id)."""
        return self._otel.get_span_context()

    def trace_ref(self) -> dict[str, str]:
        """This span's trace and span id as hex text (what a checkpoint keeps of the first attempt)."""
        ctx = self.context
        return {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}

    def link_first_attempt(self, ref: dict[str, str]) -> None:
        """Link this run span to the first attempt's run span, named by :meth:`trace_ref` (any process)."""
        from opentelemetry.trace import SpanContext, TraceFlags

        try:
            first = SpanContext(
                trace_id=int(ref["trace_id"], 16),
                span_id=int(ref["span_id"], 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        except (KeyError, ValueError):
            return  # a damaged reference only costs the link
        if first.span_id == self.context.span_id or not first.is_valid:
            return
        self._otel.add_link(first, {"lovia.link": "first_attempt", "lovia.run_id": self.run_id or ""})
        self._linked = True


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
        from opentelemetry import context

        self._tracer = provider.get_tracer(tracer_name)
        self._attach = context.attach
        self._detach = context.detach
        self._set_in_context = trace.set_span_in_context
        self._kinds = {"model_call": trace.SpanKind.CLIENT}
        self._internal = trace.SpanKind.INTERNAL
        self.capture_content = capture_content
        self.detail_spans = detail_spans
        self._first_attempt: OrderedDict[str, SpanContext] = OrderedDict()

    def span(self, name: str, /, **attrs: Any) -> _Span:
        """Open an OpenTelemetry span as the current one for the block."""
        return _Span(self, str(name), attrs)

    def _remember(self, span: _Span) -> None:
        assert span.run_id is not None
        if span.run_id not in self._first_attempt:
            self._first_attempt[span.run_id] = span.context
            while len(self._first_attempt) > _MAX_REMEMBERED_RUNS:
                self._first_attempt.popitem(last=False)

    def _link_to_first_attempt(self, span: _Span) -> None:
        assert span.run_id is not None
        first = self._first_attempt.get(span.run_id)
        if first is not None and first != span.context and not span._linked:
            span._otel.add_link(first, {"lovia.link": "first_attempt", "lovia.run_id": span.run_id})
