"""``Scheduling``: the agent schedules runs of its chat and starts new chats.

The plugin contributes four tools:

* ``schedule_run`` (a person approves each call): a schedule that sends a message on a timer,
  to this chat (``continue_session=True``) or to a new chat at each fire;
* ``list_schedules`` and ``cancel_schedule`` (no approval, so a clientless scheduled run can
  cancel its own schedule): cancelling deactivates the schedule and keeps its record;
* ``start_session``: a new top-level chat that runs this chat's agent on an instruction at once,
  linked back to this one (``origin.kind == "spawn"``) but owned by neither.

``Scheduling(store)`` finds the server serving ``store`` (every :class:`~lovia.web.api.RouterDeps`
registers itself); outside such a server the tools answer with an error the model can read.
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..exceptions import UserError
from ..run_context import RunContext
from ..tools import Tool, tool
from .store import ChatStore
from .triggers import initial_next_fire, validate_trigger

if TYPE_CHECKING:
    from ..plugins.base import PluginInstance
    from .api import RouterDeps

__all__ = ["Scheduling"]

_SERVERS: weakref.WeakKeyDictionary[ChatStore, RouterDeps] = weakref.WeakKeyDictionary()

_INSTRUCTIONS = (
    "You can schedule work. `schedule_run` proposes a run on a timer (cron, every N seconds, or once "
    "at a time); a person approves it first. `list_schedules` shows this chat's schedules and "
    "`cancel_schedule` stops one, which you may do yourself once its job is done. `start_session` "
    "starts a new, separate chat on an instruction right now; its answer is not reported back here."
)


def register_server(deps: RouterDeps) -> None:
    """Let ``Scheduling(deps.store)`` reach this server's runs and schedules."""
    _SERVERS[deps.store] = deps


@dataclass(eq=False)
class Scheduling:
    """The plugin: ``store`` is the chat store of the app that serves the agent."""

    store: ChatStore
    instructions: str | None = _INSTRUCTIONS
    name: str = "scheduling"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """This run's four tools, bound to its chat."""
        from ..plugins.base import PluginInstance

        return PluginInstance(tools=_tools(self.store, ctx.session_id), instructions=self.instructions)


def _server(store: ChatStore) -> RouterDeps:
    deps = _SERVERS.get(store)
    if deps is None:
        raise UserError(
            "scheduling needs the web server that serves this chat store",
            hint="serve the agent with lovia web / create_app on the store given to Scheduling",
        )
    return deps


def _tools(store: ChatStore, session_id: str | None) -> list[Tool[Any]]:
    @tool(needs_approval=True)
    async def schedule_run(
        message: str,
        trigger_kind: Literal["cron", "every", "at"],
        trigger_expr: str,
        continue_session: bool = True,
        max_fires: int | None = None,
    ) -> dict[str, Any]:
        """Schedule ``message`` on a timer: cron (5 fields, server local time), every N seconds, or
        once at an ISO-8601 time. ``continue_session`` runs it in this chat, else in a new chat each time."""
        from .schedule_store import ScheduleRow

        deps = _server(store)
        validate_trigger(trigger_kind, trigger_expr)
        if max_fires is not None and max_fires < 1:
            raise UserError("max_fires must be at least 1", hint="leave it out for no limit")
        meta = await store.get(session_id) if session_id else None
        now = deps.scheduler.clock()
        row = ScheduleRow(
            id=f"sched_{uuid.uuid4().hex[:16]}",
            input=message,
            trigger_kind=trigger_kind,
            trigger_expr=trigger_expr.strip(),
            next_fire=initial_next_fire(trigger_kind, trigger_expr, now=now),
            session_id=meta.id if continue_session and meta is not None else None,
            agent=meta.agent if meta is not None else None,
            max_fires=max_fires,
            created_at=now,
            updated_at=now,
        )
        assert deps.schedules is not None
        await deps.schedules.add(row)
        deps.scheduler.wake()
        return row.to_dict()

    @tool
    async def list_schedules() -> list[dict[str, Any]]:
        """This chat's schedules, active or not."""
        deps = _server(store)
        assert deps.schedules is not None
        return [row.to_dict() for row in await deps.schedules.list(session_id=session_id)] if session_id else []

    @tool
    async def cancel_schedule(schedule_id: str) -> str:
        """Stop a schedule of this chat (its record stays)."""
        deps = _server(store)
        assert deps.schedules is not None
        row = await deps.schedules.get(schedule_id)
        if row is None or row.session_id != session_id:
            return f"Error: this chat has no schedule {schedule_id!r}; see list_schedules."
        await deps.schedules.update(
            dataclasses.replace(row, active=False, finished_reason="cancelled", updated_at=deps.scheduler.clock())
        )
        return f"Cancelled {schedule_id}."

    @tool
    async def start_session(instruction: str, title: str | None = None) -> dict[str, Any]:
        """Start a new, separate chat that works on ``instruction`` now (its answer is not reported back)."""
        from .routes_schedules import title_from

        deps = _server(store)
        sup = deps.supervisor
        parent = await store.get(session_id) if session_id else None
        name = (title or "").strip()[:200] or title_from(instruction)
        meta = await store.create(title=name, agent=parent.agent if parent else None)
        try:
            if parent is not None and store.supports_origins:
                await store.set_origin(
                    meta.id, kind="spawn", origin_session_id=parent.id, user_turn=None, title=parent.title
                )
            async with sup.lock(meta.id):
                sup.start(meta.id, instruction, agent=meta.agent)
        except Exception:
            await store.delete(meta.id)  # a chat that never started is not left behind
            raise
        sup.hub.publish("session_created", {"session": meta.to_dict()})
        return {"session_id": meta.id, "title": name, "status": "running"}

    return [schedule_run, list_schedules, cancel_schedule, start_session]
