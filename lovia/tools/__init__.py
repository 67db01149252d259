"""Tools: the ``@tool`` decorator, the ``Tool`` type, and helpers for running and rendering calls."""

from __future__ import annotations

from ._run import run_tool
from ._tool import (
    RERUN,
    ApprovalPredicate,
    Tool,
    ToolInvoker,
    ToolPolicy,
    ToolResultRenderer,
    apply_tool_policies,
    default_result_renderer,
    parse_arguments,
    render_tool_result,
    result_to_text,
    tool,
    truncate_tool_output,
)


def __getattr__(name: str) -> object:
    # recall imports the context package, which imports tools: resolve it on first use.
    if name == "make_recall_tool":
        from .recall import make_recall_tool

        return make_recall_tool
    raise AttributeError(f"module 'lovia.tools' has no attribute {name!r}")


__all__ = [
    "RERUN",
    "ApprovalPredicate",
    "Tool",
    "ToolInvoker",
    "ToolPolicy",
    "ToolResultRenderer",
    "apply_tool_policies",
    "default_result_renderer",
    "make_recall_tool",
    "parse_arguments",
    "render_tool_result",
    "result_to_text",
    "run_tool",
    "tool",
    "truncate_tool_output",
]
