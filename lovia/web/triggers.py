"""Schedule triggers: when a schedule is due, and when it is due next.

Three kinds, each with a text expression:

* ``at``: one time, ISO-8601 (``2026-12-24T18:00:00+01:00``; no offset means server local time)
  or epoch seconds, between 1970 and the end of year 9999. Fires once, then the schedule finishes.
* ``every``: an interval in seconds, any finite number above 0 up to :data:`MAX_INTERVAL`. Slots
  keep their phase: after a slot at ``t`` the next is ``t + n * interval``, the first one still in
  the future.
* ``cron``: any expression the ``croniter`` package accepts (it ships with ``lovia[web]``),
  matched against the server's local time: five fields ``minute hour day-of-month month
  day-of-week`` with names (``0 9 * * MON-FRI``, ``0 0 1 JAN *``), ``L`` for the last day of
  the month, nicknames such as ``@daily``, or an optional sixth field of seconds. As in classic
  cron, when both day fields are restricted a day matching either one is due.

Every function here raises :class:`~lovia.exceptions.UserError` with a hint for an expression it
cannot use; a number that is not finite (``nan``, ``inf``) is refused like any other bad value.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass
from typing import Any

from ..exceptions import UserError

__all__ = [
    "MAX_FIRES",
    "MAX_INTERVAL",
    "MAX_TIME",
    "MIN_INTERVAL",
    "TRIGGER_KINDS",
    "CronSpec",
    "advance_next_fire",
    "check_time",
    "initial_next_fire",
    "validate_trigger",
]

TRIGGER_KINDS = ("cron", "every", "at")
MIN_INTERVAL = 0.0
"""``every`` intervals must be above this many seconds (any positive interval is accepted)."""
MAX_INTERVAL = 100 * 366 * 86_400.0
"""The longest ``every`` interval accepted, in seconds (about a hundred years)."""
MAX_FIRES = 1_000_000_000
"""The largest ``max_fires`` a schedule takes."""
MAX_TIME = 253_402_300_799.0
"""The latest epoch time a schedule takes (``at``, ``expires_at``): the last second of year 9999 UTC."""

_CRON_HINT = "use a cron line such as '*/15 * * * *', '0 9 * * MON-FRI', '0 0 L * *' or '@daily'"


def _croniter() -> Any:
    try:
        from croniter import croniter
    except ImportError:  # pragma: no cover - croniter ships with lovia[web]
        raise UserError(
            "cron schedules need the croniter package", hint="pip install 'lovia[web]' (or pip install croniter)"
        ) from None
    return croniter


def check_time(value: float, what: str) -> float:
    """``value`` when it is a finite epoch time between 1970 and :data:`MAX_TIME`, else :class:`UserError`."""
    if not math.isfinite(value) or not 0 <= value <= MAX_TIME:
        raise UserError(
            f"{what} {value!r} is not a time between 1970 and 9999",
            hint="send epoch seconds (a finite number) or an ISO-8601 time such as '2026-12-24T18:00:00+00:00'",
        )
    return value


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A cron expression croniter accepts, checked once."""

    expr: str

    @classmethod
    def parse(cls, expr: str) -> CronSpec:
        """Check ``expr`` or raise :class:`UserError`."""
        text = " ".join(expr.split())
        fields = len(text.split())
        if not text.startswith("@") and fields not in (5, 6, 7):
            raise UserError(f"cron expression {expr!r} has {fields} fields, not 5", hint=_CRON_HINT)
        try:
            _croniter()(text)
        except Exception as exc:  # noqa: BLE001  (any failure of the parser is a bad expression)
            why = "has a field out of range" if "range" in str(exc) else "is not valid"
            raise UserError(f"cron expression {expr!r} {why}", hint=_CRON_HINT) from None
        return cls(text)

    def next_after(self, when: float) -> float:
        """The first matching time strictly after epoch ``when`` (local wall-clock time)."""
        # Naive local time on purpose: cron fields name local hours, across DST changes too.
        start = dt.datetime.fromtimestamp(check_time(when, "the cron start time"))  # noqa: DTZ006
        try:
            nxt = _croniter()(self.expr, start).get_next(dt.datetime)
        except Exception:  # noqa: BLE001  (croniter's own errors: no such date, out of range)
            raise UserError(
                f"the cron expression {self.expr!r} never matches a real date", hint="check the day and month fields"
            ) from None
        return check_time(float(nxt.timestamp()), "the next cron time")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _parse_at(expr: str) -> float:
    text = expr.strip()
    number = _number(text)
    if number is not None:
        return check_time(number, "'at' time")
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        stamp = parsed.timestamp()
    except (ValueError, OverflowError, OSError):
        raise UserError(
            f"'at' time {expr!r} is neither ISO-8601 nor epoch seconds", hint="e.g. '2026-12-24T18:00:00+00:00'"
        ) from None
    return check_time(stamp, "'at' time")


def _interval(expr: str) -> float:
    seconds = _number(expr.strip())
    if seconds is None:
        raise UserError(f"'every' interval {expr!r} is not a number of seconds", hint="e.g. '3600' for hourly")
    if not math.isfinite(seconds) or not MIN_INTERVAL < seconds <= MAX_INTERVAL:
        raise UserError(
            f"'every' interval {expr!r} is out of range",
            hint=f"use a finite number of seconds above 0 and at most {MAX_INTERVAL:g}",
        )
    return seconds


def validate_trigger(kind: str, expr: str) -> None:
    """Raise :class:`UserError` (with a hint) unless ``kind``/``expr`` is a valid trigger."""
    if kind == "at":
        _parse_at(expr)
    elif kind == "every":
        _interval(expr)
    elif kind == "cron":
        CronSpec.parse(expr).next_after(time.time())
    else:
        raise UserError(f"unknown trigger kind {kind!r}", hint=f"use one of {', '.join(TRIGGER_KINDS)}")


def initial_next_fire(kind: str, expr: str, *, now: float) -> float:
    """The first slot of a new (or retimed) schedule created at ``now``."""
    if kind == "at":
        return _parse_at(expr)
    if kind == "every":
        return check_time(now + _interval(expr), "the first fire")
    if kind == "cron":
        return CronSpec.parse(expr).next_after(now)
    validate_trigger(kind, expr)
    raise AssertionError("unreachable")


def advance_next_fire(kind: str, expr: str, *, now: float, slot: float | None = None) -> float | None:
    """The first slot strictly after ``now`` once ``slot`` fired (``None``: the schedule is done).

    Every slot between ``slot`` and ``now`` is skipped: missed slots coalesce into the one fire.
    """
    if kind == "at":
        return None
    if kind == "every":
        interval = _interval(expr)
        base = now if slot is None else slot
        ratio = (now - base) / interval if now >= base else 0.0
        if not math.isfinite(ratio) or ratio >= 2.0**52:  # an interval below the clock's resolution
            return math.nextafter(now, math.inf)
        nxt = base + (math.floor(ratio) + 1) * interval
        return nxt if nxt > now else math.nextafter(now, math.inf)  # lost to float rounding: still move on
    if kind == "cron":
        return CronSpec.parse(expr).next_after(max(now, slot or now))
    validate_trigger(kind, expr)
    raise AssertionError("unreachable")
