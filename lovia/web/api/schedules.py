"""Schedule routes: ``/api/schedules`` (list, create, read, retime/pause/resume, delete, fire now, history).

A fire starts a normal run of the schedule's chat through the run supervisor, exactly as a
message sent from the page would; when that chat already has a run in flight, the schedule's
input joins it as a steering message instead. A schedule without a chat opens a new chat per fire.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from fastapi import APIRouter

from ...exceptions import UserError
from ..errors import ApiRoute, ErrorCode, WebError
from ..run_deps import checked_context
from ..schemas import SchedulePatch, ScheduleSpec
from ..store import ChatMeta, ScheduleRow
from ..triggers import initial_next_fire, validate_trigger
from .deps import RouterDeps

__all__ = ["build_schedules_router"]


def _error(status: int, code: ErrorCode, message: str, hint: str | None = None) -> WebError:
    return WebError(status, code, message, hint=hint)


def build_schedules_router(deps: RouterDeps) -> APIRouter:
    """The ``/api/schedules`` routes bound to ``deps`` (its schedule store and scheduler)."""
    router = APIRouter(prefix="/api/schedules", route_class=ApiRoute)
    _collection_routes(router, deps)
    _item_routes(router, deps)
    return router


async def _run_records(deps: RouterDeps, session_ids: Any) -> dict[str, dict[str, Any]]:
    """The run records of these chats, by run id."""
    out: dict[str, dict[str, Any]] = {}
    for session_id in {s for s in session_ids if s}:
        out.update({run_id: record.history_dict() for run_id, record in (await deps.store.runs(session_id)).items()})
    return out


async def _info(deps: RouterDeps, row: ScheduleRow) -> dict[str, Any]:
    """The schedule as the API shows it: its row, plus ``last_status``, the outcome of its latest fire."""
    out = row.to_dict()
    status: str | None = None
    if row.last_run_id:
        record = (await _run_records(deps, [row.last_session_id])).get(row.last_run_id)
        status = str(record["status"]) if record is not None else "running"
    elif row.last_error:
        status = "failed"  # the fire could not start its run
    out["last_status"] = status
    return out


def _fire(row: ScheduleRow, claim: dict[str, Any], record: dict[str, Any] | None) -> dict[str, Any]:
    """One fire of a schedule: the record of the run it started (``run_id``, ``status``, ``usage``...)
    and the claimed slot (``slot``, ``claimed_at``, ``fired_at``); a fire that could not start is a
    failed record with the reason as its ``error``."""
    if record is not None:
        return {**claim, **record, "error": claim.get("error") or record.get("error")}
    started = claim.get("fired_at") or claim.get("claimed_at")
    return {
        **claim,
        "agent": row.agent,
        "source": f"schedule:{row.id}",
        "status": "failed" if claim.get("error") else "running",
        "started_at": started,
        "finished_at": started if claim.get("error") else None,
        "usage": None,
    }


def _check_refs(deps: RouterDeps, agent: str | None) -> None:
    if agent is not None and agent not in deps.agents:
        raise _error(404, "agent_not_found", f"no agent {agent!r}", f"use one of {', '.join(sorted(deps.agents))}")


def _check_trigger(kind: str, expr: str) -> None:
    try:
        validate_trigger(kind, expr)
    except UserError as exc:
        raise _error(422, "invalid_request", exc.message, exc.hint) from exc


def _agent_of(deps: RouterDeps, agent: str | None, chat: ChatMeta | None) -> str | None:
    """The agent a new schedule runs: the one named, else its chat's; on a multi-agent server one is required (400)."""
    if agent is not None or len(deps.agents) <= 1:
        return agent
    if chat is not None and chat.agent is not None:
        return chat.agent
    raise _error(
        400,
        "invalid_request",
        "this server serves several agents: say which one the schedule runs",
        f"send agent, one of {', '.join(sorted(deps.agents))}",
    )


def _collection_routes(router: APIRouter, deps: RouterDeps) -> None:
    @router.get("")
    async def list_schedules(session_id: str | None = None) -> list[dict[str, Any]]:
        assert deps.schedules is not None
        return [await _info(deps, row) for row in await deps.schedules.list(session_id=session_id)]

    @router.post("")
    async def create(body: ScheduleSpec) -> dict[str, Any]:
        assert deps.schedules is not None and deps.scheduler is not None
        context = checked_context(body.context)
        _check_refs(deps, body.agent)
        _check_trigger(body.trigger_kind, body.trigger_expr)
        chat = await deps.store.get(body.session_id) if body.session_id is not None else None
        if body.session_id is not None and chat is None:
            raise _error(
                404, "session_not_found", f"no chat {body.session_id!r}", "create the chat first, or omit session_id"
            )
        agent = _agent_of(deps, body.agent, chat)
        until = _check_until(body.until, body.trigger_kind, body.max_fires, body.expires_at)
        now = deps.scheduler.clock()
        schedule_id = f"sched_{uuid.uuid4().hex[:16]}"
        row = ScheduleRow(
            id=schedule_id,
            input=body.input,
            until=until,
            trigger_kind=body.trigger_kind,
            trigger_expr=body.trigger_expr.strip(),
            next_fire=initial_next_fire(body.trigger_kind, body.trigger_expr, now=now),
            session_id=body.session_id,
            agent=agent,
            active=True,
            last_session_id=None,
            max_fires=body.max_fires,
            expires_at=body.expires_at,
            created_at=now,
            updated_at=now,
            context=context or None,
        )
        await deps.schedules.add(row)
        deps.scheduler.wake()
        return await _info(deps, row)


