"""``ChatIndexBase``: what both chat index backends do the same way, written once against the
methods each backend implements for its own database (declared abstract here).

:class:`~lovia.web.store.ChatStore` (SQLite) and :class:`~lovia.web.store.PostgresChatStore`
each derive from it, and from nothing of each other. Here: titles and pins, search, the run in
flight, forks, task trees, deleting every chat, the schedule store beside the chats (opened by
:meth:`ChatIndexBase._open_schedule_store`) and the run records of the scheduler and run history
(SQL with ``?`` placeholders and ``{runs}`` for the run table, run by each backend's
:meth:`ChatIndexBase._runs_fetch` and :meth:`ChatIndexBase._runs_execute`).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ...checkpointer import Checkpointer
from ...session import Session
from ...transcript import InputEntry
from ..serialization import parse_ref, segments_runs, user_turn_refs
from .delete import Doomed, SharedStores
from .records import MAX_TITLE_CHARS, SUBAGENT, ChatMeta
from .runs import RUN_COLUMNS, RunRow, current_owner
from .schedules import ScheduleRow, ScheduleStore

__all__ = ["ChatIndexBase"]


class ChatIndexBase(ABC):
    """The behaviour both chat index backends share (see the module docstring)."""

    session: Session
    checkpointer: Checkpointer

    # ------------------------------------------------------------------ what each backend implements

    @property
    @abstractmethod
    def path(self) -> str:
        """Where the index is, for messages."""

    @abstractmethod
    def _open_schedule_store(self) -> ScheduleStore:
        """The schedule store beside the chats (same file, or same database and schema)."""

    @abstractmethod
    async def _runs_fetch(self, sql: str, params: tuple[Any, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        """Rows of one query on the run table (``?`` placeholders, ``{runs}`` for the table)."""

    @abstractmethod
    async def _runs_execute(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """Run one statement on the run table; the number of rows it touched."""

    @abstractmethod
    async def _set_origin_ref(self, session_id: str, ref: str | None) -> None:
        """Record the user message a fork was cut before."""

    @abstractmethod
    async def get(self, session_id: str) -> ChatMeta | None: ...

    @abstractmethod
    async def list(self, *, limit: int = 200, offset: int = 0, query: str | None = None) -> builtins.list[ChatMeta]: ...

    @abstractmethod
    async def ids(self) -> builtins.list[str]: ...

    @abstractmethod
    async def create(self, *, title: str = "", agent: str | None = None, session_id: str | None = None) -> ChatMeta: ...

    @abstractmethod
    async def update(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None, touch: bool = True
    ) -> None: ...

    @abstractmethod
    async def set_active_run_id(
        self, session_id: str, run_id: str, *, context: dict[str, Any] | None = None
    ) -> None: ...

    @abstractmethod
    async def clear_active_run_id(self, session_id: str, *, expected: str | None = None) -> None: ...

    @abstractmethod
    async def set_origin(
        self, session_id: str, *, kind: str, origin_session_id: str, user_turn: int | None, title: str
    ) -> None: ...

    @abstractmethod
    async def list_children(self, parent_id: str) -> builtins.list[ChatMeta]: ...

    @abstractmethod
    async def copy_ui_data(self, from_session_id: str, to_session_id: str) -> None: ...

    @abstractmethod
    async def delete(self, session_id: str, *, schedules: bool = True) -> None: ...

    # ------------------------------------------------------------------ chats

    @property
    def supports_rewind(self) -> bool:
        """Whether the session store offers ``rewind`` (edit-and-resend and regenerate)."""
        return callable(getattr(self.session, "rewind", None))

    async def _delete_schedules(self, session_id: str) -> None:
        await self.schedule_store.delete_for_session(session_id)

    async def _link(self, session_id: str, *, parent_id: str | None, spawned_from: str | None) -> None:
        for kind, origin_id in ((SUBAGENT, parent_id), ("spawn", spawned_from)):
            if origin_id is not None:
                origin = await self.get(origin_id)
                title = (origin.title if origin is not None else None) or ""
                await self.set_origin(session_id, kind=kind, origin_session_id=origin_id, user_turn=None, title=title)

    async def search(self, query: str, *, limit: int = 200, offset: int = 0) -> builtins.list[ChatMeta]:
        """The chats whose title or id contains ``query`` (case-insensitive; ``%`` and ``_`` are
        plain characters), in :meth:`list` order."""
        return await self.list(query=query or None, limit=limit, offset=offset)

    async def set_title(self, session_id: str, title: str) -> None:
        """Rename a chat, the title stripped and cut to :data:`MAX_TITLE_CHARS` (``updated_at``
        stays: a rename does not move it in the list)."""
        await self.update(session_id, title=title.strip()[:MAX_TITLE_CHARS], touch=False)

    async def set_pinned(self, session_id: str, pinned: bool) -> None:
        """Pin or unpin a chat (pinned chats list first)."""
        await self.update(session_id, pinned=pinned, touch=False)

    async def get_active_run_id(self, session_id: str) -> str | None:
        """The id of the chat's run in flight (resumable after a restart), or ``None``."""
        meta = await self.get(session_id)
        return meta.active_run_id if meta is not None else None

    async def set_active_run(self, session_id: str, run_id: str | None) -> None:
        """Remember (or forget, with ``None``) the run in flight of a chat, without a client context."""
        if run_id is None:
            await self.clear_active_run_id(session_id)
        else:
            await self.set_active_run_id(session_id, run_id)

    async def fork(self, source_id: str, *, ref: str | None = None, user_turn: int | None = None) -> str | None:
        """Copy a chat's finished history into a new chat; the new chat's id.

        The copy stops just before the user message ``ref`` names (or ``user_turn``, its
        zero-based index among the user messages), or takes everything. The new chat records
        its origin (``origin_kind == "fork"``) and gets the source's UI data; the source is not
        touched. ``None``: no such chat, no such message, or no finished history before it.
        """
        meta = await self.get(source_id)
        if meta is None:
            return None
        segments = await self.session.segments(source_id)  # finished runs only: a live one is not there
        runs = segments_runs(segments)
        if ref is not None:
            user_turn = parse_ref(ref, runs)
            if user_turn is None:
                return None
        elif user_turn is not None:
            refs = user_turn_refs(runs)
            if user_turn >= len(refs):
                return None
            ref = refs[user_turn]
        entries = [e for s in segments for e in s.entries]
        users = [i for i, e in enumerate(entries) if isinstance(e, InputEntry) and e.role == "user"]
        keep = len(entries) if user_turn is None else users[user_turn]
        if keep == 0:
            return None
        new = await self.create(title=f"{meta.title or 'Chat'} (branch)", agent=meta.agent)
        try:
            await self.set_origin(
                new.id, kind="fork", origin_session_id=source_id, user_turn=user_turn, title=meta.title or ""
            )
            await self._set_origin_ref(new.id, ref)
            start = 0
            for seg in segments:  # append-only copy: each run becomes a new run of the new chat
                taken = seg.entries[: max(0, keep - start)]
                start += len(seg.entries)
                if taken:
                    await self.session.append(new.id, taken, meta=seg.meta)
            await self.copy_ui_data(source_id, new.id)  # the copied envelopes name the same refs
        except BaseException:
            await self.delete(new.id, schedules=False)  # no half-made branch is left behind
            raise
        return new.id

    async def task_tree(self, session_id: str) -> builtins.list[str]:
        """``session_id`` then the ids of all its subagent tasks, theirs, and so on (breadth first)."""
        out, seen, frontier = [session_id], {session_id}, [session_id]
        while frontier:
            nxt = []
            for parent in frontier:
                for child in await self.list_children(parent):
                    if child.id not in seen:
                        seen.add(child.id)
                        out.append(child.id)
                        nxt.append(child.id)
            frontier = nxt
        return out

    async def _after_delete(self, doomed: Doomed, shared: SharedStores, *, schedules: bool) -> None:
        """Clear what the deleted chats had in stores outside the index's transaction."""
        if not shared.checkpointer:
            for run_id in doomed.run_ids:
                await self.checkpointer.delete(run_id)
        if not shared.session:
            for chat_id in doomed.chats:
                await self.session.clear(chat_id)
        if schedules and not shared.schedules:
            for chat_id in doomed.chats:
                await self._delete_schedules(chat_id)

    async def delete_all(self) -> None:
        """Delete every chat, with its schedules (see :meth:`delete`)."""
        for session_id in await self.ids():
            await self.delete(session_id)

    # ------------------------------------------------------------------ the schedule store

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
                current_owner(),
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

        me = current_owner()
        rows = await self._runs_fetch("SELECT run_id, owner FROM {runs} WHERE status = 'running' AND owner IS NOT NULL")
        for run_id, owner in rows:
            if owner != me and owner_alive(str(owner)) is False:
                await self._runs_execute(
                    "UPDATE {runs} SET status = 'interrupted', finished_at = ? "
                    "WHERE run_id = ? AND status = 'running' AND owner = ?",
                    (time.time(), run_id, owner),
                )
