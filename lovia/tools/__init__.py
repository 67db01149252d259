"""Tools: the ``@tool`` decorator, the ``Tool`` type, helpers for running and rendering calls, and the
built-in tools (``web_fetch``, ``web_search``, ``now``, ``current_date``, ``ask_human``, ``fence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
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

if TYPE_CHECKING:
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

_LAZY = {
    "DuckDuckGoSearch": ".search",
    "HttpReader": ".page",
    "HumanChannel": ".human",
    "HumanQuestion": ".human",
    "Page": ".page",
    "PageImage": ".page",
    "PageReader": ".page",
    "QuestionOption": ".human",
    "SearchResult": ".search",
    "TavilySearch": ".search",
    "WebSearch": ".search",
    "ask_human": ".human",
    "current_date": ".time",
    "duckduckgo_search": ".search",
    "html_to_markdown": ".page",
    "make_recall_tool": ".recall",
    "now": ".time",
    "recall_tool_result": ".recall",
    "tavily_search": ".search",
    "web_fetch": ".page",
    "web_search": ".search",
}

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

if not TYPE_CHECKING:  # type checkers read the names from the imports above
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, __all__)