def _check_until(until: str | None, kind: str, max_fires: int | None, expires_at: float | None) -> str | None:
    """The stop condition, stripped (``None`` when blank); a repeating one needs a safety limit."""
    text = (until or "").strip() or None
    if text is not None and kind != "at" and max_fires is None and expires_at is None:
        raise _error(
            422,
            "invalid_request",
            "a stop condition (until) needs a safety limit too",
            "add max_fires or expires_at, so the schedule ends even if the condition never holds",
        )
    return text


def _patched(row: ScheduleRow, body: SchedulePatch, *, now: float) -> ScheduleRow:
    """``row`` with the patch applied; a retime or a resume restarts the timing from ``now``.

    A patched ``until`` replaces the stop condition (an empty one removes it); a patched
    ``input`` keeps the current condition.
    """
    changes = body.model_dump(exclude_unset=True)
    has_until = "until" in changes
    until = changes.pop("until", None)
    updated = dataclasses.replace(
        row, **{k: v for k, v in changes.items() if v is not None or k in ("max_fires", "expires_at")}
    )
    _check_trigger(updated.trigger_kind, updated.trigger_expr)
    if has_until:
        updated.until = _check_until(until, updated.trigger_kind, updated.max_fires, updated.expires_at)
    retimed = "trigger_kind" in changes or "trigger_expr" in changes
    resumed = body.active is True and not row.active
    if retimed or resumed:  # slots missed while paused are not made up
        updated.next_fire = initial_next_fire(updated.trigger_kind, updated.trigger_expr, now=now)
    if resumed:
        updated.finished_reason = None
    elif body.active is False:
        updated.finished_reason = "paused"
    updated.updated_at = now
    return updated


def _item_routes(router: APIRouter, deps: RouterDeps) -> None:
    async def require(schedule_id: str) -> ScheduleRow:
        assert deps.schedules is not None
        row = await deps.schedules.get(schedule_id)
        if row is None:
            raise _error(404, "schedule_not_found", f"no schedule {schedule_id!r}", "list them with GET /api/schedules")
        return row

    @router.get("/{schedule_id}")
    async def read(schedule_id: str) -> dict[str, Any]:
        return await _info(deps, await require(schedule_id))

    @router.patch("/{schedule_id}")
    async def patch(schedule_id: str, body: SchedulePatch) -> dict[str, Any]:
        assert deps.schedules is not None and deps.scheduler is not None
        row = await require(schedule_id)
        _check_refs(deps, body.agent)
        if body.session_id is not None and await deps.store.get(body.session_id) is None:
            raise _error(404, "session_not_found", f"no chat {body.session_id!r}", "name a chat that exists")
        updated = _patched(row, body, now=deps.scheduler.clock())
        await deps.schedules.update(updated)
        deps.scheduler.wake()
        return await _info(deps, updated)

    @router.delete("/{schedule_id}")
    async def delete(schedule_id: str) -> dict[str, Any]:
        assert deps.schedules is not None
        if not await deps.schedules.delete(schedule_id):
            raise _error(404, "schedule_not_found", f"no schedule {schedule_id!r}", "it may already be deleted")
        return {"deleted": schedule_id}

    @router.post("/{schedule_id}/run")
    async def run_now(schedule_id: str) -> dict[str, Any]:
        assert deps.scheduler is not None
        row = await require(schedule_id)
        try:
            session_id, run_id = await deps.scheduler.fire_now_run(row)
        except UserError as exc:
            raise _error(409, "schedule_not_fired", exc.message, exc.hint) from exc
        return {"schedule_id": schedule_id, "session_id": session_id, "run_id": run_id}

    @router.get("/{schedule_id}/runs")
    async def runs(schedule_id: str, limit: int = 50) -> list[dict[str, Any]]:
        assert deps.schedules is not None
        row = await require(schedule_id)
        # A claim whose run has not started yet (fired_at unset) is not a fire yet: it turns into one
        # moments later, or reclaim() takes it over if its server died in between.
        claimed = await deps.schedules.claims(schedule_id, limit=max(1, min(limit, 500)))
        claims = [c.to_dict() for c in claimed if c.fired_at is not None or c.error is not None]
        records = await _run_records(deps, [c.get("session_id") for c in claims])
        return [_fire(row, c, records.get(c["run_id"]) if c.get("run_id") else None) for c in claims]
