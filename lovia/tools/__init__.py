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
from .recall import make_recall_tool, recall_tool_result

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
    "recall_tool_result",
    "render_tool_result",
    "result_to_text",
    "run_tool",
    "tool",
    "truncate_tool_output",
]
