"""The tool type and the helpers that run and render one call, with their documented signatures.

Code that drives tools by hand (a custom loop, a test harness) imports these from here. The run
loop itself uses the same machinery; these functions are thin, stable entry points to it:

* :func:`run_tool` runs a tool's policy chain with retries and a timeout and returns its raw value;
* :func:`render_tool_result` turns that value into the text the model sees;
* :func:`clip_text` / :func:`truncate_tool_output` bound how much of it the model sees.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from . import _run
from ._tool import (
    Tool,
    ToolInvoker,
    ToolResultRenderer,
    result_to_text,
    tool,
)
from ._tool import apply_tool_policies as _wrap_policies
from ._tool import render_tool_result as _render
from ._tool import truncate_tool_output as _truncate

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = [
    "Tool",
    "ToolPolicy",
    "apply_tool_policies",
    "clip_text",
    "render_tool_result",
    "result_to_text",
    "run_tool",
    "tool",
    "truncate_tool_output",
]


class ToolPolicy(Protocol):
    """A wrapper around a tool call: ``await policy(invoke, args, ctx)``.

    It may change the arguments, refuse the call, retry it or post-process its result; it calls
    ``invoke(args, ctx)`` to go on. Any ``async def`` with that shape satisfies the protocol.
    """

    def __call__(self, invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any], /) -> Awaitable[Any]: ...


def clip_text(text: str, limit: int, *, hint: str = "", keep_tail: bool = False) -> tuple[str, bool]:
    """Cut ``text`` to at most ``limit`` characters; return ``(text, was_clipped)``.

    A clipped text ends (or, with ``keep_tail``, starts) with a marker naming how much was cut,
    followed by ``hint`` when given, so the reader knows what to ask for next. With ``keep_tail``
    the end of the text is kept instead of the start (the useful part of a log). The marker counts
    toward ``limit``; a limit too small for it still returns at most ``limit`` characters.
    """
    if limit < 0:
        raise ValueError("clip_text: limit must be at least 0")
    if len(text) <= limit:
        return text, False
    note = f"[... {len(text) - limit} more characters cut{': ' + hint if hint else ''}]"
    room = limit - len(note) - 1
    if room <= 0:
        return (text[-limit:] if keep_tail else text[:limit]) if limit else "", True
    if keep_tail:
        return f"{note}\n{text[len(text) - room :]}", True
    return f"{text[:room]}\n{note}", True


def truncate_tool_output(text: str, limit: int) -> str:
    """Keep the head and the tail of an over-long tool output, with a marker in between."""
    return _truncate(text, limit)


async def run_tool(
    tool: Tool[Any],
    args: dict[str, Any],
    ctx: RunContext[Any],
    *,
    default_retries: int = 0,
    default_timeout: float | None = None,
) -> Any:
    """Run ``tool`` through its policies and return its raw result (the last failure is raised).

    The tool's own ``retries`` and ``timeout`` win; the defaults apply when it sets none.
    """
    retries = tool.retries if tool.retries is not None else default_retries
    timeout = tool.timeout if tool.timeout is not None else default_timeout
    return await _run.run_tool(tool, args, ctx, retries=retries, timeout=timeout)


async def apply_tool_policies(
    invoke: ToolInvoker, policies: Sequence[ToolPolicy], args: dict[str, Any], ctx: RunContext[Any]
) -> Any:
    """Call ``invoke(args, ctx)`` through ``policies`` (the first one outermost) and return its result."""
    return await _wrap_policies(invoke, policies)(args, ctx)


async def render_tool_result(
    tool: Tool[Any], result: Any, ctx: RunContext[Any], *, default: ToolResultRenderer | None = None
) -> str:
    """The text the model sees for ``result``: the tool's renderer, else ``default``, else the
    built-in one (strings as they are, anything else as JSON; attachments as a short note)."""
    renderer = tool.result_renderer if tool.result_renderer is not None else default
    text, _parts = _render(result, ctx, renderer=renderer)
    return text
