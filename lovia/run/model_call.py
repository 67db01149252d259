"""Internal: one model call — stream deltas into a turn, retry transient failures."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._text import clean_text
from ..events import Event, ModelRetrying, OutputDiscarded, ProviderFailedOver, ReasoningDelta, TextDelta
from ..exceptions import ContextOverflowError
from ..providers.base import ModelSettings, Provider, ToolDefinition, provider_model
from ..providers.failover import FailoverDelta
from ..reliability import RetryPolicy
from ..tracing import Tracer, record_model_response
from ..transcript import EntryCompletedDelta, FinishDelta, ToolCallDelta, TranscriptEntry, UsageDelta
from ..transcript import ReasoningDelta as ProviderReasoningDelta
from ..transcript import TextDelta as ProviderTextDelta
from .assemble import TurnAssembler

__all__ = ["call_model"]

logger = logging.getLogger("lovia")


async def call_model(
    provider: Provider,
    view: list[TranscriptEntry],
    *,
    tools: Sequence[ToolDefinition] | None,
    response_format: dict[str, Any] | None,
    settings: ModelSettings,
    retry: RetryPolicy | None,
    emit: Callable[[Event], Awaitable[None]],
    tracer: Tracer,
    turn: int,
    stream_deltas: bool = True,
) -> TurnAssembler:
    """Stream one response into a :class:`TurnAssembler`.

    A retryable failure is retried under ``retry``; when output was already streamed, the
    consumer first gets ``OutputDiscarded`` (or, without ``restart_on_partial``, the error).
    ``ContextOverflowError`` is never retried here: the caller routes it to the context policy.
    ``stream_deltas=False`` (nobody listens) skips the text and reasoning delta events; the
    retry decisions are the same either way.
    """
    policy = retry or RetryPolicy(max_attempts=1)
    attempt = 0
    while True:
        attempt += 1
        assembler = TurnAssembler()
        emitted = False
        logger.debug("model.start model=%s turn=%d attempt=%d", provider_model(provider), turn, attempt)
        try:
            with tracer.span("model_call", model=provider_model(provider), turn=turn, system=provider.name) as span:
                stream = provider.stream(view, tools=tools, response_format=response_format, settings=settings)
                async for delta in stream:
                    emitted = await _fold(delta, assembler, emit, stream_deltas) or emitted
                record_model_response(span, assembler)
            if logger.isEnabledFor(logging.DEBUG):
                usage = assembler.usage
                logger.debug(
                    "model.done model=%s turn=%d tokens=%d(in=%d out=%d)",
                    provider_model(provider),
                    turn,
                    usage.total_tokens,
                    usage.input_tokens,
                    usage.output_tokens,
                )
            return assembler
        except ContextOverflowError:
            raise
        except Exception as exc:
            if (
                attempt >= policy.max_attempts
                or not policy.retry_on(exc)
                or (emitted and not policy.restart_on_partial)
            ):
                raise
            logger.warning("model.retry model=%s attempt=%d error=%s", provider_model(provider), attempt, exc)
            if emitted:
                await emit(OutputDiscarded())
            delay = policy.delay_after(attempt, exc)
            await emit(ModelRetrying(error=exc, attempt=attempt, max_attempts=policy.max_attempts, delay=delay))
            await policy.sleep(delay)


async def _fold(delta: Any, asm: TurnAssembler, emit: Callable[[Event], Awaitable[None]], deltas: bool) -> bool:
    """Fold one delta into the turn; True when something was streamed to the consumer (or would
    have been: ``deltas=False`` means nobody listens to text and reasoning deltas)."""
    if isinstance(delta, ProviderTextDelta):
        asm.text.append(chunk := clean_text(delta.text))  # the text policy (lovia._text)
        if deltas:
            await emit(TextDelta(delta=chunk))
        return True
    if isinstance(delta, ProviderReasoningDelta):
        asm.reasoning.append(chunk := clean_text(delta.text))
        if deltas:
            await emit(ReasoningDelta(delta=chunk))
        return True
    if isinstance(delta, ToolCallDelta):
        asm.add_call(delta)
        return True
    if isinstance(delta, UsageDelta):
        asm.usage.add(delta.usage)
    elif isinstance(delta, FinishDelta):
        asm.finish_reason = delta.reason
    elif isinstance(delta, EntryCompletedDelta):
        asm.add_completed(delta)
    elif isinstance(delta, FailoverDelta):
        await emit(ProviderFailedOver(delta.from_provider, delta.to_provider, delta.error, delta.attempts))
    return False
