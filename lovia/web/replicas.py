"""``ReplicaSupervisor``: several ``lovia web`` processes on one PostgreSQL database behave as one app.

* The replica that starts a run owns it: the run holds a checkpointer lease (``--lease-ttl``),
  renewed while it runs. Every frame it streams is stored in ``web_frames`` and announced with
  ``NOTIFY`` (payload ``f:<chat id>``) on the namespace's channel.
* A client on another replica attaches by reading those frames: a snapshot of the completed
  turns, the frames of the turn in flight, then the live tail, woken by the notifications (and a
  one-second poll, so a lost notification only delays a frame).
* Stop, steer and approve sent to a non-owner become rows of ``web_commands`` plus a ``NOTIFY``
  (``c:<chat id>``); the owner executes them.
* Every replica sweeps: a chat whose run's lease expired (its owner was killed) or was released
  on a shutdown (its owner recorded the run ``interrupted``) is claimed by exactly one replica (a conditional update of
  ``web_runs.claimed_until``), which resumes it from its checkpoint, so finished tool calls are
  not run again, and keeps appending frames: attached clients keep streaming. Its first frame is
  an ``output_discarded``: the text the dead owner had streamed of the turn in flight is void,
  as that turn streams again from its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..checkpointer import CheckpointOptions
from ..exceptions import RunBusy, UserError
from ..steering import Mailbox
from ..transcript import (
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    drop_dangling_tool_calls,
)
from .serialization import segments_runs, snapshot_views
from .sse import frame, frame_data
from .supervisor import RunController, RunSupervisor, _Attachment, _Subscription

if TYPE_CHECKING:
    from .store import PostgresChatStore
    from .supervisor import SupervisorDeps

__all__ = ["RemoteMailbox", "ReplicaSupervisor"]

logger = logging.getLogger("lovia.web")
_NOW = "extract(epoch from clock_timestamp())::double precision"
_POLL = 1.0


def _terminal(sse: dict[str, str]) -> bool:
    """Whether a frame ends the run's stream (a shutdown error is not the end: another replica resumes)."""
    if sse["event"] == "done":
        return True
    if sse["event"] != "error":
        return False
    data = frame_data(sse)
    return data.get("scope") != "tool" and not data.get("resumable")


def _settled(entries: list[TranscriptEntry], in_flight: list[dict[str, str]]) -> list[TranscriptEntry]:
    """The checkpoint's entries minus what the replayed frames of the turn in flight show again."""
    shown = {frame_data(f)["id"] for f in in_flight if f["event"] == "tool_call"}
    for f in in_flight:
        if f["event"] == "message_completed":
            shown.update(c["id"] for c in frame_data(f)["message"].get("tool_calls", []))
    kept = drop_dangling_tool_calls(entries)
    return [e for e in kept if not (isinstance(e, (ToolCallEntry, ToolResultEntry)) and e.call_id in shown)]


class RemoteMailbox(Mailbox):
    """A steering mailbox for a run another replica owns: each push becomes a command row."""

    def __init__(self, supervisor: ReplicaSupervisor, session_id: str, run_id: str) -> None:
        super().__init__()
        self._sup, self._sid, self._rid = supervisor, session_id, run_id

    def push(self, content: Any) -> int:
        """Queue ``content`` for the owner's next turn; the id cannot be taken back from here."""
        self._sup.send_later(self._sid, self._rid, "steer", {"message": content})
        return next(self._sup.command_ids)

    def remove(self, token: int) -> bool:
        """A message sent to another replica cannot be taken back."""
        return False


class RemoteAttachment(_Attachment):
    """A stream of a run owned by another replica, fed from ``web_frames``."""

    relay: asyncio.Task[None] | None = None

    def close(self) -> None:
        """Stop relaying (the run goes on)."""
        if self.relay is not None:
            self.relay.cancel()


