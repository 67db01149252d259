"""``show_chart``: the model writes an Apache ECharts option and the chat page draws it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from ..exceptions import ToolError
from ..tools import tool
from .components import ui_result

__all__ = ["MAX_OPTION_BYTES", "SERIES_TYPES", "show_chart", "validate_chart_option"]

SERIES_TYPES = frozenset(
    {
        "line",
        "bar",
        "pie",
        "scatter",
        "effectScatter",
        "radar",
        "tree",
        "treemap",
        "sunburst",
        "boxplot",
        "candlestick",
        "heatmap",
        "parallel",
        "lines",
        "graph",
        "sankey",
        "funnel",
        "gauge",
        "pictorialBar",
        "themeRiver",
    }
)
MAX_OPTION_BYTES = 64 * 1024
_TYPES_HINT = "use one of: " + ", ".join(sorted(SERIES_TYPES))


def _encoded(option: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(option, allow_nan=False, ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise ToolError(
            f"the chart option is not plain JSON: {exc}",
            hint="write numbers, strings, booleans, null, lists and objects only (no functions, NaN or Infinity)",
        ) from exc


def _check_series(series: Any) -> None:
    items = [series] if isinstance(series, Mapping) else series
    if not isinstance(items, list) or not items:
        raise ToolError("the chart option has no series", hint='add "series": [{"type": "bar", "data": [...]}]')
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ToolError(f"series[{i}] is not an object", hint='each series is {"type": ..., "data": [...]}')
        kind = item.get("type")
        if kind not in SERIES_TYPES:
            raise ToolError(f"series[{i}] has the unsupported type {kind!r}", hint=_TYPES_HINT)


def validate_chart_option(option: Mapping[str, Any]) -> None:
    """Raise a :class:`ToolError` (with a hint the model can act on) unless ``option`` can be drawn."""
    if not isinstance(option, Mapping):
        raise ToolError("the chart option must be a JSON object", hint='e.g. {"series": [{"type": "line", ...}]}')
    size = len(_encoded(option))
    if size > MAX_OPTION_BYTES:
        raise ToolError(
            f"the chart option is {size} bytes, over the {MAX_OPTION_BYTES}-byte limit",
            hint="aggregate or sample the data (fewer points), or show it with show_table",
        )
    _check_series(option.get("series"))


@tool(name="show_chart")
def show_chart(
    option: Annotated[dict[str, Any], "An Apache ECharts option object (JSON only — no functions)."],
) -> str:
    """Draw an interactive chart for the user (line, bar, pie, scatter, heatmap, sankey, ...).

    The option is an Apache ECharts option; put the chart's title in ``title.text``.
    """
    validate_chart_option(option)
    return ui_result("chart", from_args="option")
