"""Input and output guardrails: veto callables run at fixed points of the loop.

A guardrail trips by raising :class:`~lovia.exceptions.GuardrailTripped` or returning a truthy
value (a non-empty string is the reason, ``True`` a generic one). ``None``/``False``/``""`` pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .exceptions import GuardrailTripped

if TYPE_CHECKING:
    from .messages import Message
    from .run_context import RunContext

__all__ = ["Guardrail", "GuardrailFn", "check_input_guardrails", "check_output_guardrails", "run_guardrails"]

Guardrail = Callable[[Any, "RunContext[Any]"], Any]
"""``(value, ctx) -> verdict`` (sync or async): truthy or raising ``GuardrailTripped`` vetoes."""
GuardrailFn = Guardrail


async def run_guardrails(guards: Sequence[Guardrail], value: Any, ctx: RunContext[Any], *, kind: str) -> None:
    """Run ``guards`` in order; the first violation raises :class:`GuardrailTripped`."""
    for guard in guards:
        verdict = guard(value, ctx)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict:
            name = getattr(guard, "__name__", type(guard).__name__)
            reason = verdict if isinstance(verdict, str) else f"{kind} guardrail {name!r} tripped"
            raise GuardrailTripped(
                reason, hint=f"the {kind} was vetoed by {name!r}; change the {kind} or the guardrail"
            )


async def check_input_guardrails(
    guardrails: Sequence[Guardrail], messages: list[Message], ctx: RunContext[Any]
) -> None:
    """Run input guardrails over ``messages``; the first violation raises :class:`GuardrailTripped`."""
    await run_guardrails(guardrails, messages, ctx, kind="input")


async def check_output_guardrails(guardrails: Sequence[Guardrail], output: Any, ctx: RunContext[Any]) -> None:
    """Run output guardrails over the final ``output``; the first violation raises :class:`GuardrailTripped`."""
    await run_guardrails(guardrails, output, ctx, kind="output")
