"""Run limits and retry posture: ``RunBudget``, ``CancelToken``, ``RetryPolicy``.

``Mailbox`` lives in :mod:`lovia.steering`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .exceptions import BudgetExceeded, ProviderError, RunCancelled
from .steering import Mailbox

if TYPE_CHECKING:
    from .messages import Usage

__all__ = ["CancelToken", "Mailbox", "RetryPolicy", "RunBudget", "is_retryable"]


def is_retryable(exc: BaseException) -> bool:
    """Default retry predicate: a retryable :class:`ProviderError`."""
    return isinstance(exc, ProviderError) and bool(exc.retryable)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a model call is retried.

    Delay before retry ``n`` (1-based) is ``min(backoff_max, backoff_base * 2**(n-1))`` times a
    uniform jitter in 0.5-1.5. With ``restart_on_partial`` a stream that failed after emitting
    output is restarted (the stream gets an ``OutputDiscarded`` event); otherwise it fails.
    """

    max_attempts: int = 5
    restart_on_partial: bool = True
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    retry_on: Callable[[BaseException], bool] = is_retryable
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")

    def backoff_delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based), jitter included."""
        base = min(self.backoff_max, self.backoff_base * 2.0 ** (attempt - 1))
        return float(base * random.uniform(0.5, 1.5))

    def delay(self, attempt: int) -> float:
        """Same as :meth:`backoff_delay`."""
        return self.backoff_delay(attempt)

    def delay_after(self, attempt: int, error: BaseException) -> float:
        """The wait before retry ``attempt``: the endpoint's ``retry_after`` when it gave one
        (capped at ``backoff_max``), else :meth:`delay`."""
        asked = getattr(error, "retry_after", None)
        if isinstance(asked, (int, float)) and asked >= 0:
            return float(min(asked, self.backoff_max))
        return self.delay(attempt)


@dataclass(slots=True)
class RunBudget:
    """Limits checked between turns, after each model reply and at each tool preflight.

    Stateful: use a fresh one per run. The clock starts at the first check.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_tool_calls: int | None = None
    max_seconds: float | None = None
    tool_calls: int = field(default=0, init=False)
    _started: float | None = field(default=None, init=False, repr=False)

    def copy(self) -> RunBudget:
        """A fresh budget with the same limits."""
        return RunBudget(
            self.max_input_tokens, self.max_output_tokens, self.max_total_tokens, self.max_tool_calls, self.max_seconds
        )

    def check(self, usage: Usage) -> None:
        """Raise :class:`BudgetExceeded` if any limit is reached."""
        now = time.monotonic()
        if self._started is None:
            self._started = now
        hint = "raise the limit on RunBudget, or resume the run with a fresh budget"
        if self.max_input_tokens is not None and usage.input_tokens > self.max_input_tokens:
            raise BudgetExceeded(f"input tokens {usage.input_tokens} exceed {self.max_input_tokens}", hint=hint)
        if self.max_output_tokens is not None and usage.output_tokens > self.max_output_tokens:
            raise BudgetExceeded(f"output tokens {usage.output_tokens} exceed {self.max_output_tokens}", hint=hint)
        if self.max_total_tokens is not None and usage.total_tokens > self.max_total_tokens:
            raise BudgetExceeded(f"total tokens {usage.total_tokens} exceed {self.max_total_tokens}", hint=hint)
        if self.max_seconds is not None and now - self._started > self.max_seconds:
            raise BudgetExceeded(f"run took longer than {self.max_seconds} s", hint=hint)

    def count_tool_call(self, usage: Usage) -> None:
        """Count one tool call (rejected ones too) and check every limit."""
        self.check(usage)
        self.record_tool_call()

    def record_tool_call(self) -> None:
        """Count one tool call; raise :class:`BudgetExceeded` if ``max_tool_calls`` are already spent."""
        if self.max_tool_calls is not None and self.tool_calls >= self.max_tool_calls:
            raise BudgetExceeded(
                f"tool call limit {self.max_tool_calls} reached",
                hint="raise RunBudget.max_tool_calls, or resume the run with a fresh budget",
            )
        self.tool_calls += 1


class CancelToken:
    """Cooperative cancellation shared by a run and its agent-as-tool children."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._cancelled = False
        # (loop, callback) pairs called on their loop once the token fires
        self._waiters: list[tuple[asyncio.AbstractEventLoop, Callable[[], object]]] = []

    @property
    def is_cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """The reason given to ``cancel()``."""
        return self._reason

    def cancel(self, reason: str | None = None) -> None:
        """Ask the run to stop at its next check (and cancel in-flight async tools)."""
        if not self._cancelled:
            self._cancelled = True
            self._reason = reason
            for loop, callback in list(self._waiters):
                # cancel() may come from another thread (a sync tool, a web handler).
                if not loop.is_closed():
                    loop.call_soon_threadsafe(callback)

    def check(self) -> None:
        """Raise :class:`RunCancelled` if cancelled."""
        if self._cancelled:
            raise RunCancelled(self._reason or "run cancelled", hint="re-issue the call with the same run_id to resume")

    async def wait(self) -> None:
        """Return once the token is cancelled."""
        if self._cancelled:
            return
        fired = asyncio.Event()
        unsubscribe = self._on_cancel(asyncio.get_running_loop(), fired.set)
        try:
            await fired.wait()
        finally:
            unsubscribe()

    def _on_cancel(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> Callable[[], None]:
        """Internal: have ``loop`` call ``callback`` once the token fires (soon, when it already
        has); returns the function that takes the callback back."""
        if self._cancelled:
            handle = loop.call_soon(callback)
            return handle.cancel
        waiter = (loop, callback)
        self._waiters.append(waiter)

        def unsubscribe() -> None:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

        return unsubscribe
