"""Background subagents under web supervision: each child is a chat of its own.

:func:`wire_subagents` points every :class:`~lovia.plugins.subagents.Subagents` plugin of the served
agents that uses the default execution mode at the server: a child then runs as a supervised run
in a new chat (``origin.kind == "subagent"``, linked to the parent chat), so the page lists it under
its parent, shows its live status and streams it like any chat. When it ends, its report joins the
parent's live run, or starts a run of the parent chat when none is live.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any, Protocol

from ..exceptions import UserError
from ..plugins.subagents import ChildSpec, DeliverFn, RunChildFn, SubagentReport, Subagents, render_report
from ..result import RunResult
from ..types import JsonObject
from .run_deps import RunDepsFn, RunTrigger, build_run_deps
from .store import ChatIndex, ChatMeta
from .supervisor import RunSupervisor
from .titles import provisional_title

__all__ = ["subagent_deliver", "subagent_runner", "wire_subagents"]

logger = logging.getLogger(__name__)

SUBAGENT = "subagent"
"""The ``origin.kind`` of a child's chat."""


class SubagentDeps(Protocol):
    """What the wiring uses of :class:`~lovia.web.api.RouterDeps`."""

    store: ChatIndex
    run_deps: RunDepsFn | None

    @property
    def supervisor(self) -> RunSupervisor: ...

    def announce_session(self, meta: ChatMeta) -> None: ...


def _table(deps: SubagentDeps, slot: str) -> dict[str, Any]:
    """A per-app table kept in a private slot of the caller's deps (made on first use)."""
    table: dict[str, Any] | None = getattr(deps, slot, None)
    if table is None:
        table = {}
        setattr(deps, slot, table)
    return table


def _parents(deps: SubagentDeps) -> dict[str, str]:
    """Child id -> parent chat id, shared by the runner and the delivery of one app."""
    return _table(deps, "_subagent_parents")


def _contexts(deps: SubagentDeps) -> dict[str, JsonObject]:
    """Child id -> the client context of the parent chat when the child started (for its report's run)."""
    return _table(deps, "_subagent_contexts")


async def _chat_context(deps: SubagentDeps, session_id: str) -> JsonObject:
    """The latest client context of a chat: its live run's, else the one stored beside its run in flight."""
    live = deps.supervisor.get(session_id)
    if live is not None:
        return dict(live.client_context)
    return dict(await deps.store.get_active_context(session_id) or {})


def subagent_runner(deps: SubagentDeps) -> RunChildFn:
    """Run one child as a supervised run in a new chat linked to its parent; returns its result.

    The run's source is ``subagent:<parent chat>``; ``run_deps`` gets the parent chat's latest
    client context, with no request.
    """
    store, sup, parents, contexts = deps.store, deps.supervisor, _parents(deps), _contexts(deps)

    async def run(spec: ChildSpec) -> RunResult[Any]:
        parent = await store.get(spec.parent_session_id) if spec.parent_session_id else None
        context = await _chat_context(deps, parent.id) if parent is not None else {}
        source = f"subagent:{parent.id}" if parent is not None else "subagent"
        session_id = f"chat_{uuid.uuid4().hex[:16]}"
        trigger = RunTrigger(session_id=session_id, agent=spec.agent, source=source, client_context=context)
        run_deps = await build_run_deps(deps.run_deps, trigger)  # before the chat exists: it may refuse
        meta = await store.create(
            title=provisional_title(spec.prompt), agent=parent.agent if parent else None, session_id=session_id
        )
        if parent is not None:
            parents[spec.id] = parent.id
            contexts[spec.id] = context
            await store.set_origin(
                meta.id, kind=SUBAGENT, origin_session_id=parent.id, user_turn=None, title=parent.title or ""
            )
        try:
            async with sup.lock(meta.id):
                live = await sup.start(
                    session_id=meta.id,
                    agent=spec.agent,
                    input=spec.prompt,
                    is_new=False,  # titled from its task, not by a model
                    title_message=None,
                    source=source,
                    mailbox=spec.mailbox,
                    client=context,
                    run_deps=run_deps,
                )
        except Exception:  # at the run cap, say: no chat is left behind, the parent gets the error
            await store.delete(meta.id)
            raise
        deps.announce_session(meta)
        while not live.finished.is_set():
            if spec.token.is_cancelled:  # the parent's cancel_subagent
                await sup.stop(meta.id)
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(live.finished.wait(), 0.25)
        await live.finished.wait()
        if spec.token.is_cancelled:
            parents.pop(spec.id, None)  # a cancelled child sends no report
            contexts.pop(spec.id, None)
        if live.result is None:
            raise UserError(f"the subagent's run ended {live.status}", hint=f"open its chat {meta.id} to see why")
        return live.result  # type: ignore[no-any-return]

    return run


