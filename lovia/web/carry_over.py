"""Messages that joined a run too late for it: they start the chat's next run.

A message sent to a chat with a live run (``POST /api/chat/stream`` joining it,
``POST /api/chat/inject``, a schedule's fire, a subagent's report) goes into that run's mailbox,
which the run reads when its next turn starts. A run already in its last turn never reads it:
the model answers and the run ends with the message still queued. Such messages are not dropped:
once the run has ended, they go to the chat's next run, which starts on them (or, when another
message started one meanwhile, they join that one).

Only a run that completed or failed hands its queue on. A stop (the user's, or a chat being
deleted) and a server shutdown drop what is still queued, as they drop the rest of the run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from ..exceptions import LoviaError
from ..messages import user

if TYPE_CHECKING:
    from ..agent import Agent
    from ..messages import Message
    from ..steering import InjectedContent, Mailbox
    from ..types import JsonObject
    from .store import ChatIndex


class RunController(Protocol):
    """What a hand-over reads of the run that ended (the supervisor's controller)."""

    @property
    def session_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def discard(self) -> bool: ...
    @property
    def mailbox(self) -> Mailbox: ...
    @property
    def source(self) -> str: ...
    @property
    def client_context(self) -> JsonObject: ...
    @property
    def run_deps(self) -> Any: ...


class RunSupervisor(Protocol):
    """What a hand-over asks of the supervisor (declared here, so this module needs none of it)."""

    @property
    def closing(self) -> bool: ...
    @property
    def store(self) -> ChatIndex: ...
    def lock(self, session_id: str) -> asyncio.Lock: ...
    def get(self, session_id: str) -> RunController | None: ...
    def resume_agent(self, name: str | None) -> Agent[Any]: ...
    async def finalize_partial(self, session_id: str, run_id: str) -> Any: ...
    async def start(
        self,
        *,
        session_id: str,
        agent: Agent[Any],
        input: list[Message],
        is_new: bool,
        title_message: str | None,
        source: str = ...,
        client: JsonObject | None = ...,
        run_deps: Any = ...,
        chat_created_at: float | None = ...,
    ) -> Any: ...


__all__ = ["carry_over"]

logger = logging.getLogger("lovia.web")

_PENDING: set[asyncio.Task[None]] = set()  # strong references until each hand-over is done


def carry_over(sup: RunSupervisor, ended: RunController) -> None:
    """Hand what ``ended`` left unread in its mailbox to the chat's next run.

    Call it once the run is no longer the chat's live run (nothing can join it any more).
    """
    if not ended.mailbox or ended.status not in ("completed", "failed") or ended.discard:
        return
    messages = ended.mailbox.drain()
    if sup.closing:
        logger.warning(
            "chat %s: %d queued message(s) dropped: the server is shutting down", ended.session_id, len(messages)
        )
        return
    task = asyncio.ensure_future(_next_run(sup, ended, messages))
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


async def _next_run(sup: RunSupervisor, ended: RunController, messages: list[InjectedContent]) -> None:
    sid = ended.session_id
    async with sup.lock(sid):
        live = sup.get(sid)
        if live is not None:  # another message started the next run meanwhile: join it
            for content in messages:
                live.mailbox.push(content)
            return
        meta = await sup.store.get(sid)
        if meta is None or sup.closing:
            logger.info("chat %s: %d queued message(s) dropped: the chat is gone", sid, len(messages))
            return
        if meta.active_run_id:  # an interrupted run nobody resumed: keep its completed turns
            await sup.finalize_partial(sid, meta.active_run_id)
        try:
            await sup.start(
                session_id=sid,
                agent=sup.resume_agent(meta.agent),
                input=[user(content) for content in messages],
                is_new=False,
                title_message=None,
                source=ended.source,
                client=ended.client_context,
                run_deps=ended.run_deps,  # the messages joined that run: they run with its deps
                chat_created_at=meta.created_at,
            )
        except LoviaError as exc:  # at the run cap, or shutting down
            logger.warning("chat %s: %d queued message(s) dropped: %s", sid, len(messages), exc)
