"""One fire of a schedule: the message it sends and the run it starts in its chat.

A fire starts a normal run through the run supervisor, as a message sent from the page would;
when the chat already has a run in flight, the input joins it as a steering message instead. A
schedule without a chat opens a new chat per fire. The :class:`~lovia.web.scheduler.Scheduler`
calls :func:`fire_in_chat`; so does ``POST /api/schedules/{id}/fire``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from ..exceptions import UserError
from .run_deps import RunDepsFn, RunTrigger, build_run_deps
from .titles import provisional_title

if TYPE_CHECKING:
    from .store import ChatIndex, ChatMeta, ScheduleRow
    from .supervisor import RunSupervisor

__all__ = ["FireState", "fire_in_chat", "fire_input"]


class FireState(Protocol):
    """What a fire needs of the server: its chats, its runs, and how a run's ``deps`` are built."""

    store: ChatIndex
    run_deps: RunDepsFn | None

    @property
    def supervisor(self) -> RunSupervisor: ...

    def announce_session(self, meta: ChatMeta) -> None: ...

    def emit(self, event: str, data: Mapping[str, object]) -> None: ...


def fire_input(sched: ScheduleRow) -> str:
    """The message one fire of ``sched`` sends: its input, plus its stop condition when it has one.

    A schedule with ``until`` asks the run to check the condition after doing the task and to
    cancel the schedule (``cancel_schedule``) once it holds.
    """
    if not sched.until or not sched.until.strip():
        return sched.input
    return (
        f"{sched.input}\n\n[Schedule {sched.id}] After doing the task, check whether this stop condition holds: "
        f"{sched.until.strip()}\nIf it does, call cancel_schedule with schedule_id={sched.id!r}."
    )


async def fire_in_chat(state: FireState, row: ScheduleRow) -> tuple[str | None, str | None]:
    """Start the run of one fire of ``row``; returns ``(session_id, run_id)``.

    At the concurrent-run cap, or when ``run_deps`` refuses, it raises before any chat is made
    (the scheduler records the fire as failed and the schedule moves on to its next time).
    """
    store, sup = state.store, state.supervisor
    if sup.closing:
        raise UserError("the server is shutting down", hint="the slot is fired again after the restart")
    meta = await store.get(row.session_id) if row.session_id else None
    if meta is None and row.session_id is not None:
        raise UserError(f"chat {row.session_id!r} is gone", hint="delete this schedule or bind it to another chat")
    sid = meta.id if meta is not None else f"chat_{uuid.uuid4().hex[:16]}"
    async with sup.lock(sid):
        live = sup.get(sid)
        if live is not None:  # join the run in flight rather than queue a second one
            live.inject(fire_input(row))
            return sid, live.run_id
        sup.check_capacity()
        agent_name = row.agent or (meta.agent if meta is not None else None)
        context = dict(row.context or {})
        agent = sup.agent_for(agent_name)
        trigger = RunTrigger(session_id=sid, agent=agent, source=f"schedule:{row.id}", client_context=context)
        run_deps = await build_run_deps(state.run_deps, trigger)
        if meta is None:
            meta = await store.create(title=provisional_title(row.input), agent=row.agent, session_id=sid)
            state.announce_session(meta)
        if meta.active_run_id:
            await sup.finalize_partial(sid, meta.active_run_id)
        started = await sup.start(
            session_id=sid,
            agent=agent,
            input=fire_input(row),
            is_new=False,
            title_message=None,
            autostart=True,
            source=f"schedule:{row.id}",
            client=context,
            run_deps=run_deps,
            chat_created_at=meta.created_at,
        )
    await store.update(sid)
    state.emit("schedule_fired", {"schedule_id": row.id, "session_id": sid, "run_id": started.run_id})
    return sid, started.run_id
