"""Chat routes: start/attach (SSE), reconnect (SSE, resumes interrupted runs), stop, steer,
approve, the blocking turn, and the agent's ``ask_human`` question and its answer."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from ...agent import Agent
from ...exceptions import UserError
from ...messages import user
from ...parts import ImagePart, TextPart
from ...providers.base import supports_vision
from ..errors import ApiRoute, WebError
from ..media import model_image_mime
from ..questions import QuestionRegistry, question_payload
from ..routes_uploads import attachment_content
from ..run_deps import RunTrigger, build_run_deps, checked_context
from ..schemas import (
    AnswerRequest,
    ApprovalRequest,
    Attachment,
    ChatRequest,
    ChatResponse,
    InjectCancelRequest,
    InjectRequest,
)
from ..sse import event_stream
from ..store import ChatMeta
from ..supervisor import ChatFrames, RunController, TooManyRuns, _Attachment
from ..titles import provisional_title
from .deps import RouterDeps
from .workspace import attachment_file

__all__ = ["blocking_outcome", "build_chat_router", "too_many_runs"]


_LIST_HINT = "list the chats with GET /api/sessions"


def _stream(sid: str, attachment: _Attachment) -> StreamingResponse:
    """The chat stream of ``attachment``: a ``session`` frame, the prologue, then the live tail."""
    return event_stream(ChatFrames(attachment, sid=sid, emit_session=True))


def build_chat_router(deps: RouterDeps) -> APIRouter:
    """The ``/api/chat`` routes bound to ``deps``: ``stream``, ``reconnect``, ``cancel``, ``inject``,
    ``uninject``, ``approve``, the blocking ``POST /api/chat``, ``question`` and ``answer``."""
    router = APIRouter(prefix="/api/chat", route_class=ApiRoute)
    _stream_routes(router, deps)
    _control_routes(router, deps)
    _question_routes(router, deps)
    return router


def too_many_runs(exc: TooManyRuns) -> WebError:
    """The 429 answer to a run start at the concurrent-run cap."""
    return WebError(429, "too_many_runs", exc.message, hint=exc.hint, headers={"Retry-After": "5"})


def _upload_ids(body: ChatRequest) -> list[str]:
    """The chat uploads ``body`` attaches by id (``POST /api/sessions/{id}/uploads``)."""
    return [item for item in body.attachments or () if isinstance(item, str)]


def _workspace_files(body: ChatRequest) -> list[Attachment]:
    """The workspace files ``body`` attaches by path (``POST /api/workspace/upload`` answered them)."""
    return [item for item in body.attachments or () if isinstance(item, Attachment)]


async def _file_parts(deps: RouterDeps, agent_name: str | None, agent: Agent[Any], body: ChatRequest) -> list[Any]:
    """The content parts of the files ``body`` attaches by workspace path.

    The message records each file's workspace-relative path, so the agent can open it with its
    workspace tools even when the model cannot read it; an image also goes in as an image part
    when the model reads images.
    """
    parts: list[Any] = []
    wanted = _workspace_files(body)
    unreadable: list[WebError] = []
    for item in wanted:
        try:
            wants_image = item.kind == "image" and supports_vision(agent.model)
            rel, data = await attachment_file(deps, agent_name, item.path, read=wants_image)
        except WebError as exc:
            if exc.status_code not in (400, 403, 404) or exc.code == "feature_unavailable":
                raise
            unreadable.append(exc)  # a file gone or refused since its upload is left out
            continue
        label = item.name or rel.rsplit("/", 1)[-1]
        parts.append(TextPart(f"[Attached {item.kind} {label!r} ({item.mime}): {rel}]"))
        if data is not None:
            mime = model_image_mime(rel) or item.mime
            parts.append(ImagePart(data=base64.b64encode(data).decode("ascii"), mime_type=mime))
    if wanted and len(unreadable) == len(wanted) and not _upload_ids(body):
        raise WebError(
            422,
            "invalid_request",
            f"none of the {len(wanted)} attached files can be read ({unreadable[0].message})",
            hint="upload the files again with POST /api/workspace/upload, then send the message",
        )
    return parts


def _steer(live: RunController, body: ChatRequest, message: str) -> None:
    if body.attachments:
        raise WebError(
            409,
            "run_active",
            "a run is live in this chat, and attachments cannot join it",
            hint="send the attachments after the run finishes (or stop it)",
        )
    if message:
        live.inject(message)  # steer the live run: its next turn sees the message


Opened = tuple[str, "RunController | None", "_Attachment | None"]


def _opener(deps: RouterDeps) -> Callable[..., Awaitable[Opened]]:
    """``open_chat(body, request)``: start a run, or join the live one (injecting the message).

    Returns the chat id, the run started or joined (``None``: nothing to run) and, with
    ``subscribe=True``, an attachment taken under the chat's lock (so no frame is missed).
    ``run_deps`` runs before anything is written, so when it refuses, no chat is created.
    """
    store, sup = deps.store, deps.supervisor

    async def open_chat(
        body: ChatRequest, request: Request | None, *, blocking: bool = False, subscribe: bool = False
    ) -> Opened:
        checked_context(body.context)
        _upload_ids(body)  # an attachment this server cannot read is refused before anything runs
        if sup.closing:
            raise WebError(503, "shutting_down", "the server is shutting down", hint="retry once it is back")
        if body.agent is not None and body.agent not in deps.agents:
            raise WebError(
                404, "agent_not_found", f"no agent {body.agent!r}", hint=f"use one of {', '.join(sorted(deps.agents))}"
            )
        meta = await store.get(body.session_id) if body.session_id else None
        if meta is None and not body.message.strip():
            raise WebError(422, "invalid_request", "message is empty", hint="send a non-empty message")
        sid = meta.id if meta is not None else (body.session_id or f"chat_{uuid.uuid4().hex[:16]}")
        async with sup.lock(sid):
            live = sup.get(sid)
            if live is not None:
                if blocking:
                    raise WebError(
                        409,
                        "run_active",
                        "a run is already live in this chat",
                        hint="wait for it to finish, stop it, or use POST /api/chat/stream to join it",
                    )
                _steer(live, body, body.message.strip())  # the live run keeps its own client context
            elif body.message.strip() or body.attachments:
                live = await _start(deps, sid, meta, body, request, blocking=blocking)
            return sid, live, (await sup.subscribe(sid) if subscribe else None)

    return open_chat


async def _start(
    deps: RouterDeps, sid: str, meta: ChatMeta | None, body: ChatRequest, request: Request | None, *, blocking: bool
) -> RunController:
    """Start the chat's run on ``body`` (the caller holds the chat's lock and saw no live run)."""
    store, sup = deps.store, deps.supervisor
    message = body.message.strip()
    context = checked_context(body.context)
    # An existing chat keeps the agent it was created with, whatever the request names.
    agent_name = (meta.agent if meta is not None else None) or body.agent
    try:
        sup.check_capacity(queue=not blocking)  # a streamed chat may wait in line for a slot
        agent = sup.agent_for(agent_name)
    except TooManyRuns as exc:
        raise too_many_runs(exc) from exc
    except UserError as exc:
        raise WebError.from_exc(400, "invalid_request", exc) from exc
    files = await _file_parts(deps, agent_name, agent, body)  # a missing or denied file refuses the message
    trigger = RunTrigger(session_id=sid, agent=agent, source="user", request=request, client_context=context)
    with sup.in_hook(sid):
        run_deps = await build_run_deps(deps.run_deps, trigger)  # before anything is written: it may refuse
    if sup.stopped_in_hook(sid):
        raise WebError(
            409,
            "run_cancelled",
            "the run was stopped before it started",
            hint="send the message again to start it",
        )
    is_new = meta is None
    if meta is None:
        meta = await store.create(title=provisional_title(message), agent=body.agent, session_id=sid)
        deps.announce_session(meta)
    content = await attachment_content(deps, sid, message, _upload_ids(body), agent=agent_name)
    if files:
        if isinstance(content, str):
            content = [TextPart(content)] if content else []
        content = [*content, *files]
    if meta.active_run_id:  # an interrupted run nobody resumed: keep its completed turns
        await sup.finalize_partial(sid, meta.active_run_id)
    try:
        started = await sup.start(
            session_id=sid,
            agent=agent,
            input=content if isinstance(content, str) else [user(content)],
            is_new=is_new,
            title_message=message if is_new else None,
            client=context,
            run_deps=run_deps,
            await_approvals=not blocking,
            chat_created_at=meta.created_at,
            queue=not blocking,
        )
    except TooManyRuns as exc:
        raise too_many_runs(exc) from exc
    except UserError as exc:
        raise WebError.from_exc(400, "invalid_request", exc) from exc
    if not meta.title:
        await store.update(sid, title=provisional_title(message))
        updated = await store.get(sid)
        if updated is not None:
            deps.emit("session_updated", {"session": updated.to_dict()})
    return started


def _stream_routes(router: APIRouter, deps: RouterDeps) -> None:
    store, sup = deps.store, deps.supervisor
    open_chat = _opener(deps)

    @router.post("/stream")
    async def stream(body: ChatRequest, request: Request) -> StreamingResponse:
        sid, _live, attachment = await open_chat(body, request, subscribe=True)
        assert attachment is not None
        return _stream(sid, attachment)

    @router.post("/reconnect")
    async def reconnect(session_id: str, request: Request) -> StreamingResponse:
        meta = await store.get(session_id)
        if meta is None:
            raise WebError(404, "session_not_found", f"no chat {session_id!r}", hint=_LIST_HINT)
        async with sup.lock(session_id):
            if sup.get(session_id) is None and not meta.active_run_id:
                raise WebError(
                    404,
                    "run_not_found",
                    "no live or resumable run in this chat",
                    hint="GET /api/sessions/{id} has the chat as stored; POST /api/chat/stream starts a run",
                )
            if sup.get(session_id) is None and meta.active_run_id and not sup.closing:
                try:
                    sup.check_capacity()
                except TooManyRuns as exc:
                    raise too_many_runs(exc) from exc
                agent = sup.resume_agent(meta.agent)
                context = await store.get_active_context(session_id) or {}  # what the run started with
                trigger = RunTrigger(
                    session_id=session_id,
                    agent=agent,
                    source="user",
                    request=request,
                    client_context=context,
                    resumed=True,
                )
                with sup.in_hook(session_id):
                    run_deps = await build_run_deps(deps.run_deps, trigger)
                fresh = await store.get(session_id)
                stopped = sup.stopped_in_hook(session_id)
                if stopped and fresh is not None and fresh.active_run_id == meta.active_run_id:
                    await sup.finalize_partial(session_id, meta.active_run_id)  # stopped: its turns are kept
                elif not stopped and fresh is not None and fresh.active_run_id == meta.active_run_id:
                    await sup.resume(
                        session_id, meta.active_run_id, agent=meta.agent, deps=run_deps, client_context=context
                    )  # (a run that finished or was stopped while the hook ran is not resumed)
            attachment = await sup.subscribe(session_id)
        return _stream(session_id, attachment)


def _control_routes(router: APIRouter, deps: RouterDeps) -> None:  # noqa: C901  (nested route handlers; to be split)
    sup = deps.supervisor
    open_chat = _opener(deps)

    @router.post("/cancel")
    async def cancel(session_id: str) -> dict[str, Any]:
        if await sup.stop(session_id) or sup.stop_in_hook(session_id):  # a run still in its hook never starts
            return {"stopped": True}
        meta = await deps.store.get(session_id)
        if meta is None:
            raise WebError(404, "session_not_found", f"no chat {session_id!r}", hint=_LIST_HINT)
        async with sup.lock(session_id):
            meta = await deps.store.get(session_id)
            if sup.get(session_id) is None and meta is not None and meta.active_run_id:
                # An interrupted run nobody resumed: stopping it keeps its completed turns.
                await sup.finalize_partial(session_id, meta.active_run_id)
                return {"stopped": True}
        raise WebError(
            404, "run_not_found", "no live or resumable run in this chat", hint="the run has finished already"
        )

    @router.post("/inject")
    async def inject(body: InjectRequest) -> dict[str, Any]:
        if not body.message.strip():
            raise WebError(422, "invalid_request", "message is empty", hint="send a non-empty message")
        live = sup.get(body.session_id)
        if live is None:
            return {"accepted": False}  # no live run to steer: send it with POST /api/chat/stream
        return {"accepted": True, "id": live.inject(body.message)}

    @router.post("/uninject")
    async def uninject(body: InjectCancelRequest) -> dict[str, Any]:
        live = sup.get(body.session_id)
        return {"removed": live is not None and live.uninject(body.id)}

    @router.post("/approve")
    async def approve(body: ApprovalRequest) -> dict[str, Any]:
        live = sup.get(body.session_id)
        if live is None or live.handle is None:
            raise WebError(404, "run_not_found", "no live run in this chat", hint="the run has finished")
        ok = await deps.approvals.resolve(body.session_id, body.call_id, body.decision == "approve")
        if not ok:
            raise WebError(
                404,
                "approval_not_found",
                f"call {body.call_id!r} is not waiting for a decision",
                hint="it was decided already, or its run ended; reload the chat",
            )
        return {"ok": True}

    @router.post("")
    async def chat(body: ChatRequest, request: Request) -> ChatResponse:
        sid, live, _ = await open_chat(body, request, blocking=True)
        if live is None:
            raise WebError(422, "invalid_request", "message is empty", hint="send a non-empty message")
        # The run is the supervisor's task: a client that leaves only stops this wait.
        await asyncio.shield(live.finished.wait())
        return blocking_outcome(sid, live)


def blocking_outcome(session_id: str, live: RunController) -> ChatResponse:
    """The answer of ``POST /api/chat`` once its run ended: the output, or 409 / 500."""
    if live.status == "completed":
        return ChatResponse(output=live.output, session_id=session_id, usage=live.usage or {})
    if live.status in ("cancelled", "interrupted"):
        why = "the server shut down" if live.status == "interrupted" else "it was stopped"
        raise WebError(
            409,
            "run_cancelled",
            f"the run ended before it answered: {why}",
            hint="GET /api/sessions/{id} shows the turns it completed; send the message again to retry",
        )
    error = live.error
    raise WebError(
        500,
        "run_failed",
        (error["message"] if error is not None else "") or "the run failed",
        hint=(error.get("hint") if error is not None else None) or "GET /api/sessions/{id} shows the run's error",
    )


def _registry(deps: RouterDeps) -> QuestionRegistry:
    registry = deps.questions
    if registry is None:
        raise WebError(
            501,
            "feature_unavailable",
            "this server has no question channel",
            hint="pass question_channel= to create_app (shared with the agent's ask_human tool)",
        )
    return registry


def _question_routes(router: APIRouter, deps: RouterDeps) -> None:
    @router.get("/question")
    async def question(session_id: str) -> dict[str, Any]:
        pending = _registry(deps).pending(session_id)
        return {"question": question_payload(pending) if pending is not None else None}

    @router.post("/answer")
    async def answer(body: AnswerRequest) -> dict[str, Any]:
        if not _registry(deps).resolve(body.session_id, body.answer):
            raise WebError(
                404,
                "question_not_found",
                "no pending question in this chat",
                hint="it was answered, timed out or its run ended; reload the chat",
            )
        return {"ok": True}
