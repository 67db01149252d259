"""Tools: the ``@tool`` decorator, the ``Tool`` type, helpers for running and rendering calls, and the
built-in tools (``web_fetch``, ``web_search``, ``now``, ``current_date``, ``ask_human``, ``fence``)."""

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
from .fence import FENCE_NOTE, fence
from .human import HumanChannel, HumanQuestion, QuestionOption, ask_human
from .page import HttpReader, Page, PageImage, PageReader, html_to_markdown, web_fetch
from .recall import make_recall_tool, recall_tool_result
from .search import (
    DuckDuckGoSearch,
    SearchResult,
    TavilySearch,
    WebSearch,
    duckduckgo_search,
    tavily_search,
    web_search,
)
from .time import current_date, now

__all__ = [
    "FENCE_NOTE",
    "RERUN",
    "ApprovalPredicate",
    "DuckDuckGoSearch",
    "HttpReader",
    "HumanChannel",
    "HumanQuestion",
    "Page",
    "PageImage",
    "PageReader",
    "QuestionOption",
    "SearchResult",
    "TavilySearch",
    "Tool",
    "ToolInvoker",
    "ToolPolicy",
    "ToolResultRenderer",
    "WebSearch",
    "apply_tool_policies",
    "ask_human",
    "current_date",
    "default_result_renderer",
    "duckduckgo_search",
    "fence",
    "html_to_markdown",
    "make_recall_tool",
    "now",
    "parse_arguments",
    "recall_tool_result",
    "render_tool_result",
    "result_to_text",
    "run_tool",
    "tavily_search",
    "tool",
    "truncate_tool_output",
    "web_fetch",
    "web_search",
]
