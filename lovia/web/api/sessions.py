"""Session routes: list/search, create, read, rename, delete, rewind, export, todos, follow-ups,
uploads, fork and background processes of a chat; live runs and run history."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import time
from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from ...parts import ImagePart
from ...session import Segment
from ...transcript import (
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
    drop_dangling_tool_calls,
    entries_to_messages,
    entry_to_dict,
)
from ..errors import ApiRoute, WebError
from ..params import Limit, Offset, Since
from ..routes_processes import processes_router
from ..routes_uploads import uploads_router
from ..schemas import CreateSessionRequest, RewindRequest, SessionPatch, TodoItemOut, TodosResponse
from ..serialization import (
    EXPORT_HTML_CSP,
    Run,
    drop_system_entries,
    export_html,
    export_md,
    export_txt,
    parse_ref,
    segments_runs,
    segments_to_out,
    view_messages,
)
from ..store import ChatMeta
from .deps import RouterDeps
from .followups import build_followups_router

__all__ = ["build_sessions_router"]


def _user_positions(entries: list[TranscriptEntry]) -> list[int]:
    return [i for i, e in enumerate(entries) if isinstance(e, InputEntry) and e.role == "user"]


def _runs(segments: list[Segment], records: dict[str, Any]) -> list[dict[str, Any]]:
    out, start = [], 0
    for seg in segments:
        record = records.get(seg.run_id)
        meta = seg.meta or {}
        out.append(
            {
                "run_id": seg.run_id,
                "start": start,
                "count": len(seg.entries),
                "usage": record.usage if record is not None else None,
                "source": record.source if record is not None else None,
                "stopped": bool(meta.get("stopped")),
                "error": meta.get("error"),
                "timing": meta.get("timing"),
            }
        )
        start += len(seg.entries)
    return out


_SERVABLE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _tool_image(segments: list[Segment], call_id: str, index: int) -> tuple[str, bytes] | None:
    """The bytes of image ``index`` (counted among the result's image parts, from 0) of ``call_id``'s result.

    Only inline raster images are served: a URL-only image is not fetched on the client's
    behalf, and an SVG (script-capable) or undecodable payload is not servable.
    """
    for seg in reversed(segments):
        for e in seg.entries:
            images = [p for p in e.parts or () if isinstance(p, ImagePart)] if isinstance(e, ToolResultEntry) else []
            if isinstance(e, ToolResultEntry) and e.call_id == call_id and 0 <= index < len(images):
                part = images[index]
                if part.data is None or part.mime_type not in _SERVABLE_IMAGES:
                    return None
                try:
                    return part.mime_type, base64.b64decode(part.data, validate=True)
                except (ValueError, binascii.Error):
                    return None
    return None


def build_sessions_router(deps: RouterDeps) -> APIRouter:
    """The ``/api/sessions`` routes (with a chat's todos, follow-ups, uploads, fork and background
    processes) and ``/api/runs`` bound to ``deps``."""
    own = APIRouter(prefix="/api", route_class=ApiRoute)
    _read_routes(own, deps)
    _ui_data_route(own, deps)
    _children_route(own, deps)
    _todo_route(own, deps)
    _write_routes(own, deps)
    router = APIRouter(route_class=ApiRoute)
    for part in (own, uploads_router(deps), processes_router(deps), build_followups_router(deps)):
        router.include_router(part)  # each part carries its own /api prefix
    return router


async def _require(deps: RouterDeps, session_id: str) -> ChatMeta:
    meta = await deps.store.get(session_id)
    if meta is None:
        raise WebError(
            404, "session_not_found", f"no chat {session_id!r}", hint="list the chats with GET /api/sessions"
        )
    return meta


def _export_response(meta: ChatMeta, entries: list[TranscriptEntry], format: str) -> Response:
    """The md, txt or html export of a chat's entries (422 for another format)."""
    msgs = entries_to_messages(drop_system_entries(entries))
    if format == "txt":
        return PlainTextResponse(f"{meta.title or 'Chat'}\n\n{export_txt(msgs)}", media_type="text/plain")
    if format == "html":
        page = export_html(msgs, title=meta.title or "", session_id=meta.id)
        headers = {"Content-Security-Policy": EXPORT_HTML_CSP, "X-Content-Type-Options": "nosniff"}
        return Response(page, media_type="text/html", headers=headers)
    if format != "md":
        raise WebError(
            422, "invalid_request", f"unknown export format {format!r}", hint="use format=md, json, txt or html"
        )
    return PlainTextResponse(export_md(msgs, title=meta.title or "", session_id=meta.id), media_type="text/markdown")


def _read_routes(router: APIRouter, deps: RouterDeps) -> None:
    store, sup = deps.store, deps.supervisor

    @router.get("/sessions")
    async def list_sessions(q: str | None = None, limit: Limit = 100, offset: Offset = 0) -> list[dict[str, Any]]:
        metas = await store.list(query=q or None, limit=limit, offset=offset)
        statuses = await store.latest_run_statuses([m.id for m in metas])
        return [
            {**m.to_dict(), "last_run_status": statuses.get(m.id), "live": sup.get(m.id) is not None} for m in metas
        ]

    @router.post("/sessions")
    async def create_session(body: CreateSessionRequest) -> dict[str, Any]:
        meta = await store.create(title=body.title, agent=body.agent)
        deps.announce_session(meta)
        return meta.to_dict()

    @router.get("/sessions/{session_id}")
    async def get_session(session_id: str) -> dict[str, Any]:
        meta = await store.get(session_id)
        if meta is None:  # unknown or deleted: a chat with nothing in it (a message starts it)
            return _empty_detail(session_id)
        segments = await store.session.segments(session_id)
        pending = await _checkpoint_entries(deps, meta)  # an interrupted run's turns follow the stored ones
        entries = [e for s in segments for e in s.entries] + pending
        runs = segments_runs(segments) + ([Run(None, pending)] if pending else [])
        origin = _origin(await store.origin(session_id), meta)
        task_of = None
        if origin is not None and origin["kind"] not in ("fork", "spawn"):
            task_of, origin = origin, None  # a subagent's chat: parent_id names its parent
        return {
            **meta.to_dict(),
            "entries": view_messages(runs, created_at=meta.created_at, updated_at=meta.updated_at),
            "transcript": [entry_to_dict(e) for e in entries],
            "runs": _runs(segments, await store.runs(session_id)),
            "live": sup.get(session_id) is not None,
            "origin": origin,
            "task_of": task_of,
            "variants": [
                {"user_turn": turn, "answers": answers} for turn, answers in (await store.variants(session_id)).items()
            ],
        }

    @router.get("/sessions/{session_id}/tool-images/{call_id}/{index}")
    async def tool_image(session_id: str, call_id: str, index: int) -> Response:
        await _require(deps, session_id)
        part = _tool_image(await store.session.segments(session_id), call_id, index)
        if part is None:
            raise WebError(
                404,
                "image_not_found",
                f"no image {index} in the result of call {call_id!r}",
                hint="the chat's detail lists each tool result's images",
            )
        mime, data = part
        headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600"}
        return Response(data, media_type=mime, headers=headers)

    @router.get("/sessions/{session_id}/export")
    async def export(session_id: str, format: str = "md") -> Any:
        meta = await _require(deps, session_id)
        entries = await store.session.load(session_id)
        if format == "json":
            segments = await store.session.segments(session_id)
            document = {
                "session_id": meta.id,
                "title": meta.title,
                "agent": meta.agent,
                # the chat's messages as GET /api/sessions/{id} shows them (tool image stubs included)
                "messages": segments_to_out(segments, created_at=meta.created_at, updated_at=meta.updated_at),
                "session": meta.to_dict(),
                "entries": [entry_to_dict(e) for e in entries],  # the stored transcript, for a faithful copy
            }
            return PlainTextResponse(json.dumps(document, indent=2, default=str), media_type="application/json")
        return _export_response(meta, entries, format)

    @router.get("/runs")
    async def runs() -> list[dict[str, Any]]:
        return [r.info() for r in sup.live_runs]

    @router.get("/runs/history")
    async def run_history(
        session_id: str | None = None,
        source: str | None = None,
        since: Since = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        records = await store.run_history(session_id=session_id, source=source, since=since, limit=limit, offset=offset)
        return {"runs": [r.history_dict() for r in records]}


async def _checkpoint_entries(deps: RouterDeps, meta: ChatMeta) -> list[TranscriptEntry]:
    """The completed turns of the chat's interrupted run (its checkpoint), while no run is live."""
    if not meta.active_run_id or deps.supervisor.get(meta.id) is not None:
        return []
    snapshot = await deps.store.checkpointer.load(meta.active_run_id)
    return drop_dangling_tool_calls(list(snapshot.entries)) if snapshot is not None else []


def _empty_detail(session_id: str) -> dict[str, Any]:
    """``GET /api/sessions/{id}`` of a chat the store does not have: no title, no entries, no runs."""
    return {
        "id": session_id,
        "title": None,
        "agent": None,
        "entries": [],
        "transcript": [],
        "runs": [],
        "live": False,
        "active_run_id": None,
        "origin": None,
        "task_of": None,
        "variants": [],
    }


def _origin(origin: dict[str, Any] | None, meta: ChatMeta) -> dict[str, Any] | None:
    """Where the chat came from, with the ``ref`` of the user message a fork was cut before.

    The detail shows a ``fork`` or ``spawn`` as ``origin``; a background subagent's chat has
    ``parent_id`` and, for the page's line back to its parent, ``task_of`` (the same shape).
    """
    if origin is None:
        return None
    return {**origin, "ref": meta.origin_ref if origin.get("kind") == "fork" else None}


def _ui_data_route(router: APIRouter, deps: RouterDeps) -> None:
    """``GET /api/sessions/{id}/ui-data/{ref}``: what a tool kept with ``put_ui_data`` (the JSON as stored)."""
    store = deps.store

    @router.get("/sessions/{session_id}/ui-data/{ref}")
    async def ui_data(session_id: str, ref: str) -> Response:
        await _require(deps, session_id)
        payload = await store.get_ui_data(session_id, ref)
        if payload is None:
            raise WebError(
                404,
                "ui_data_not_found",
                f"chat {session_id!r} has no UI data {ref!r}",
                hint="it was never stored in this chat, or was deleted with the chat; the card shows its preview",
            )
        return Response(payload, media_type="application/json", headers={"Cache-Control": "no-store"})


def _children_route(router: APIRouter, deps: RouterDeps) -> None:
    store, sup = deps.store, deps.supervisor

    @router.get("/sessions/{session_id}/children")
    async def children(session_id: str) -> dict[str, Any]:
        await _require(deps, session_id)
        out = []
        for child, kind in await store.children(session_id):
            last = await store.run_history(session_id=child.id, limit=1)
            live = sup.get(child.id) is not None
            status = "running" if live else (last[0].status if last else "idle")
            out.append({**child.to_dict(), "kind": kind, "live": live, "status": status})
        return {"children": out}


def _todo_route(router: APIRouter, deps: RouterDeps) -> None:
    from ...plugins.todo import todos_from_entries

    @router.get("/sessions/{session_id}/todos", response_model=TodosResponse)
    async def todos(session_id: str) -> TodosResponse:
        meta = await _require(deps, session_id)
        entries = await deps.store.session.load(session_id)
        live = deps.supervisor.get(session_id)
        if live is not None:  # the run in flight: its completed tool calls count too
            entries = [*entries, *live.entries]
        agent = live.agent if live is not None else deps.agents.get(meta.agent or deps.default_agent)
        items = todos_from_entries(entries, tool_name=_todo_tool_name(agent))
        return TodosResponse(todos=[TodoItemOut(**item.model_dump()) for item in items])


def _todo_tool_name(agent: Any) -> str:
    """The Todo plugin's tool name on ``agent`` (``todo_write`` unless it was renamed)."""
    from ...plugins.todo import Todo

    for plugin in getattr(agent, "plugins", None) or []:
        if isinstance(plugin, Todo):
            return plugin.tool_name
    return "todo_write"


def _write_routes(router: APIRouter, deps: RouterDeps) -> None:
    store, sup = deps.store, deps.supervisor

    @router.patch("/sessions/{session_id}")
    async def rename(session_id: str, body: SessionPatch) -> dict[str, Any]:
        await _require(deps, session_id)
        title = body.title.strip() if body.title is not None else None
        await store.update(session_id, title=title, pinned=body.pinned, touch=False)
        meta = (await _require(deps, session_id)).to_dict()
        deps.emit("session_updated", {"session": meta})
        return meta

    @router.delete("/sessions/{session_id}")
    async def delete(session_id: str) -> dict[str, Any]:
        await _require(deps, session_id)
        # Its background subagent tasks (and theirs) are its own: stopped and deleted with it (a spawned chat stays).
        await _delete_chat(deps, session_id)
        return {"deleted": session_id}

    @router.delete("/sessions")
    async def delete_all() -> dict[str, Any]:
        ids = await store.ids()
        for session_id in ids:
            await sup.stop(session_id, discard=True)
            async with sup.lock(session_id):
                await store.delete(session_id)  # with its schedules
        deps.emit("sessions_cleared", {})
        return {"ok": True}

    _rewind_route(router, deps)


REWIND_WAIT = 5.0
"""Seconds a rewind waits for a stopped run of the chat to wind down before it answers 409."""


def _rewind_route(router: APIRouter, deps: RouterDeps) -> None:
    store, sup = deps.store, deps.supervisor

    @router.post("/sessions/{session_id}/rewind")
    async def rewind(session_id: str, body: RewindRequest) -> dict[str, Any]:
        meta = await _require(deps, session_id)
        if not store.supports_rewind:
            raise WebError(
                501,
                "feature_unavailable",
                "this session store has no rewind: edit and regenerate are unavailable",
                hint="serve the app on a session store with rewind (SQLite and PostgreSQL have it)",
            )
        live = sup.get(session_id)
        if live is not None and live.stop_requested:  # a stopped run still winding down: wait for it, bounded
            await sup.drain(session_id, timeout=REWIND_WAIT)
        async with sup.lock(session_id):
            live = sup.get(session_id)
            if live is not None and live.stop_requested:
                raise WebError(
                    409,
                    "run_stopping",
                    f"the stopped run is still winding down after {REWIND_WAIT:g} s",
                    hint="retry the rewind shortly",
                )
            if live is not None:
                raise WebError(409, "run_active", "a run is live in this chat", hint="stop it first, then rewind")
            segments = await store.session.segments(session_id)
            flat = [e for s in segments for e in s.entries]
            users = _user_positions(flat)
            turn = body.user_turn if body.ref is None else parse_ref(body.ref, segments_runs(segments))
            pending = await _checkpoint_entries(deps, meta)
            in_checkpoint = len(_user_positions(pending))
            if turn is not None and meta.active_run_id and len(users) <= turn < len(users) + in_checkpoint:
                # The turn exists only in the interrupted run's checkpoint: dropping that run rewinds it.
                await store.checkpointer.delete(meta.active_run_id)
                await store.set_active_run(session_id, None)
                return {
                    "removed": 0,
                    "entries": segments_to_out(segments, created_at=meta.created_at, updated_at=meta.updated_at),
                    "keep_entries": len(flat),
                    "kept_answer": False,
                }
            if turn is None or turn >= len(users):
                named = f"user message {body.ref!r}" if body.ref is not None else f"user_turn {body.user_turn}"
                raise WebError(
                    404,
                    "turn_not_found",
                    f"the chat has {len(users) + in_checkpoint} user messages; there is no {named}",
                    hint="reload the chat and pick a message it still has",
                )
            keep = users[turn]
            kept = body.keep_answer and store.supports_variants
            versioned = body.keep_question and store.supports_variants
            end = users[turn + 1] if turn + 1 < len(users) else len(flat)
            answer = flat[keep + 1 : end]
            # An edit keeps the turn's earlier versions (variants that start with the message).
            earlier = [v["entries"] for v in (await store.variants(session_id)).get(turn, []) if _is_version(v)]
            removed = await store.session.rewind(session_id, keep_entries=keep)  # type: ignore[attr-defined]
            # Later turns are gone, so are their variants; an edit replaces this turn's question too.
            await store.drop_variants(session_id, from_turn=turn + 1 if kept else turn)
            if kept and answer:
                await store.add_variant(session_id, turn, [entry_to_dict(e) for e in answer])
            if versioned:
                for entries in earlier:
                    await store.add_variant(session_id, turn, entries)
                await store.add_variant(session_id, turn, [entry_to_dict(e) for e in flat[keep:end]])
            await _drop_rewound_checkpoints(deps, segments, keep)
            if meta.active_run_id:
                await store.checkpointer.delete(meta.active_run_id)
                await store.set_active_run(session_id, None)
            await store.update(session_id)
            after = await store.session.segments(session_id)
        return {
            "removed": removed,
            "entries": segments_to_out(after, created_at=meta.created_at, updated_at=time.time()),
            "keep_entries": keep,
            "kept_answer": bool(kept and answer),
        }


def _is_version(variant: dict[str, Any]) -> bool:
    """A kept variant that is a whole earlier version of its turn (it starts with the user's message)."""
    entries = variant.get("entries") or []
    return bool(entries) and isinstance(entries[0], dict) and entries[0].get("type") == "input"


async def _delete_chat(deps: RouterDeps, session_id: str) -> None:
    """Stop the runs of a chat and of its subagent tasks at any depth, then delete them all in one
    store transaction (with their schedules) and close their workspace sessions."""
    sup = deps.supervisor
    tree = await deps.store.task_tree(session_id)
    for chat_id in reversed(tree):
        await sup.stop(chat_id, discard=True)  # nothing of it is kept: the chat goes
    async with contextlib.AsyncExitStack() as locks:
        for chat_id in tree:
            await locks.enter_async_context(sup.lock(chat_id))
        await deps.store.delete(session_id)  # with its schedules (the store is bound to the app's)
    for chat_id in reversed(tree):
        await sup.workspaces.close(chat_id)
        deps.emit("session_deleted", {"session_id": chat_id})


async def _drop_rewound_checkpoints(deps: RouterDeps, segments: list[Segment], keep: int) -> None:
    """Delete any checkpoint of a run the rewind truncated or removed (a resume would replay it)."""
    start = 0
    for seg in segments:
        end = start + len(seg.entries)
        if end > keep:
            await deps.store.checkpointer.delete(seg.run_id)
        start = end
