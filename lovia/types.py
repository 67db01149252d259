"""Shared type aliases of the public surface (JSON values and schemas, instruction callables)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from .run_context import RunContext

__all__ = ["InstructionsFn", "JsonObject", "JsonSchema", "JsonValue"]

JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]
"""Any value that survives ``json.dumps`` / ``json.loads`` unchanged."""

JsonObject = dict[str, Any]
"""A JSON object (string keys; the values are JSON values)."""

JsonSchema = dict[str, Any]
"""A JSON Schema document."""

InstructionsFn = Callable[["RunContext[Any]"], "str | Awaitable[str]"]
"""Dynamic instructions: ``(ctx) -> str``, sync or async, evaluated at each turn."""
