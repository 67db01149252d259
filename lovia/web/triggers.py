"""Schedule triggers: when a schedule is due, and when it is due next.

Three kinds, each with a text expression:

* ``at``: one time, ISO-8601 (``2026-12-24T18:00:00+01:00``; no offset means server local time)
  or epoch seconds. Fires once, then the schedule finishes.
* ``every``: an interval in seconds (``>= 1``). Slots keep their phase: after a slot at ``t`` the
  next is ``t + n * interval``, the first one still in the future.
* ``cron``: five fields ``minute hour day-of-month month day-of-week`` matched against the
  server's local time; each field takes ``*``, numbers, ``a-b`` ranges, ``/step`` and comma lists
  (day-of-week ``0``-``7``, both ``0`` and ``7`` are Sunday). As in classic cron, when both day
  fields are restricted a day matching either one is due.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass

from ..exceptions import UserError

__all__ = ["MIN_INTERVAL", "TRIGGER_KINDS", "CronSpec", "advance_next_fire", "initial_next_fire", "validate_trigger"]

TRIGGER_KINDS = ("cron", "every", "at")
MIN_INTERVAL = 1.0
"""The shortest ``every`` interval accepted, in seconds."""

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_CRON_HINT = "use five fields 'minute hour day month weekday', e.g. '*/15 * * * *' or '0 9 * * 1-5'"
_SEARCH_LIMIT = 20_000  # loop steps (days/hours/minutes) before a cron with no future match is refused


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A parsed five-field cron expression."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, expr: str) -> CronSpec:
        """Parse ``expr`` or raise :class:`UserError`."""
        parts = expr.split()
        if len(parts) != 5:
            raise UserError(f"cron expression {expr!r} has {len(parts)} fields, not 5", hint=_CRON_HINT)
        sets = [_parse_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(0 if d == 7 else d for d in sets[4])
        return cls(sets[0], sets[1], sets[2], sets[3], weekdays, parts[2] != "*", parts[4] != "*")

    def day_matches(self, day: dt.datetime) -> bool:
        """Whether ``day`` (local) is a day the expression runs on."""
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_month or in_week
        return in_month and in_week

    def next_after(self, when: float) -> float:
        """The first matching minute strictly after epoch ``when`` (local time)."""
        # Naive local wall-clock time on purpose: cron fields name local hours, across DST changes too.
        cur = dt.datetime.fromtimestamp(when).replace(  # noqa: DTZ006
            second=0, microsecond=0
        ) + dt.timedelta(minutes=1)
        for _ in range(_SEARCH_LIMIT):
            if cur.month not in self.months:
                cur = (cur.replace(day=1) + dt.timedelta(days=32)).replace(day=1, hour=0, minute=0)
            elif not self.day_matches(cur):
                cur = (cur + dt.timedelta(days=1)).replace(hour=0, minute=0)
            elif cur.hour not in self.hours:
                cur = (cur + dt.timedelta(hours=1)).replace(minute=0)
            elif cur.minute not in self.minutes:
                cur += dt.timedelta(minutes=1)
            else:
                return cur.timestamp()
        raise UserError("the cron expression never matches a real date", hint="check the day and month fields")


def _parse_field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if base == "*":
                start, end = low, high
            elif "-" in base:
                a, b = base.split("-", 1)
                start, end = int(a), int(b)
            else:
                start = int(base)
                end = high if step_text else start
        except ValueError:
            raise UserError(f"cron {name} field {text!r} is not valid", hint=_CRON_HINT) from None
        if step < 1 or not (low <= start <= end <= high):
            raise UserError(f"cron {name} field {text!r} is out of range {low}-{high}", hint=_CRON_HINT)
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _parse_at(expr: str) -> float:
    text = expr.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"'at' time {expr!r} is neither ISO-8601 nor epoch seconds", hint="e.g. '2026-12-24T18:00:00+00:00'"
        ) from None
    return parsed.timestamp()


def _interval(expr: str) -> float:
    try:
        seconds = float(expr)
    except ValueError:
        raise UserError(
            f"'every' interval {expr!r} is not a number of seconds", hint="e.g. '3600' for hourly"
        ) from None
    if not math.isfinite(seconds) or seconds < MIN_INTERVAL:
        raise UserError(f"'every' interval {expr!r} is too short", hint=f"use at least {MIN_INTERVAL:g} seconds")
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
        return now + _interval(expr)
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
        steps = math.floor((now - base) / interval) + 1 if now >= base else 1
        return base + steps * interval
    if kind == "cron":
        return CronSpec.parse(expr).next_after(max(now, slot or now))
    validate_trigger(kind, expr)
    raise AssertionError("unreachable")
