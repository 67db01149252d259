"""Tracing: a tiny span protocol with no-op, console and in-memory implementations.

Spans the loop opens: ``run`` (agent, run_id; at end turns, total_tokens, resumed),
``model_call`` (model, turn), ``tool_call`` (name, call_id), ``handoff`` (from_agent, to_agent).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO, runtime_checkable

__all__ = ["ConsoleTracer", "InMemoryTracer", "NoopTracer", "RecordedSpan", "Span", "Tracer"]


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
    """A finished (or open) span kept by :class:`InMemoryTracer`."""

    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    start: float = 0.0
    end: float | None = None
    error: BaseException | None = None

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute."""
        self.attributes[key] = value

    def record_exception(self, exc: BaseException) -> None:
        """Remember the exception that ended the span."""
        self.error = exc

    @property
    def duration_ms(self) -> float:
        """Milliseconds from start to end (0 while open)."""
        return 0.0 if self.end is None else (self.end - self.start) * 1000


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
    """Keeps every span in ``spans`` (for tests and debugging)."""

    def __init__(self) -> None:
        self.spans: list[RecordedSpan] = []

    @contextmanager
    def span(self, name: str, /, **attrs: Any) -> Iterator[RecordedSpan]:
        """Record a span around the block."""
        rec = RecordedSpan(name=name, attributes=dict(attrs), start=time.perf_counter())
        self.spans.append(rec)
        try:
            yield rec
        except BaseException as exc:
            rec.record_exception(exc)
            raise
        finally:
            rec.end = time.perf_counter()


class ConsoleTracer(InMemoryTracer):
    """Prints each span that took at least ``min_duration_ms`` when it ends."""

    def __init__(self, *, min_duration_ms: float = 0.0, stream: TextIO | None = None) -> None:
        super().__init__()
        self.min_duration_ms = min_duration_ms
        self.stream = stream

    @contextmanager
    def span(self, name: str, /, **attrs: Any) -> Iterator[RecordedSpan]:
        """Record and print the span."""
        with super().span(name, **attrs) as rec:
            try:
                yield rec
            finally:
                rec.end = time.perf_counter()
                if rec.duration_ms >= self.min_duration_ms:
                    attrs_text = " ".join(f"{k}={v}" for k, v in rec.attributes.items())
                    status = " error" if rec.error else ""
                    print(
                        f"[lovia] {name} {rec.duration_ms:.1f}ms{status} {attrs_text}", file=self.stream or sys.stderr
                    )