class ReplicaSupervisor(RunSupervisor):
    """A :class:`RunSupervisor` whose runs are leased, relayed and taken over across replicas.

    ``RouterDeps`` makes one when its store is a :class:`~lovia.web.store.PostgresChatStore`
    (the lease TTL comes from that store).
    """

    def __init__(self, deps: SupervisorDeps) -> None:
        super().__init__(deps)
        store: PostgresChatStore = deps.store  # type: ignore[assignment]
        self.pg = store
        self.ttl = store.lease_ttl
        self.command_ids = itertools.count(1)
        self._remote: dict[str, str] = {}
        self._wake: dict[str, set[asyncio.Event]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        """Start listening for notifications and sweeping for runs to take over."""
        if not self._tasks:
            await self.pg.fetch("SELECT 1 FROM {web_chats} LIMIT 1")  # migrate now: fail at startup, not later
            await self.pg.pg_checkpointer.live_leases()  # and the checkpoint tables the sweep joins
            self._tasks = [asyncio.ensure_future(self._listen()), asyncio.ensure_future(self._sweep_forever())]

    async def shutdown(self, *, grace: float = 10.0) -> None:
        """Stop the background tasks, then cancel live runs (their leases are released for a takeover)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await super().shutdown(grace=grace)
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=2.0)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    # ------------------------------------------------------------------ notifications

    async def notify(self, payload: str) -> None:
        """``NOTIFY`` every replica of this namespace."""
        await self.pg.execute("SELECT pg_notify(%s, %s)", (self.pg.channel, payload))

    async def _listen(self) -> None:
        import psycopg

        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.pg.dsn, autocommit=True)
                async with conn:
                    await conn.execute(f'LISTEN "{self.pg.channel}"')  # the name is a validated identifier
                    async for note in conn.notifies():
                        self._on_notify(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("replica notification listener lost its connection; reconnecting", exc_info=True)
                await asyncio.sleep(_POLL)

    def _on_notify(self, payload: str) -> None:
        kind, _, session_id = payload.partition(":")
        if kind == "f":
            for event in self._wake.get(session_id, ()):
                event.set()
        elif kind == "c" and session_id in self._live:
            self._spawn(self._run_commands(session_id))
        elif kind == "r":
            self._spawn(self._refresh())

    # ------------------------------------------------------------------ owner side

    def _launch(self, live: RunController) -> None:
        if live.first_checkpoint is not None:
            live.first_checkpoint = dataclasses.replace(live.first_checkpoint, lease_ttl=self.ttl)
        super()._launch(live)
        sub = live.subscribe_live()
        if live.resumed:
            # Followers elsewhere may hold text the previous owner streamed in the turn it died in;
            # the resumed run streams that turn again from its start, so it is void for them.
            sub.put(frame("output_discarded", {}))
        self._remote.pop(live.session_id, None)
        self._spawn(self._pump(live, sub))

    async def _pump(self, live: RunController, sub: _Subscription) -> None:
        """Store every frame of a local run and tell the other replicas (in order, one at a time)."""
        await self.notify(f"r:{live.session_id}")
        while (item := await sub.queue.get()) is not None:
            try:
                await self.pg.execute(
                    "WITH i AS (INSERT INTO {web_frames} (session_id, run_id, event, data_json) "
                    "VALUES (%s, %s, %s, %s)) SELECT pg_notify(%s, %s)",
                    (
                        live.session_id,
                        live.run_id,
                        item["event"],
                        item["data"],
                        self.pg.channel,
                        f"f:{live.session_id}",
                    ),
                )
            except Exception:  # a lost frame only degrades what remote clients see, never the run
                logger.warning("could not relay a frame of run %s", live.run_id, exc_info=True)
        with contextlib.suppress(Exception):
            await self.notify(f"r:{live.session_id}")

    async def _failed(self, live: RunController, event: ev.RunFailed) -> None:
        if isinstance(event.error, RunBusy):  # another replica took the run first: leave it to that one
            live.status = "interrupted"
            logger.info("run %s is driven by another replica; not resuming it here", live.run_id)
            return
        await super()._failed(live, event)

    async def _run_commands(self, session_id: str) -> None:
        live = self._live.get(session_id)
        if live is None:
            return
        rows = await self.pg.fetch(
            "UPDATE {web_commands} SET done = TRUE WHERE session_id = %s AND run_id = %s AND NOT done "
            "RETURNING id, kind, payload_json",
            (session_id, live.run_id),
        )
        for _id, kind, payload_json in sorted(rows):
            payload = json.loads(payload_json)
            if kind == "stop":
                self._spawn(super().stop(session_id))
            elif kind == "steer":
                live.mailbox.push(payload["message"])
            elif kind == "approve":
                self._spawn(self.deps.approvals.resolve(session_id, str(payload["call_id"]), bool(payload["approve"])))

    # ------------------------------------------------------------------ non-owner side

    def get(self, session_id: str) -> RunController | None:
        """The local run of a chat, or a stand-in for one another replica owns (steering goes to it)."""
        local = self._live.get(session_id)
        run_id = self._remote.get(session_id)
        if local is not None or run_id is None:
            return local
        return RunController(
            deps=self.deps,
            supervisor=self,
            session_id=session_id,
            agent=self.agent_for(None),
            first_input=[],
            first_checkpoint=CheckpointOptions(self.store.checkpointer, run_id),  # never launched here
            seed_entries=[],
            is_new=False,
            title_message=None,
            source="user",
            mailbox=RemoteMailbox(self, session_id, run_id),
        )

    async def send(self, session_id: str, run_id: str, kind: str, payload: dict[str, Any]) -> None:
        """Queue a command for the run's owner and wake it."""
        await self.pg.execute(
            "WITH i AS (INSERT INTO {web_commands} (session_id, run_id, kind, payload_json) VALUES (%s, %s, %s, %s)) "
            "SELECT pg_notify(%s, %s)",
            (session_id, run_id, kind, json.dumps(payload, default=str), self.pg.channel, f"c:{session_id}"),
        )

    def send_later(self, session_id: str, run_id: str, kind: str, payload: dict[str, Any]) -> None:
        """:meth:`send` from synchronous code (steering through a :class:`RemoteMailbox`)."""
        self._spawn(self.send(session_id, run_id, kind, payload))

    async def stop(self, session_id: str, *, timeout: float = 10.0, discard: bool = False) -> bool:
        """Stop the chat's run, here or on the replica that owns it (which keeps its completed
        turns, whatever ``discard`` says), and wait until it ended."""
        if session_id in self._live:
            return await super().stop(session_id, timeout=timeout, discard=discard)
        meta = await self.store.get(session_id)
        if meta is None or not meta.active_run_id:
            return False
        run_id = meta.active_run_id
        await self.send(session_id, run_id, "stop", {})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            meta = await self.store.get(session_id)
            if meta is None or meta.active_run_id != run_id:
                break
            await asyncio.sleep(0.1)
        return True

    async def subscribe(self, session_id: str) -> _Attachment:
        """A local subscription, or a relay of the run another replica owns."""
        if session_id in self._live:
            return await super().subscribe(session_id)
        meta = await self.store.get(session_id)
        if meta is None or not meta.active_run_id:
            return await super().subscribe(session_id)
        run_id = meta.active_run_id
        self._remote[session_id] = run_id
        history = segments_runs(await self.store.session.segments(session_id))
        snapshot = await self.store.checkpointer.load(run_id)
        done = list(snapshot.entries) if snapshot is not None else []
        rows = await self.pg.fetch(
            "SELECT seq, event, data_json FROM {web_frames} WHERE run_id = %s ORDER BY seq", (run_id,)
        )
        frames = [(int(seq), {"event": str(event), "data": str(data)}) for seq, event, data in rows]
        last = max((seq for seq, _ in frames), default=0)
        starts = [i for i, (_, f) in enumerate(frames) if f["event"] == "turn_started"]
        in_flight = [f for _, f in frames[starts[-1] if starts else 0 :]]
        done = _settled(done, in_flight)
        messages, transcript = snapshot_views(history, done)
        head = frame(
            "snapshot",
            {
                "session_id": session_id,
                "status": "running",
                "entries": messages,
                "transcript": transcript,
                "run_id": run_id,
                "resumed": False,
            },
        )
        sub = _Subscription(None)
        attachment = RemoteAttachment([head, *in_flight], sub)
        if any(_terminal(f) for f in in_flight):
            sub.end()
            return attachment
        attachment.relay = asyncio.ensure_future(self._relay(session_id, run_id, last, sub))
        return attachment

    async def _relay(self, session_id: str, run_id: str, last: int, sub: _Subscription) -> None:
        event = asyncio.Event()
        self._wake.setdefault(session_id, set()).add(event)
        quiet = 0
        try:
            while True:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), _POLL)
                event.clear()
                rows = await self.pg.fetch(
                    "SELECT seq, event, data_json FROM {web_frames} WHERE run_id = %s AND seq > %s ORDER BY seq",
                    (run_id, last),
                )
                for seq, name, data in rows:
                    last = int(seq)
                    item = {"event": str(name), "data": str(data)}
                    sub.put(item)
                    if _terminal(item):
                        return
                if rows or not await self._ended(session_id, run_id):
                    quiet = 0
                    continue
                quiet += 1  # the final frame may still be on its way from the owner's pump
                if quiet >= 3:
                    return  # the run ended without a final frame (e.g. its chat was deleted)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            sub.put(frame("error", {"type": type(exc).__name__, "message": str(exc)}))
        finally:
            self._wake.get(session_id, set()).discard(event)
            sub.end()

    async def _ended(self, session_id: str, run_id: str) -> bool:
        meta = await self.store.get(session_id)
        return meta is None or meta.active_run_id != run_id

    # ------------------------------------------------------------------ takeover

    async def resume(
        self,
        session_id: str,
        run_id: str,
        *,
        agent: str | None = None,
        deps: Any = None,
        client_context: dict[str, Any] | None = None,
    ) -> RunController | None:
        """Take the run over when its owner is gone and this replica wins the claim.

        The owner is gone when its lease expired (it was killed), or when it released the lease
        on a shutdown (it recorded the run as ``interrupted``). A lease released while the run is
        still recorded as ``running`` belongs to a run that is ending (stopped, failed or
        completed): its owner is writing the outcome down, so the run is not taken.
        """
        if session_id in self._live or self.closing:
            return self._live.get(session_id)
        claimed = await self.pg.execute(
            f"UPDATE {{web_runs}} r SET claimed_until = {_NOW} + %s WHERE r.run_id = %s "
            f"AND (r.claimed_until IS NULL OR r.claimed_until < {_NOW}) "
            "AND NOT EXISTS (SELECT 1 FROM {run_leases} l WHERE l.run_id = r.run_id "
            f"AND (l.expires_at > {_NOW} OR (l.owner = '' AND r.status <> 'interrupted')))",
            (self.ttl, run_id),
        )
        if not claimed:
            return None
        try:
            return await super().resume(session_id, run_id, agent=agent, deps=deps, client_context=client_context)
        except UserError:
            return None

    async def _refresh(self) -> None:
        """Which chats have a run owned elsewhere (steering and stop go there)."""
        rows = await self.pg.fetch("SELECT id, active_run_id FROM {web_chats} WHERE active_run_id IS NOT NULL")
        self._remote = {str(sid): str(rid) for sid, rid in rows if sid not in self._live}

    async def sweep(self) -> None:
        """Take over every run whose owner is gone, and run commands addressed to local runs."""
        await self._refresh()
        rows = await self.pg.fetch(
            "SELECT c.id, c.active_run_id, c.agent FROM {web_chats} c JOIN {run_leases} l "
            f"ON l.run_id = c.active_run_id WHERE l.expires_at <= {_NOW}"
        )
        for session_id, run_id, agent in rows:
            if session_id in self._live:
                continue
            try:
                deps = await self.takeover_deps(str(session_id), agent)
            except Exception as exc:  # run_deps refused: the run stays resumable for a reconnect
                logger.warning("not taking over run %s of chat %s: run_deps refused: %s", run_id, session_id, exc)
                continue
            async with self.lock(session_id):
                live = await self.resume(str(session_id), str(run_id), agent=agent, deps=deps)
            if live is not None:
                logger.info("took over run %s of chat %s (its replica is gone)", run_id, session_id)
        for session_id in list(self._live):
            await self._run_commands(session_id)

    async def _sweep_forever(self) -> None:
        interval = min(_POLL, self.ttl / 3)
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("replica sweep failed; retrying", exc_info=True)
            await asyncio.sleep(interval)
