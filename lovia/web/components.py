"""Tool results that the chat page draws as UI: the ``lovia_ui`` envelope and :func:`ui_result`."""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import UserError

__all__ = ["ENVELOPE_KEY", "ui_result"]

ENVELOPE_KEY = "lovia_ui"


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def ui_result(kind: str, props: Any = _UNSET, *, from_args: bool | str = False, data: str | None = None) -> str:
    """The tool output that makes the page draw ``kind`` (``"chart"``, ``"table"`` or your own) with ``props``.

    Pass ``from_args=True`` (the call's arguments are the props) or a field name (one argument is the
    props) instead of ``props`` when the model already wrote the data, so it is not echoed back.
    """
    if not isinstance(kind, str) or not kind:
        raise UserError("ui_result needs a kind", hint='e.g. ui_result("table", {"columns": [...], "rows": [...]})')
    has_props = props is not _UNSET
    if has_props == bool(from_args):
        raise UserError(
            "ui_result takes either props or from_args, exactly one",
            hint="pass the data as props, or from_args=True when the call's arguments are the data",
        )
    envelope: dict[str, Any] = {"kind": kind}
    if has_props:
        envelope["props"] = props
    else:
        envelope["from_args"] = from_args
    if data is not None:
        envelope["data"] = data
    try:
        return json.dumps({ENVELOPE_KEY: envelope}, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"ui_result props are not JSON: {exc}", hint="use strings, numbers, booleans, None, lists and dicts"
        ) from exc
