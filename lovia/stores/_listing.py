"""Internal: listings that survive damaged rows.

One undecodable row must not hide every other run or session: ``list_runs`` and
``list_sessions`` of the bundled stores report such a row *as damaged* (its id, why, and the
hint of the :class:`~lovia.exceptions.CorruptRecordError` that loading it would raise) and list
the rest as usual.
"""

from __future__ import annotations

import math
from typing import Any, get_args

from ..checkpointer import RunInfo, RunStatus
from ..exceptions import CorruptRecordError
from ..session import SessionInfo
from ._codec import decode_head

__all__ = ["damaged_sessions_note", "run_info", "session_info"]

_STATUSES = frozenset(get_args(RunStatus))


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _count(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def run_info(run_id: str, head_json: Any, count: Any, *, status: Any = None, updated_at: Any = None) -> RunInfo:
    """The listing row of one run; a head that cannot be decoded gives a ``damaged`` row.

    A damaged row keeps what the table itself says (``status`` column, entry count, update time)
    and is ``failed`` otherwise: a run whose head cannot be read cannot continue.
    """
    try:
        head = decode_head(run_id, head_json)
        return RunInfo(run_id, head.agent_name, head.status, head.turns, int(count), head.started_at, head.updated_at)
    except (CorruptRecordError, TypeError, ValueError) as exc:
        error = (
            exc
            if isinstance(exc, CorruptRecordError)
            else CorruptRecordError(
                f"listing row of run {run_id!r} cannot be decoded: {exc}",
                run_id=run_id,
                hint="the row was damaged outside lovia; restore it from a backup or checkpointer.delete(run_id)",
            )
        )
        stamp = _number(updated_at)
        return RunInfo(
            run_id,
            agent_name="",
            status=status if status in _STATUSES else "failed",
            turns=0,
            entries=_count(count),
            started_at=stamp,
            updated_at=stamp,
            damaged=str(error),
        )


def damaged_sessions_note(session_id: str, bad_runs: int) -> str | None:
    """The ``damaged`` text of a session listing row with ``bad_runs`` undecodable segments."""
    if not bad_runs:
        return None
    return str(
        CorruptRecordError(
            f"{bad_runs} stored run(s) of session {session_id!r} cannot be decoded",
            session_id=session_id,
            hint="the rows were damaged outside lovia; restore them from a backup, or rewind or clear the session "
            "(its other runs are unaffected)",
        )
    )


def session_info(session_id: str, runs: Any, entries: Any, created: Any, updated: Any, bad_runs: Any) -> SessionInfo:
    """The listing row of one session from its aggregated columns; non-numbers count as damage."""
    values = (runs, entries, created, updated)
    broken = sum(1 for v in values if v is not None and not isinstance(v, (int, float)))
    note = damaged_sessions_note(session_id, _count(bad_runs) + broken)
    return SessionInfo(session_id, _count(runs), _count(entries or 0), _number(created), _number(updated), note)
