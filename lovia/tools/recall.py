"""``recall_tool_result``: kept importable here; the tool lives in :mod:`lovia.context.recall`."""

from __future__ import annotations

from ..context.recall import find_tool_result, make_recall_tool, recall_tool_result

__all__ = ["find_tool_result", "make_recall_tool", "recall_tool_result"]
