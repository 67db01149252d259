"""Tool results that the chat page draws as UI: the ``lovia_ui`` envelope, :func:`ui_result`, :func:`put_ui_data`.

Bulk data: inside a run of ``lovia web`` the supervisor binds the chat's store to the run's
context (:func:`bind_ui_data`), so a tool can keep a large value with the chat and give the model
only a preview; the page fetches the value by its ref. Outside such a run nothing is bound and
:func:`put_ui_data` returns ``None``.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from ..exceptions import ToolError, UserError

__all__ = ["ENVELOPE_KEY", "MAX_UI_DATA_BYTES", "put_ui_data", "ui_result"]

ENVELOPE_KEY = "lovia_ui"
MAX_UI_DATA_BYTES = 8 * 1024 * 1024


class UiDataStore(Protocol):
    """What :func:`put_ui_data` needs of a chat store (``ChatStore`` and its PostgreSQL twin)."""

    async def put_ui_data(self, session_id: str, payload: bytes) -> str | None: ...


@dataclass(frozen=True, slots=True)
class _Target:
    store: UiDataStore
    session_id: str


_target: ContextVar[_Target | None] = ContextVar("lovia_web_ui_data", default=None)


def bind_ui_data(store: UiDataStore, session_id: str) -> None:
    """Make :func:`put_ui_data` store into ``session_id`` for the rest of the current context.

    The supervisor calls it at the start of the task that drives a chat's run; the run (and every
    tool call in it) runs in a copy of that task's context, and nothing outside it sees the binding.
    """
    _target.set(_Target(store, session_id))


async def put_ui_data(value: Any) -> str | None:
    """Keep ``value`` (JSON, at most :data:`MAX_UI_DATA_BYTES` encoded) with the chat; its ref, or ``None``.

    Pass the ref as ``ui_result(kind, preview, data=ref)``: the model reads the preview and the page
    draws ``value``. Outside a ``lovia web`` run (a script, an eval) nothing is stored and the
    result is ``None``, so the envelope is just the preview.

    Raises:
        ToolError: ``value`` is not JSON or is too large (the model can narrow its request).
    """
    target = _target.get()
    if target is None:
        return None
    try:
        payload = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ToolError(
            f"the UI data is not JSON: {exc}", hint="use strings, numbers, booleans, None, lists and dicts"
        ) from exc
    if len(payload) > MAX_UI_DATA_BYTES:
        raise ToolError(
            f"the UI data is {len(payload)} bytes of JSON, over the {MAX_UI_DATA_BYTES}-byte limit",
            hint="narrow the request (fewer rows or columns, a filter, an aggregate) and try again",
        )
    return await target.store.put_ui_data(target.session_id, payload)


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
