"""Chat routes: start/attach (SSE), reconnect (SSE, resumes interrupted runs), stop, approve, blocking chat."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from ..exceptions import UserError
from .errors import ApiRoute, WebError
from .routes_uploads import attachment_content
from .sse import Frame, event_stream, live_tail
from .supervisor import Subscription

if TYPE_CHECKING:
    from .state import WebState

__all__ = ["ApproveRequest", "ChatRequest", "InjectRequest", "UninjectRequest", "chat_router", "sse_response"]


class ChatRequest(BaseModel):
    """Body of ``POST /api/chat/stream`` and ``POST /api/chat``."""

    message: str = Field(default="", max_length=200_000)
    session_id: str | None = Field(default=None, max_length=200)
    agent: str | None = None
    attachments: list[str] = Field(default_factory=list, max_length=20)
    """Upload ids (``POST /api/sessions/{id}/uploads``) sent with this message as content parts."""


class ApproveRequest(BaseModel):
    """Body of ``POST /api/chat/approve``."""

    session_id: str
    call_id: str
    decision: str = Field(pattern="^(approve|deny)$")


class InjectRequest(BaseModel):
    """Body of ``POST /api/chat/inject``: a steering message for the live run's next turn."""

    session_id: str
    message: str = Field(min_length=1, max_length=200_000)


class UninjectRequest(BaseModel):
    """Body of ``POST /api/chat/uninject``: take back a queued message the run has not seen yet."""

    session_id: str
    id: int = Field(ge=0)


_LIST_HINT = "list the chats with GET /api/sessions"


def title_from(message: str) -> str:
    """A chat title from its first message (whitespace collapsed, at most 60 characters)."""
    text = re.sub(r"\s+", " ", message).strip()
    return text if len(text) <= 60 else text[:59].rstrip() + "…"


async def _frames(head: list[Frame], sub: Subscription) -> AsyncIterator[bytes]:
    try:
        for frame in (*head, *sub.prologue):
            yield frame.encode()
        if sub.queue is not None:
            async for chunk in live_tail(sub.queue):
                yield chunk
    finally:
        sub.close()  # a disconnect only unsubscribes: the run goes on


def sse_response(head: list[Frame], sub: Subscription) -> StreamingResponse:
    """Stream ``head`` frames, the subscription's prologue and its live tail."""
    return event_stream(_frames(head, sub))


def chat_router(state: WebState) -> APIRouter:
    """The ``/api/chat`` routes bound to one app state."""
    router = APIRouter(prefix="/api/chat", route_class=ApiRoute)
    _stream_routes(router, state)
    _control_routes(router, state)
    return router


def _steer(live: Any, body: ChatRequest, message: str) -> None:
    if body.attachments:
        raise WebError(
            409,
            "run_active",
            "a run is live in this chat, and attachments cannot join it",
            hint="send the attachments after the run finishes (or stop it)",
        )
    if message:
        live.mailbox.push(message)  # steer the live run: its next turn sees the message


def _opener(state: WebState) -> Callable[[ChatRequest], Awaitable[Subscription]]:
    """``open_chat(body)``: start a run, or attach to the live one (injecting the message)."""
    store, sup = state.store, state.supervisor

    async def open_chat(body: ChatRequest) -> Subscription:
        message = body.message.strip()
        if sup.closing:
            raise WebError(503, "shutting_down", "the server is shutting down", hint="retry once it is back")
        if body.agent is not None and body.agent not in sup.agents:
            raise WebError(
                404, "agent_not_found", f"no agent {body.agent!r}", hint=f"use one of {', '.join(sorted(sup.agents))}"
            )
        meta = await store.get(body.session_id) if body.session_id else None
        if meta is None:
            if not message:
                raise WebError(400, "invalid_request", "message is empty", hint="send a non-empty message")
            meta = await store.create(title=title_from(message), agent=body.agent, session_id=body.session_id)
            sup.hub.publish("session_created", {"session": meta.to_dict()})
        sid = meta.id
        async with sup.lock(sid):
            live = sup.live(sid)
            if live is not None:
                _steer(live, body, message)
            elif message or body.attachments:
                content = await attachment_content(state, sid, message, body.attachments, agent=body.agent)
                if meta.active_run_id:  # an interrupted run nobody resumed: keep its completed turns
                    await sup.finalize_partial(sid, meta.active_run_id)
                try:
                    sup.start(sid, content, agent=body.agent or meta.agent)
                except UserError as exc:
                    raise WebError.from_exc(400, "invalid_request", exc) from exc
                if not meta.title:
                    await store.update(sid, title=title_from(message))
                    updated = await store.get(sid)
                    if updated is not None:
                        sup.hub.publish("session_updated", {"session": updated.to_dict()})
            return await sup.subscribe(sid)

    return open_chat


