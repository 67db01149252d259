"""Internal: compact JSON text for everything lovia persists.

``pydantic_core.to_json`` writes the same compact, non-ASCII-escaped text as
``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` several times faster (a save
encodes its entries and head on every step). Values it refuses (unknown types, lone surrogates)
go through ``json.dumps`` after the text policy (:mod:`lovia._text`): a lone surrogate is stored
as U+FFFD, never as text UTF-8 cannot encode, and an unknown type raises ``TypeError``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from ._text import clean_value

__all__ = ["dumps"]

_stdlib = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (NaN and infinities as ``json.dumps`` writes them)."""
    try:
        return to_json(value, inf_nan_mode="constants").decode()
    except PydanticSerializationError:
        return _stdlib(clean_value(value))
