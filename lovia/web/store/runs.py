"""``RunRow``: the one record of a run, on every backend and for every reader.

Run records are the rows of the chat index's run table (``chat_runs`` in SQLite, ``web_runs`` in
PostgreSQL): one per run, with the agent, why it started (``source``), its status, error and usage,
and the serving process that owns it (``owner``, ``host:pid``), which
:meth:`~lovia.web.store.base.ChatIndexBase.sweep_stale_runs` uses to settle runs a dead server left
``running``. :meth:`RunRow.to_dict` is lovia 0.9.119's form of it, :meth:`RunRow.history_dict` the
form ``GET /api/runs/history`` lists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._owners import OWNER
from ...exceptions import CorruptRecordError
from ...types import JsonObject
from .schedules import json_object

__all__ = ["HISTORY_COLUMNS", "RUN_COLUMNS", "RunRow", "current_owner", "read_run"]


@dataclass(slots=True)
class RunRow:
    """One run's record: its chat and agent, why it started, and how it ended.

    ``source`` is ``user``, ``schedule:<id>``, ``subagent:<session>`` and so on; ``status`` is
    ``running`` until :meth:`~lovia.web.store.base.ChatIndexBase.finish_run` records ``completed``, ``failed``,
    ``cancelled`` or ``interrupted``.
    """

    id: str
    session_id: str | None
    agent: str | None
    source: str
    status: str
    error: str | None
    started_at: float
    finished_at: float | None
    usage: JsonObject | None
    owner: str | None = None
    """The serving process that last ran it (``host:pid``): tells a run live elsewhere from an orphan."""
    damaged: str | None = None
    """``None``, or why this record cannot be read and what to do (listed, not hidden)."""

    @property
    def run_id(self) -> str:
        """The run's id (``id``), under the name the run history uses."""
        return self.id

    @classmethod
    def from_row(cls, row: Any) -> RunRow:
        """Build from a mapping of field names, or from a ``SELECT`` of :data:`RUN_COLUMNS` in order."""
        if isinstance(row, Mapping):
            return cls(
                id=str(row.get("id") or row.get("run_id")),
                session_id=row.get("session_id"),
                agent=row.get("agent"),
                source=row.get("source") or "user",
                status=row.get("status") or "running",
                error=row.get("error"),
                started_at=float(row.get("started_at") or 0.0),
                finished_at=None if row.get("finished_at") is None else float(row["finished_at"]),
                usage=json_object(row.get("usage", row.get("usage_json"))),
            )
        cells = list(row)
        return cls(
            id=str(cells[0]),
            session_id=cells[1],
            agent=cells[2],
            source=cells[3] or "user",
            status=str(cells[4]),
            error=cells[5],
            started_at=float(cells[6]),
            finished_at=None if cells[7] is None else float(cells[7]),
            usage=json_object(cells[8]),
        )

    def to_dict(self) -> JsonObject:
        """JSON-safe form, with ``duration`` in seconds once the run finished."""
        out: JsonObject = {name: getattr(self, name) for name in _FIELDS}
        out["duration"] = None if self.finished_at is None else round(self.finished_at - self.started_at, 3)
        return out

    def history_dict(self) -> JsonObject:
        """The form ``GET /api/runs/history`` lists (``run_id`` for ``id``; ``damaged`` only when set)."""
        out: JsonObject = {"run_id": self.id, **{name: getattr(self, name) for name in _FIELDS[1:]}}
        if self.damaged:
            out["damaged"] = self.damaged
        return out


_FIELDS = ("id", "session_id", "agent", "source", "status", "error", "usage", "started_at", "finished_at")


RUN_COLUMNS = "run_id, session_id, agent, source, status, error, started_at, finished_at, usage_json"
"""The run table's columns :meth:`RunRow.from_row` reads, in order."""


HISTORY_COLUMNS = "run_id, session_id, status, usage_json, started_at, finished_at, agent, source, error, owner"
"""The run table's columns :func:`read_run` reads, in order."""


def read_run(row: Sequence[Any]) -> RunRow:
    """A run from a ``SELECT`` of :data:`HISTORY_COLUMNS`; a row that cannot be read gives a
    ``damaged`` run (one damaged record must not hide the others)."""
    try:
        usage = json.loads(row[3]) if row[3] else None
        if usage is not None and not isinstance(usage, dict):
            raise ValueError("usage is not a JSON object")
        return RunRow(
            id=str(row[0]),
            session_id=row[1],
            agent=row[6],
            source=row[7] or "user",
            status=str(row[2]),
            error=row[8],
            started_at=float(row[4]),
            finished_at=float(row[5]) if row[5] is not None else None,
            usage=usage,
            owner=row[9],
        )
    except (TypeError, ValueError) as exc:
        damaged = CorruptRecordError(
            f"the record of run {row[0]!r} cannot be read: {exc}",
            session_id=str(row[1]),
            run_id=str(row[0]),
            hint="the row was damaged outside lovia; it only holds the run's usage and timing, so it is safe to ignore",
        )
        return RunRow(str(row[0]), str(row[1]), None, "user", str(row[2]), None, 0.0, None, None, damaged=str(damaged))


def current_owner() -> str:
    """The serving process (``host:pid``) recorded as a run's owner."""
    return OWNER
