"""Multi-vendor failover: one provider made of several, tried in order while they fail.

A :class:`FailoverProvider` streams from its *active* member. When that member fails with a
retryable error before it streamed anything, it is tried again (up to ``attempts`` calls with a
short backoff); when it keeps failing, the next member takes over and stays active for later
calls (it is the one that answers now). A failure after output was streamed is raised as is, so
the run's retry policy decides (a turn is never stitched together from two vendors), and a
:class:`~lovia.exceptions.ContextOverflowError` always goes to the context policy.

Every switch is announced in the stream with a :class:`FailoverDelta`, which the run loop turns
into a :class:`~lovia.events.ProviderFailedOver` event; consumers that do not know it skip it.
Which member is active is a small JSON value (:meth:`FailoverProvider.failover_state`) that the
run checkpoints, so a run resumed after a crash starts on the member that was answering.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from ..exceptions import ContextOverflowError, ProviderError, UserError
from ..transcript import ModelDelta, TranscriptEntry
from .base import (
    ModelSettings,
    Provider,
    ToolDefinition,
    context_window,
    discover_context_window,
    provider_model,
    provider_supports_json_schema,
    supports_vision,
)
from .registry import provider_from_string

__all__ = ["FailoverDelta", "FailoverProvider", "provider_state", "restore_provider_state"]

logger = logging.getLogger("lovia")


@dataclass(frozen=True, slots=True)
class FailoverDelta:
    """A stream item (not a transcript delta): the failover provider switched members."""

    from_provider: str
    """``name:model`` of the member that kept failing."""
    to_provider: str
    """``name:model`` of the member that takes over."""
    error: BaseException
    """The last error of the member given up on."""
    attempts: int
    """How many calls the given-up member failed."""
    type: Literal["failover_delta"] = "failover_delta"


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and bool(exc.retryable)


def _label(provider: Provider) -> str:
    model = provider_model(provider)
    return provider.name if model is None else f"{provider.name}:{model}"


class FailoverProvider:
    """Several providers behind one, tried in order while they fail with retryable errors.

    Args:
        providers: The members, first = primary. Model strings (``"anthropic:<model>"``) are
            resolved here and closed by :meth:`aclose`; provider instances stay yours.
        attempts: Calls each member gets before the next one takes over (default 3).
        backoff: Base delay in seconds between two calls to the same member (doubles, jittered).
        backoff_max: Upper bound of that delay. A member whose error asks for a longer pause
            (``retry_after``, from a ``Retry-After`` header) is given up on at once.
        retry_on: Which errors count as "this member is failing" (default: retryable
            :class:`~lovia.exceptions.ProviderError`). Anything else is raised at once.
        sleep: The sleep used for backoff (tests pass a no-op).

    Raises:
        UserError: No members, or ``attempts`` below 1.
    """

    def __init__(
        self,
        providers: Sequence[Provider | str],
        *,
        attempts: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        retry_on: Callable[[BaseException], bool] | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if not providers:
            raise UserError("FailoverProvider needs at least one provider", hint="pass [primary, secondary, ...]")
        if attempts < 1:
            raise UserError(f"attempts must be at least 1 (got {attempts})", hint="attempts=3 is the default")
        self._members: list[Provider] = []
        self._owned: list[Provider] = []
        for item in providers:
            member = provider_from_string(item) if isinstance(item, str) else item
            if isinstance(item, str):
                self._owned.append(member)
            self._members.append(member)
        self._attempts = attempts
        self._backoff = backoff
        self._backoff_max = backoff_max
        self._retry_on = retry_on or _retryable
        self._sleep = sleep
        self._active = 0

    @property
    def members(self) -> list[Provider]:
        """The member providers, in failover order."""
        return list(self._members)

    @property
    def active(self) -> Provider:
        """The member that answers the next call."""
        return self._members[self._active]

    @property
    def name(self) -> str:
        """The active member's name (usage and traces are attributed to who answered)."""
        return self.active.name

    @property
    def model(self) -> str | None:
        """The active member's model."""
        return provider_model(self.active)

    @property
    def supports_json_schema(self) -> bool:
        """True only when every member takes a native JSON schema (any of them may answer)."""
        return all(provider_supports_json_schema(m) for m in self._members)

    @property
    def supports_vision(self) -> bool:
        """True only when every member accepts images."""
        return all(supports_vision(m) for m in self._members)

    def context_window(self) -> int | None:
        """The smallest window any member reports (any of them may have to take the whole view)."""
        windows = [w for w in (context_window(m) for m in self._members) if w]
        return min(windows) if windows else None

    async def discover_context_window(self) -> int | None:
        """The smallest window the members' endpoints report."""
        windows = [w for w in [await discover_context_window(m) for m in self._members] if w]
        return min(windows) if windows else None

    def failover_state(self) -> dict[str, Any]:
        """JSON-safe state to checkpoint: which member is active."""
        return {"active": self._active, "label": _label(self.active)}

    def restore_failover_state(self, state: dict[str, Any]) -> None:
        """Resume on the member :meth:`failover_state` recorded (ignored when it no longer matches)."""
        index = state.get("active")
        if not isinstance(index, int) or not 0 <= index < len(self._members):
            return
        if state.get("label") not in (None, _label(self._members[index])):
            logger.warning(
                "failover state names %r, which is no longer member %d; starting on the primary",
                state.get("label"),
                index,
            )
            return
        self._active = index

    def _delay(self, attempt: int) -> float:
        base = min(self._backoff_max, self._backoff * 2.0 ** (attempt - 1))
        return float(base * random.uniform(0.5, 1.0))

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[ToolDefinition] | None = None,
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream from the active member, moving down the list while members fail.

        Besides the members' deltas the stream carries a :class:`FailoverDelta` at each switch.
        It is typed as a ``ModelDelta`` so this class satisfies the ``Provider`` protocol;
        consumers that do not know it skip it, as they skip any delta type they do not handle.

        Raises:
            ContextOverflowError: Passed through from the member (never a reason to fail over).
            Exception: A non-retryable error, an error after output was streamed, or the last
                error once every member has had its attempts.
        """
        count = len(self._members)
        start = self._active
        last: BaseException | None = None
        for step in range(count):
            index = (start + step) % count
            member = self._members[index]
            for attempt in range(1, self._attempts + 1):
                streamed = False
                try:
                    async for delta in member.stream(
                        entries, tools=tools, response_format=response_format, settings=settings
                    ):
                        streamed = True
                        yield delta
                    return
                except ContextOverflowError:
                    raise
                except Exception as exc:
                    if streamed or not self._retry_on(exc):
                        raise
                    last = exc
                    logger.warning(
                        "failover: %s failed (attempt %d/%d): %s", _label(member), attempt, self._attempts, exc
                    )
                    wait = getattr(exc, "retry_after", None)
                    if isinstance(wait, (int, float)) and wait > self._backoff_max:
                        break  # the member asked for a longer pause than we wait: fail over now
                    if attempt < self._attempts:
                        await self._sleep(max(self._delay(attempt), float(wait or 0.0)))
            if step < count - 1:
                successor = self._members[(index + 1) % count]
                assert last is not None
                self._active = (index + 1) % count
                logger.warning("failover: %s -> %s", _label(member), _label(successor))
                notice = FailoverDelta(
                    from_provider=_label(member), to_provider=_label(successor), error=last, attempts=self._attempts
                )
                yield cast(ModelDelta, notice)
        assert last is not None
        raise last

    async def aclose(self) -> None:
        """Close the members this provider built from strings (instances you passed stay open)."""
        for member in self._owned:
            close = getattr(member, "aclose", None)
            if callable(close):
                await close()

    async def __aenter__(self) -> FailoverProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def provider_state(provider: object) -> dict[str, Any]:
    """The state a run checkpoints for ``provider`` (``{}`` for providers that keep none)."""
    export = getattr(provider, "failover_state", None)
    if callable(export):
        state = export()
        return dict(state) if isinstance(state, dict) else {}
    return {}


def restore_provider_state(provider: object, state: Any) -> None:
    """Give a freshly built ``provider`` the state a checkpoint recorded (no-op when none applies)."""
    restore = getattr(provider, "restore_failover_state", None)
    if callable(restore) and isinstance(state, dict) and state:
        restore(state)


if TYPE_CHECKING:  # mypy keeps FailoverProvider usable wherever a Provider is expected

    def _is_a_provider(provider: FailoverProvider) -> Provider:
        return provider
