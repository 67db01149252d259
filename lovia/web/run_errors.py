"""Why a run failed, as one stable word: the ``code`` of a chat stream's ``error`` frame.

Clients branch on it (retry on ``rate_limited``, ask for a key on ``provider_auth``) instead of
parsing messages. :func:`run_error_code` is also exported as ``lovia.web.errors.run_error_code``.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import httpx

from ..exceptions import (
    BudgetExceeded,
    ContextOverflowError,
    GuardrailTripped,
    MaxTurnsExceeded,
    OutputValidationError,
    ProviderError,
    RunCancelled,
    ToolError,
)

__all__ = ["RunErrorCode", "run_error_code"]

RunErrorCode = Literal[
    "tool_error",
    "provider_auth",
    "rate_limited",
    "overloaded",
    "timeout",
    "network",
    "provider_error",
    "context_overflow",
    "budget_exceeded",
    "max_turns",
    "cancelled",
    "guardrail",
    "output_invalid",
    "internal",
]

_BY_TYPE: tuple[tuple[type[BaseException], RunErrorCode], ...] = (
    (ToolError, "tool_error"),
    (ContextOverflowError, "context_overflow"),
    (BudgetExceeded, "budget_exceeded"),
    (MaxTurnsExceeded, "max_turns"),
    (RunCancelled, "cancelled"),
    (asyncio.CancelledError, "cancelled"),
    (GuardrailTripped, "guardrail"),
    (OutputValidationError, "output_invalid"),
)


def run_error_code(exc: BaseException) -> RunErrorCode:
    """The error code of a run (or tool) failure; ``internal`` for anything unforeseen."""
    if isinstance(exc, ProviderError):
        return _provider_code(exc)
    for kind, code in _BY_TYPE:
        if isinstance(exc, kind):
            return code
    return "internal"


def _provider_code(exc: ProviderError) -> RunErrorCode:
    status = exc.status_code
    if status in (401, 403):
        return "provider_auth"
    if status == 429:
        return "rate_limited"
    if status in (503, 529):
        return "overloaded"
    cause = exc.__cause__
    if isinstance(cause, (httpx.TimeoutException, TimeoutError)):
        return "timeout"
    if isinstance(cause, (httpx.TransportError, ConnectionError)):
        return "network"
    return "provider_error"
