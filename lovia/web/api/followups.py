"""``POST /api/sessions/{id}/followups``: questions the user might ask next in a chat.

POST because it may spend model tokens. The suggester sees only the chat's finished transcript
(a run in flight contributes nothing until it ends) and its answer never enters the chat.
"""

from __future__ import annotations

from fastapi import APIRouter

from ...transcript import entries_to_messages
from ..errors import ApiRoute, WebError
from ..followups import FollowupRequest
from ..schemas import FollowupsResponse
from .deps import RouterDeps

__all__ = ["FollowupsResponse", "build_followups_router"]


def build_followups_router(deps: RouterDeps) -> APIRouter:
    """The follow-up suggestions route, bound to ``deps`` (its ``followups`` setting decides)."""
    router = APIRouter(prefix="/api", route_class=ApiRoute)

    @router.post("/sessions/{session_id}/followups")
    async def followups(session_id: str) -> FollowupsResponse:
        meta = await deps.store.get(session_id)
        if meta is None:
            raise WebError(404, "session_not_found", "session not found", hint="list the chats with GET /api/sessions")
        if deps.followups is False:
            return FollowupsResponse()
        entries = await deps.session.load(session_id)
        agent = meta.agent if meta.agent is not None and meta.agent in deps.agents else deps.default_agent
        request = FollowupRequest(session_id=session_id, agent=agent, messages=list(entries_to_messages(entries)))
        return FollowupsResponse(followups=await deps.suggest_followups(request))

    return router
