"""Internal: compact JSON text for everything lovia persists.

``pydantic_core.to_json`` writes the same compact, non-ASCII-escaped text as
``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` several times faster (a save
encodes its entries and head on every step). Values it refuses (unknown types, lone surrogates)
go through ``json.dumps``, so those keep their stdlib behaviour: a lone surrogate is written as
before and an unknown type raises ``TypeError``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

__all__ = ["dumps"]

_stdlib = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (NaN and infinities as ``json.dumps`` writes them)."""
    try:
        return to_json(value, inf_nan_mode="constants").decode()
    except PydanticSerializationError:
        return _stdlib(value)
