"""Schedules and run records on the chat store: :class:`ScheduleRow`, :class:`RunRow` and the
:class:`ChatStore <lovia.web.store.ChatStore>` methods that read and write them.

Schedules live in the schedule store of :mod:`lovia.web.schedule_store` (the ``web_schedules``
and ``web_schedule_claims`` tables), opened on first use beside the chats: in the same SQLite file,
or in the same PostgreSQL database and schema. :attr:`ScheduleRunMixin.schedule_store` is that
handle; the :class:`~lovia.web.scheduler.Scheduler` claims slots through it, so a slot fires once
even with several servers on one database.

Run records are the rows of the chat index's run table (``chat_runs`` in SQLite, ``web_runs`` in
PostgreSQL): one per run, with the agent, why it started (``source``), its status, error and usage,
and the serving process that owns it (``owner``, ``host:pid``), which :meth:`sweep_stale_runs` uses
to settle runs a dead server left ``running``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._owners import OWNER
from ...types import JsonObject
from .schedules import json_object

__all__ = ["RUN_COLUMNS", "RunRow", "current_owner"]


@dataclass(slots=True)
class RunRow:
    """One run's record: its chat and agent, why it started, and how it ended.

    ``source`` is ``user``, ``schedule:<id>``, ``subagent:<session>`` and so on; ``status`` is
    ``running`` until :meth:`ScheduleRunMixin.finish_run` records ``completed``, ``failed``,
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
        out = dataclasses.asdict(self)
        out["duration"] = None if self.finished_at is None else round(self.finished_at - self.started_at, 3)
        return out


RUN_COLUMNS = "run_id, session_id, agent, source, status, error, started_at, finished_at, usage_json"
"""The run table's columns :meth:`RunRow.from_row` reads, in order."""


def current_owner() -> str:
    """The serving process (``host:pid``) recorded as a run's owner."""
    return OWNER
