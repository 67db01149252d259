"""Time utilities: the ``now`` tool and the ``current_date`` instruction fragment."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Callable
from typing import Annotated, Any

from ..exceptions import ToolError, UserError
from ._tool import Tool, tool

__all__ = ["current_date", "now"]

InstructionsFn = Callable[[Any], str]


def _zone(tz: str | None) -> _dt.tzinfo | None:
    if tz is None:
        return None
    try:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    except ImportError:  # pragma: no cover - Python without zoneinfo
        raise ToolError("time zones are not available here", hint="omit tz") from None
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"unknown time zone {tz!r}",
            hint="use an IANA name such as 'UTC' or 'Asia/Shanghai' (pip install tzdata on Windows)",
        ) from None


def _now(
    tz: Annotated[
        str | None, "IANA timezone name, e.g. 'UTC' or 'Asia/Shanghai'. Defaults to the server's local timezone."
    ] = None,
) -> str:
    """The current date and time as ISO-8601 (with its UTC offset)."""
    zone = _zone(tz)
    moment = _dt.datetime.now(zone) if zone is not None else _dt.datetime.now().astimezone()
    return moment.isoformat(timespec="seconds")


@dataclasses.dataclass(eq=False)
class _CallableTool(Tool[Any]):
    """A tool that can also be called directly as the function it wraps."""

    fn: Callable[..., Any] | None = dataclasses.field(default=None, repr=False)

    def __call__(self, tz: str | None = None) -> str:
        assert self.fn is not None
        return str(self.fn(tz))


def _as_callable_tool(fn: Callable[..., Any], **options: Any) -> _CallableTool:
    base = tool(name="now", **options)(fn)
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(Tool)}
    return _CallableTool(**values, fn=fn)


now = _as_callable_tool(_now)
"""The ``now`` tool (also callable directly: ``now("UTC")``)."""


def current_date(tz: str | None = None) -> InstructionsFn:
    """An instruction fragment stating today's date (date only, so prompt caches stay warm).

    Raises:
        UserError: ``tz`` is not a known IANA zone.
    """
    try:
        zone = _zone(tz)
    except ToolError as exc:
        raise UserError(exc.message, hint=exc.hint) from None

    def fragment(ctx: Any = None) -> str:
        today = _dt.datetime.now(zone).date() if zone is not None else _dt.datetime.now().astimezone().date()
        return f"Today's date is {today.isoformat()} ({today.strftime('%A')})."

    return fragment
