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

import builtins
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..._owners import OWNER
from ...types import JsonObject
from .schedules import ScheduleRow, ScheduleStore, json_object

__all__ = ["PostgresScheduleRunMixin", "RunRow", "ScheduleRow", "ScheduleRunMixin"]


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


def _owner() -> str:
    return OWNER


class ScheduleRunMixin:
    """The schedule and run-record methods of :class:`~lovia.web.store.ChatStore`.

    The run methods speak SQL through :meth:`_runs_fetch` and :meth:`_runs_execute` (``?``
    placeholders, ``{runs}`` for the run table); the SQLite implementation here uses the chat
    index's connection and :class:`PostgresScheduleRunMixin` the PostgreSQL pool.
    """

    _schedule_handle: ScheduleStore | None = None
    _schedule_owned: bool = False

    # ------------------------------------------------------------------ the schedule store

    @property
    def schedule_store(self) -> ScheduleStore:
        """Where this store's schedules and fire claims live (opened beside the chats on first use)."""
        if self._schedule_handle is None:
            self._schedule_handle = self._open_schedule_store()
            self._schedule_owned = True
        return self._schedule_handle

    def bind_schedules(self, schedules: ScheduleStore | None) -> None:
        """Use ``schedules`` (yours: this store never closes it) as :attr:`schedule_store`.

        :meth:`delete` then removes a chat's schedules from it. ``None`` unbinds: the store opens its
        own beside the chats on next use.
        """
        self._schedule_handle, self._schedule_owned = schedules, False

    def _open_schedule_store(self) -> ScheduleStore:
        from .schedules import SQLiteScheduleStore

        return SQLiteScheduleStore(cast(Any, self).path)

    async def close_schedule_store(self) -> None:
        """Close the schedule store if this store opened it (it reopens on next use)."""
        handle, owned = self._schedule_handle, self._schedule_owned
        self._schedule_handle, self._schedule_owned = None, False
        if handle is not None and owned:
            await handle.close()

    # ------------------------------------------------------------------ schedules

    async def add_schedule(self, row: ScheduleRow) -> None:
        """Insert a new schedule."""
        await self.schedule_store.add(row)

    async def list_schedules(self, *, session_id: str | None = None) -> Sequence[ScheduleRow]:
        """Every schedule (or those bound to one chat), oldest first."""
        return await self.schedule_store.list(session_id=session_id)

    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        """One schedule, or ``None``."""
        return await self.schedule_store.get(schedule_id)

    async def update_schedule(self, row: ScheduleRow) -> None:
        """Write every field of an existing schedule."""
        await self.schedule_store.update(row)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule and its fire history; ``False`` when there was none."""
        return await self.schedule_store.delete(schedule_id)

    async def due_schedules(self, now: float) -> Sequence[ScheduleRow]:
        """Active schedules whose next fire is at or before ``now``, soonest first."""
        return await self.schedule_store.due(now)

    async def mark_fired(
        self,
        schedule_id: str,
        *,
        next_fire: float,
        active: bool,
        last_session_id: str | None,
        finished_reason: str | None = None,
    ) -> None:
        """Record one fire: count it, move to ``next_fire``, and stop the schedule unless ``active``.

        This writes the outcome only; the :class:`~lovia.web.scheduler.Scheduler` claims a slot
        (which makes it fire once across servers) before it fires.
        """
        row = await self.get_schedule(schedule_id)
        if row is None:
            return
        await self.update_schedule(
            dataclasses.replace(
                row,
                next_fire=next_fire,
                active=active,
                last_session_id=last_session_id if last_session_id is not None else row.last_session_id,
                finished_reason=finished_reason,
                fire_count=row.fire_count + 1,
                updated_at=time.time(),
            )
        )

    async def set_schedule_active(
        self, schedule_id: str, *, active: bool, next_fire: float | None = None, finished_reason: str | None = None
    ) -> None:
        """Pause, stop or resume a schedule (resuming usually passes its new ``next_fire``)."""
        row = await self.get_schedule(schedule_id)
        if row is None:
            return
        await self.update_schedule(
            dataclasses.replace(
                row,
                active=active,
                next_fire=row.next_fire if next_fire is None else next_fire,
                finished_reason=None if active else finished_reason,
                updated_at=time.time(),
            )
        )

    # ------------------------------------------------------------------ run records

    async def _runs_fetch(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        text = sql.format(runs="chat_runs")
        return cast(
            "builtins.list[tuple[Any, ...]]",
            await cast(Any, self)._db.run(lambda c: c.execute(text, params).fetchall()),
        )

    async def _runs_execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        text = sql.format(runs="chat_runs")
        return int(await cast(Any, self)._db.run(lambda c: c.execute(text, params).rowcount))

    async def start_run(self, row: RunRow) -> None:
        """Record a run that starts now; a resumed run (an id already recorded) is ``running`` again,
        keeping its start time and source."""
        usage = json.dumps(row.usage) if row.usage is not None else None
        await self._runs_execute(
            "INSERT INTO {runs} (run_id, session_id, agent, source, status, error, started_at, finished_at, "
            "usage_json, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "status = excluded.status, agent = COALESCE(excluded.agent, {runs}.agent), "
            "error = NULL, finished_at = NULL, owner = excluded.owner",
            (
                row.id,
                row.session_id or "",
                row.agent,
                row.source,
                row.status,
                row.error,
                row.started_at,
                row.finished_at,
                usage,
                _owner(),
            ),
        )

    async def finish_run(
        self, run_id: str, *, status: str, error: str | None = None, usage: dict[str, Any] | None = None
    ) -> None:
        """Record how a run ended (``usage`` ``None`` keeps what was recorded)."""
        await self._runs_execute(
            "UPDATE {runs} SET status = ?, error = ?, usage_json = COALESCE(?, usage_json), finished_at = ? "
            "WHERE run_id = ?",
            (status, error, json.dumps(usage) if usage is not None else None, time.time(), run_id),
        )

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        source: str | None = None,
        since: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Sequence[RunRow]:
        """Run records, newest first: of one chat, of one ``source``, and/or finished at or after ``since``."""
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if source is not None:
            where.append("source = ?")
            params.append(source)
        if since is not None:
            where.append("finished_at >= ?")
            params.append(since)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        rows = await self._runs_fetch(
            f"SELECT {RUN_COLUMNS} FROM {{runs}} {clause}ORDER BY started_at DESC, run_id DESC LIMIT ? OFFSET ?",
            (*params, max(0, int(limit)), max(0, int(offset))),
        )
        return [RunRow.from_row(r) for r in rows]

    async def latest_run_statuses(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The status of each chat's latest run (chats with no run are left out)."""
        ids = list(dict.fromkeys(session_ids))
        out: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = await self._runs_fetch(
                f"SELECT session_id, status FROM {{runs}} WHERE session_id IN ({marks}) ORDER BY started_at, run_id",
                tuple(chunk),
            )
            out.update({str(sid): str(status) for sid, status in rows})  # the latest one wins
        return out

    async def latest_run_for(self, source: str) -> RunRow | None:
        """The latest run started for ``source`` (e.g. ``schedule:<id>``), or ``None``."""
        rows = await self._runs_fetch(
            f"SELECT {RUN_COLUMNS} FROM {{runs}} WHERE source = ? ORDER BY started_at DESC, run_id DESC LIMIT 1",
            (source,),
        )
        return RunRow.from_row(rows[0]) if rows else None

    async def sweep_stale_runs(self) -> None:
        """Settle runs a dead server left ``running``: they become ``interrupted`` (resumable), with
        ``finished_at`` set to now.

        A run is stale when its owner (``host:pid``) is a process on this host that no longer
        runs. Runs owned by this process, by a live one, or by another host are left alone.
        """
        from ..._owners import owner_alive

        me = _owner()
        rows = await self._runs_fetch("SELECT run_id, owner FROM {runs} WHERE status = 'running' AND owner IS NOT NULL")
        for run_id, owner in rows:
            if owner != me and owner_alive(str(owner)) is False:
                await self._runs_execute(
                    "UPDATE {runs} SET status = 'interrupted', finished_at = ? "
                    "WHERE run_id = ? AND status = 'running' AND owner = ?",
                    (time.time(), run_id, owner),
                )


class PostgresScheduleRunMixin(ScheduleRunMixin):
    """:class:`ScheduleRunMixin` on a :class:`~lovia.web.store.PostgresChatStore`: its pool and schema."""

    dsn: str
    schema: str | None

    def _open_schedule_store(self) -> ScheduleStore:
        from .schedules import PostgresScheduleStore

        return PostgresScheduleStore(self.dsn, schema=self.schema)

    async def _runs_fetch(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        store = cast(Any, self)
        return cast("builtins.list[tuple[Any, ...]]", await store.fetch(_pg_sql(sql), params))

    async def _runs_execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        store = cast(Any, self)
        return int(await store.execute(_pg_sql(sql), params))


def _pg_sql(sql: str) -> str:
    """``?`` placeholders and ``{runs}`` in the PostgreSQL store's spelling (``%s``, ``{web_runs}``)."""
    return sql.replace("?", "%s").replace("{runs}", "{web_runs}")
