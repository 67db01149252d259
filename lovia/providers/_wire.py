"""Small wire-format pieces every vendor adapter reads or writes the same way.

Internal. Pure functions over parsed JSON and one shared note; no I/O.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["IMAGE_OMITTED", "arguments_object", "as_int", "positive_field"]

# What stands in for an image sent to a model that does not accept images.
IMAGE_OMITTED = "[image omitted: this model does not accept images]"


def as_int(value: Any) -> int:
    """A token count from a usage field: the number, or 0 for anything that is not one."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def arguments_object(arguments: str) -> dict[str, Any]:
    """A tool call's argument text as the JSON object a vendor wants back.

    Empty text is ``{}``; text that is not a JSON object is kept whole under ``"_raw"``.
    """
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


def positive_field(name: str, data: Any) -> int | None:
    """A whole number above zero that a JSON object holds under ``name``, else ``None``."""
    value = data.get(name) if isinstance(data, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else None
