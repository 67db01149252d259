"""Internal: execute one validated tool call with its policies, timeout and retries."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import BudgetExceeded, InvalidToolArguments, RunCancelled
from ._tool import Tool, apply_tool_policies

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = ["run_tool"]

logger = logging.getLogger("lovia")

_BACKOFF_BASE = 0.25
_BACKOFF_MAX = 5.0


async def run_tool(
    tool: Tool[Any],
    args: dict[str, Any],
    ctx: RunContext[Any],
    *,
    retries: int = 0,
    timeout: float | None = None,
    on_attempt_failed: Callable[[BaseException], None] | None = None,
) -> Any:
    """Run ``tool`` and return its raw result; the last failure is raised.

    Retries and the timeout wrap the whole policy chain; every attempt starts from a fresh copy of
    the top-level ``args``. Invalid arguments, cancellation and budget stops are never retried.
    Backoff is exponential, capped at 5 seconds.
    """
    invoke = apply_tool_policies(tool.invoke, tool.policies)
    attempt = 0
    while True:
        fresh = dict(args)  # each attempt gets its own top-level arguments: a policy's edit stays in it
        try:
            if timeout is not None:
                return await asyncio.wait_for(invoke(fresh, ctx), timeout)
            return await invoke(fresh, ctx)
        except (InvalidToolArguments, RunCancelled, BudgetExceeded):
            raise
        except asyncio.TimeoutError:
            error: Exception = TimeoutError(f"tool {tool.name!r} timed out after {timeout} s")
        except Exception as exc:
            error = exc
        if on_attempt_failed is not None:
            on_attempt_failed(error)
        if attempt >= retries:
            raise error
        attempt += 1
        logger.info("tool.retry %s attempt=%d error=%s", tool.name, attempt, error)
        await asyncio.sleep(min(_BACKOFF_MAX, _BACKOFF_BASE * 2 ** (attempt - 1)))