def subagent_deliver(deps: SubagentDeps) -> DeliverFn:
    """Hand a child's report to its parent chat: into the live run, else as the start of a new one.

    A run started for a report has the source ``subagent-report:<task id>``; its ``run_deps`` get
    the parent chat's latest client context, with no request.
    """
    store, sup, parents, contexts = deps.store, deps.supervisor, _parents(deps), _contexts(deps)
    watching: set[asyncio.Task[None]] = set()

    async def hand_over(parent_id: str, text: str, task_id: str, context: JsonObject) -> None:
        while not sup.closing:
            parent = await store.get(parent_id)
            if parent is None:
                logger.info("a subagent reported after its parent chat %s went away", parent_id)
                return
            async with sup.lock(parent.id):
                live = sup.get(parent.id)
                if live is None:
                    agent = sup.agent_for(parent.agent)
                    source = f"subagent-report:{task_id}"
                    latest = await store.get_active_context(parent.id) or context
                    trigger = RunTrigger(session_id=parent.id, agent=agent, source=source, client_context=latest)
                    run_deps = await build_run_deps(deps.run_deps, trigger)
                    if parent.active_run_id:
                        await sup.finalize_partial(parent.id, parent.active_run_id)
                    await sup.start(
                        session_id=parent.id,
                        agent=agent,
                        input=text,
                        is_new=False,
                        title_message=None,
                        autostart=True,
                        source=source,
                        client=latest,
                        run_deps=run_deps,
                    )
                    await store.update(parent.id)
                    return
                token = live.inject(text)
            # The run reads its mailbox at its next turn; one that ends first leaves the report
            # there, and it starts a run of its own instead.
            await live.finished.wait()
            if not live.uninject(token):
                return

    async def guarded(parent_id: str, text: str, task_id: str, context: JsonObject) -> None:
        try:
            await hand_over(parent_id, text, task_id, context)
        except Exception:  # a store failure, or run_deps refusing: logged, since nobody awaits this task
            logger.exception("could not hand a subagent report to chat %s", parent_id)

    async def deliver(report: SubagentReport) -> None:
        parent_id = parents.pop(report.id, None)
        context = contexts.pop(report.id, {})
        if parent_id is None and report.session_id:  # a report this app did not start: its chat says where
            chat = await store.get(report.session_id)
            parent_id = (chat.parent_id or chat.id) if chat is not None else None
        if parent_id is None:
            return
        # Not awaited: the parent may be the one waiting for this report (wait_subagents).
        task = asyncio.get_running_loop().create_task(guarded(parent_id, render_report(report), report.id, context))
        watching.add(task)
        task.add_done_callback(watching.discard)

    return deliver


def wire_subagents(deps: SubagentDeps) -> int:
    """Run the children of every default-mode ``Subagents`` plugin as web chats; returns how many were wired.

    A plugin given its own ``run_child`` or ``deliver`` is left alone, and so is every plugin when
    the store cannot link a chat to its parent (``supports_origins`` is false; SQLite and
    PostgreSQL both can): the children then run inside the parent's run, as without a server.
    Call it once per app (``create_app`` does unless ``wire_subagents=False``).
    """
    if not deps.store.supports_origins:
        return 0
    setattr(deps, "_subagents_wired", True)  # noqa: B010 - read by rewire_subagents after an agent swap
    wired = 0
    for agent in deps.supervisor.agents.values():
        for plugin in agent.plugins:
            if isinstance(plugin, Subagents) and plugin.run_child is None and plugin.deliver is None:
                plugin.run_child = subagent_runner(deps)
                plugin.deliver = subagent_deliver(deps)
                wired += 1
    return wired


def rewire_subagents(deps: SubagentDeps) -> int:
    """After the served agents changed (a model switch), wire the new ones if this app wires at all."""
    return wire_subagents(deps) if getattr(deps, "_subagents_wired", False) else 0
