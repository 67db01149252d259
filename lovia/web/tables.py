"""``show_table``: a sortable, paged table the chat page draws from the call's arguments."""

from __future__ import annotations

import json
from typing import Annotated, Any, Union

from ..exceptions import ToolError
from ..tools import tool
from .components import ui_result

__all__ = ["MAX_TABLE_BYTES", "show_table"]

MAX_TABLE_BYTES = 64 * 1024
Cell = Union[str, int, float, bool, None]


def _check_rows(columns: list[Any], rows: list[Any]) -> None:
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise ToolError(f"row {i} is not a list", hint="write each row as a list with one value per column")
        if len(row) != len(columns):
            raise ToolError(
                f"row {i} has {len(row)} values but there are {len(columns)} columns",
                hint="give every row exactly one value per column (null for an empty cell)",
            )
        for cell in row:
            if cell is not None and not isinstance(cell, (str, int, float, bool)):
                raise ToolError(
                    f"row {i} has a {type(cell).__name__} cell", hint="cells are strings, numbers, booleans or null"
                )


def validate_table(columns: Any, rows: Any) -> None:
    """Raise a :class:`ToolError` unless ``columns`` and ``rows`` make a table the page can draw."""
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise ToolError("columns must be a non-empty list of strings", hint='e.g. "columns": ["name", "units"]')
    if not isinstance(rows, list):
        raise ToolError("rows must be a list of rows", hint='e.g. "rows": [["apples", 3], ["pears", 5]]')
    _check_rows(columns, rows)
    try:
        size = len(json.dumps({"columns": columns, "rows": rows}, allow_nan=False, ensure_ascii=False).encode())
    except ValueError as exc:
        raise ToolError(f"the table is not plain JSON: {exc}", hint="write NaN or Infinity as null") from exc
    if size > MAX_TABLE_BYTES:
        raise ToolError(
            f"the table is {size} bytes, over the {MAX_TABLE_BYTES}-byte limit",
            hint="show fewer rows (a summary, the top rows) and say how many there are in total",
        )


@tool(name="show_table")
def show_table(
    columns: Annotated[list[str], "Column headings."],
    rows: Annotated[list[list[Cell]], "The rows, each with one value per column."],
    title: Annotated[str | None, "A short heading for the table."] = None,
) -> str:
    """Show the user an interactive table: sortable by column, paged when long."""
    validate_table(columns, rows)
    return ui_result("table", from_args=True)
