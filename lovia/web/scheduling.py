"""Scheduling: the agent proposes future runs of itself; the user approves each one.

``Scheduling(store)`` is a plugin for agents served by ``lovia web``. It contributes:

* ``schedule_run``: create a schedule (``at`` / ``every`` / ``cron``, see :mod:`lovia.web.triggers`).
  It needs approval, so nothing is scheduled until the user says yes in the page (a clientless
  run, such as a scheduled fire or a blocking ``POST /api/chat``, has no one to ask and is denied).
* ``list_schedules`` and ``cancel_schedule``: look and stop, without approval, so a scheduled
  fire can cancel its own schedule once its stop condition holds.
* ``start_session``: a new top-level chat that runs this agent on an instruction at once, linked
  back to the calling chat (``origin.kind == "spawn"``) but owned by neither. It reaches the
  server through the store: every :class:`~lovia.web.api.RouterDeps` registers itself under its
  chat store (:func:`register_server`).

The rows go to the same schedule store the server's :class:`~lovia.web.scheduler.Scheduler`
polls, so an approved schedule fires within one poll interval. ``until`` is a stop condition in
plain words, kept on the schedule: each fire is told to check it after the task and to call
``cancel_schedule`` when it holds (:func:`lovia.web.scheduler.fire_input`). Because a model may
never decide that it holds, ``until`` requires a deterministic limit too (``max_fires`` or
``expires_at``).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from ..exceptions import ToolError, UserError
from ..plugins.base import PluginInstance
from ..run_context import RunContext  # at run time: the tools' type hints are resolved
from ..tools import Tool, tool
from .store import ScheduleRow, ScheduleStore, open_schedule_store
from .store.base import ChatIndexBase
from .triggers import MAX_FIRES, check_time, initial_next_fire, validate_trigger

__all__ = ["Scheduling"]

# store -> its server's RouterDeps (typed Any: naming RouterDeps here would close an import cycle)
_SERVERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def register_server(deps: Any) -> None:
    """Let a ``Scheduling(deps.store)`` plugin start chats on this server (``start_session``)."""
    _SERVERS[deps.store] = deps


_INSTRUCTIONS = (
    "You can schedule future runs of yourself with `schedule_run` (the user approves each one), "
    "see them with `list_schedules` and stop one with `cancel_schedule`. Use a schedule only when "
    "the user asks for something to happen later or repeatedly."
)

TriggerKind = Literal["at", "every", "cron"]


def _parse_expiry(value: str | None) -> float | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        stamp = float(text)
    except ValueError:
        try:
            stamp = dt.datetime.fromisoformat(text).timestamp()
        except (ValueError, OverflowError, OSError):
            raise ToolError(
                f"expires_at {value!r} is neither an ISO-8601 time nor epoch seconds",
                hint="e.g. '2026-12-24T18:00:00+01:00'",
            ) from None
    try:
        return check_time(stamp, "expires_at")
    except UserError as exc:
        raise ToolError(exc.message, hint=exc.hint) from None


def _describe(row: ScheduleRow, here: str | None) -> dict[str, Any]:
    return {
        "schedule_id": row.id,
        "trigger": f"{row.trigger_kind} {row.trigger_expr}",
        "instruction": row.input.split("\n\n[Schedule ", 1)[0],
        "until": row.until,
        "active": row.active,
        "fires": row.fire_count,
        "max_fires": row.max_fires,
        "next_fire": dt.datetime.fromtimestamp(row.next_fire, dt.timezone.utc)
        .astimezone()
        .isoformat(timespec="seconds")
        if row.active
        else None,
        "finished_reason": row.finished_reason,
        "this_chat": here is not None and row.session_id == here,
    }


@dataclass
class Scheduling:
    """The scheduling plugin (see the module docstring).

    Args:
        store: where schedules live: a :class:`~lovia.web.store.ScheduleStore`, or the
            web app's :class:`~lovia.web.ChatStore` (its SQLite file, or its PostgreSQL database and
            schema, which is where ``create_app`` keeps schedules by default).
        instructions: the prompt text added to the agent's instructions (``None``: none).
        name: the plugin's name.
        clock: the time source for the first fire (the server's scheduler uses its own clock).
    """

    store: Any
    instructions: str | None = _INSTRUCTIONS
    name: str = "scheduling"
    clock: Callable[[], float] = time.time
    _schedules: ScheduleStore | None = field(default=None, init=False, repr=False)

    def schedules(self) -> ScheduleStore:
        """The schedule store, opened on first use when ``store`` is a chat store."""
        if self._schedules is None:
            self._schedules = _schedule_store_for(self.store)
        return self._schedules

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """The four tools, bound to the run's chat."""
        plugin = self

        @tool(needs_approval=True)
        async def schedule_run(
            run: RunContext[Any],
            instruction: Annotated[str, "What the future run should do, written as a request to yourself."],
            trigger: Annotated[TriggerKind, "'at' (once), 'every' (interval in seconds) or 'cron' (a cron line)."],
            value: Annotated[str, "The trigger value: an ISO-8601 time, a number of seconds, or a cron line."],
            continue_session: Annotated[
                bool, "True: each fire runs in this chat. False: each fire opens a new chat."
            ] = True,
            until: Annotated[str | None, "Optional stop condition in plain words, checked after each fire."] = None,
            max_fires: Annotated[int | None, "Stop after this many fires."] = None,
            expires_at: Annotated[str | None, "Stop after this time (ISO-8601 or epoch seconds)."] = None,
        ) -> dict[str, Any]:
            """Schedule a future run of yourself (the user must approve it)."""
            if not instruction.strip():
                raise ToolError("the instruction is empty", hint="say what the scheduled run should do")
            try:
                validate_trigger(trigger, value)
            except UserError as exc:
                raise ToolError(str(exc), hint=exc.hint) from None
            if max_fires is not None and not 1 <= max_fires <= MAX_FIRES:
                raise ToolError(f"max_fires must be between 1 and {MAX_FIRES}", hint="omit it for no limit")
            expiry = _parse_expiry(expires_at)
            if until and max_fires is None and expiry is None and trigger != "at":
                raise ToolError(
                    "a stop condition needs a safety limit too",
                    hint="add max_fires or expires_at, so the schedule ends even if the condition never holds",
                )
            if continue_session and run.session_id is None:
                raise ToolError("this run has no chat to continue", hint="use continue_session=False")
            now = plugin.clock()
            schedule_id = f"sched_{uuid.uuid4().hex[:16]}"
            context = _run_context(plugin.store, run.session_id) or None  # each fire's run_deps gets it
            row = ScheduleRow(
                id=schedule_id,
                input=instruction.strip(),
                trigger_kind=trigger,
                trigger_expr=value.strip(),
                next_fire=initial_next_fire(trigger, value, now=now),
                session_id=run.session_id if continue_session else None,
                agent=run.agent.name,
                active=True,
                last_session_id=None,
                until=until.strip() if until and until.strip() else None,
                max_fires=max_fires,
                expires_at=expiry,
                created_at=now,
                updated_at=now,
                context=context,
            )
            await plugin.schedules().add(row)
            return _describe(row, run.session_id)

        @tool
        async def list_schedules(run: RunContext[Any]) -> list[dict[str, Any]]:
            """The schedules (active first), with their triggers, fire counts and next fire times."""
            rows = await plugin.schedules().list()
            ordered = sorted(rows, key=lambda r: (not r.active, r.next_fire))
            return [_describe(r, run.session_id) for r in ordered]

        @tool
        async def cancel_schedule(
            run: RunContext[Any], schedule_id: Annotated[str, "The id schedule_run or list_schedules gave."]
        ) -> dict[str, Any]:
            """Stop a schedule (its record and fire history are kept)."""
            store = plugin.schedules()
            row = await store.get(schedule_id)
            if row is None:
                raise ToolError(f"no schedule {schedule_id!r}", hint="list_schedules shows the ids")
            if row.active:
                row.active = False
                row.finished_reason = "cancelled"
                row.updated_at = plugin.clock()
                await store.update(row)
            return _describe(row, run.session_id)

        @tool
        async def start_session(
            run: RunContext[Any],
            instruction: Annotated[str, "What the new chat should do, written as a request to yourself."],
            title: Annotated[str | None, "A short title for the new chat (default: from the instruction)."] = None,
        ) -> dict[str, Any]:
            """Start a new, separate chat that works on the instruction now (its answer is not reported back)."""
            return await _start_session(plugin.store, run, instruction, title)

        tools: list[Tool[Any]] = [schedule_run, list_schedules, cancel_schedule, start_session]
        return PluginInstance(tools=tools, instructions=self.instructions)


def _run_context(store: Any, session_id: str | None) -> dict[str, Any]:
    """The client context of the chat's live run on the server serving ``store`` (``{}``: none)."""
    deps = _SERVERS.get(store)
    live = deps.supervisor.get(session_id) if deps is not None and session_id else None
    return dict(live.client_context) if live is not None else {}


async def _start_session(store: Any, run: RunContext[Any], instruction: str, title: str | None) -> dict[str, Any]:
    from .titles import provisional_title

    deps = _SERVERS.get(store)
    if deps is None:
        raise ToolError(
            "start_session needs the web server that serves this chat store",
            hint="serve the agent with lovia web / create_app on the store given to Scheduling",
        )
    if not instruction.strip():
        raise ToolError("the instruction is empty", hint="say what the new chat should do")
    chats, sup = deps.store, deps.supervisor
    parent = await chats.get(run.session_id) if run.session_id else None
    name = (title or "").strip()[:200] or provisional_title(instruction)
    meta = await chats.create(title=name, agent=run.agent.name if run.agent.name in sup.agents else None)
    try:
        if parent is not None and chats.supports_origins:
            await chats.set_origin(
                meta.id, kind="spawn", origin_session_id=parent.id, user_turn=None, title=parent.title
            )
        async with sup.lock(meta.id):
            await sup.start(
                session_id=meta.id,
                agent=sup.agent_for(meta.agent),
                input=instruction.strip(),
                is_new=False,  # it has its title already
                title_message=None,
                chat_created_at=meta.created_at,
                client=_run_context(store, run.session_id),  # in the context of the run that called it
                run_deps=run.deps,
            )
    except Exception:
        await chats.delete(meta.id)  # a chat whose run never started is not left behind
        raise
    deps.announce_session(meta)
    return {"session_id": meta.id, "title": name, "status": "running"}


def _schedule_store_for(store: Any) -> ScheduleStore:
    if isinstance(store, ScheduleStore):
        return store
    if isinstance(store, ChatIndexBase):  # a ChatStore: its own schedule store
        return store.schedule_store
    dsn = getattr(store, "dsn", None)
    if isinstance(dsn, str):  # a PostgresChatStore: the same database and schema
        return open_schedule_store(dsn, schema=getattr(store, "schema", None))
    path = getattr(store, "path", None)
    if isinstance(path, str) and path != ":memory:":
        return open_schedule_store(path)
    raise UserError(
        f"Scheduling cannot find where {type(store).__name__} keeps schedules",
        hint="pass the app's ChatStore on a SQLite file or PostgreSQL, or a ScheduleStore",
    )
