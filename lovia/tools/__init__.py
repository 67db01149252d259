"""Tools: the ``@tool`` decorator, the ``Tool`` type, and helpers for running and rendering calls."""

from __future__ import annotations

from ._run import run_tool
from ._tool import (
    RERUN,
    Tool,
    ToolPolicy,
    apply_tool_policies,
    default_result_renderer,
    parse_arguments,
    render_tool_result,
    tool,
    truncate_tool_output,
)

__all__ = [
    "RERUN",
    "Tool",
    "ToolPolicy",
    "apply_tool_policies",
    "default_result_renderer",
    "parse_arguments",
    "render_tool_result",
    "run_tool",
    "tool",
    "truncate_tool_output",
]