def _stream_routes(router: APIRouter, state: WebState) -> None:
    store, sup = state.store, state.supervisor
    open_chat = _opener(state)

    @router.post("/stream")
    async def stream(body: ChatRequest) -> StreamingResponse:
        sub = await open_chat(body)
        sid = sub.live.session_id if sub.live is not None else body.session_id
        meta = await store.get(sid or "")
        head = [Frame("session", {"session_id": sid, "title": meta.title if meta else ""})]
        return sse_response(head, sub)

    @router.post("/reconnect")
    async def reconnect(session_id: str) -> StreamingResponse:
        meta = await store.get(session_id)
        if meta is None:
            raise WebError(404, "session_not_found", f"no chat {session_id!r}", hint=_LIST_HINT)
        async with sup.lock(session_id):
            if sup.live(session_id) is None and meta.active_run_id and not sup.closing:
                await sup.resume(session_id, meta.active_run_id, agent=meta.agent)
            sub = await sup.subscribe(session_id)
        return sse_response([Frame("session", {"session_id": session_id, "title": meta.title})], sub)


def _control_routes(router: APIRouter, state: WebState) -> None:  # noqa: C901  (nested route handlers; to be split)
    sup = state.supervisor
    open_chat = _opener(state)

    @router.post("/cancel")
    async def cancel(session_id: str) -> dict[str, Any]:
        stopped = await sup.stop(session_id)
        return {"stopped": stopped}

    @router.post("/inject")
    async def inject(body: InjectRequest) -> dict[str, Any]:
        live = sup.live(body.session_id)
        if live is None:
            raise WebError(
                404,
                "run_not_found",
                "no live run in this chat",
                hint="send the message with POST /api/chat/stream instead",
            )
        return {"id": live.mailbox.push(body.message)}

    @router.post("/uninject")
    async def uninject(body: UninjectRequest) -> dict[str, Any]:
        live = sup.live(body.session_id)
        if live is None:
            raise WebError(404, "run_not_found", "no live run in this chat", hint="the run has finished")
        return {"removed": live.mailbox.remove(body.id)}

    @router.post("/approve")
    async def approve(body: ApproveRequest) -> dict[str, Any]:
        live = sup.live(body.session_id)
        if live is None or live.handle is None:
            raise WebError(404, "run_not_found", "no live run in this chat", hint="the run has finished")
        ok = live.handle.approvals.resolve(body.call_id, body.decision == "approve")
        if not ok:
            raise WebError(
                404,
                "approval_not_found",
                f"call {body.call_id!r} is not waiting for a decision",
                hint="it was decided already, or its run ended; reload the chat",
            )
        return {"ok": True}

    @router.post("")
    async def chat(body: ChatRequest) -> dict[str, Any]:
        if body.session_id and sup.live(body.session_id) is not None:
            raise WebError(
                409,
                "run_active",
                "a run is already live in this chat",
                hint="wait for it to finish, stop it, or use POST /api/chat/stream to join it",
            )
        sub = await open_chat(body)
        result: dict[str, Any] = {"session_id": sub.live.session_id if sub.live else body.session_id}
        try:
            while sub.queue is not None and (frame := await sub.queue.get()) is not None:
                if frame.event == "done":
                    result.update(output=frame.data.get("output"), usage=frame.data.get("usage"))
                elif frame.event == "error" and frame.data.get("scope") != "tool":
                    raise WebError(
                        500,
                        "run_failed",
                        str(frame.data.get("message") or "the run failed"),
                        hint=frame.data.get("hint") or "GET /api/sessions/{id} shows the run's error",
                    )
        finally:
            sub.close()
        return result
