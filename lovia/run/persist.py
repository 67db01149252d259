"""Internal: the run's side of persistence — the resume decision, the checkpoint writer, leases.

Stores never import this module; it only calls the ``Checkpointer`` protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..agent import as_agent
from ..checkpointer import CheckpointOptions, Lease, LeasingCheckpointer, RunHead, RunSnapshot, RunStatus
from ..exceptions import (
    BudgetExceeded,
    LeaseLostError,
    MaxTurnsExceeded,
    ProviderError,
    RunCancelled,
    UserError,
)
from ..handoff import Handoff
from ..stores._history import history_of

if TYPE_CHECKING:
    from ..agent import Agent
    from ..session import Session
    from ..transcript import TranscriptEntry
    from .state import RunState

__all__ = [
    "CheckpointWriter",
    "Plan",
    "agent_graph",
    "classify",
    "error_payload",
    "load_history",
    "plan_run",
    "resume_agents",
]

logger = logging.getLogger("lovia")


@dataclass(frozen=True, slots=True)
class Plan:
    """What the pre-flight decided: start fresh, resume a snapshot, or replay a completed one."""

    mode: Literal["fresh", "resume", "replay"]
    snapshot: RunSnapshot | None = None


async def plan_run(options: CheckpointOptions | None) -> Plan:
    """Apply the ``if_run_exists`` policy (reference 3.0)."""
    if options is None:
        return Plan("fresh")
    run_id = options.effective_run_id
    cp = options.checkpointer
    if options.if_run_exists == "restart":
        if cp is not None:
            await cp.delete(run_id)
        return Plan("fresh")
    snapshot = options.resume_from
    if snapshot is None and cp is not None:
        snapshot = await cp.load(run_id)
    if snapshot is None:
        if options.if_run_exists == "resume_only":
            raise UserError(
                f"no stored run {run_id!r} to resume",
                hint="check the run id, or use if_run_exists='resume' to start it fresh",
            )
        return Plan("fresh")
    if options.if_run_exists == "fail":
        raise UserError(
            f"run {run_id!r} already exists (status {snapshot.status})",
            hint="use a new run id, if_run_exists='resume' to continue it, or 'restart' to discard it",
        )
    return Plan("replay" if snapshot.status == "completed" else "resume", snapshot)


def agent_graph(entry: Agent[Any]) -> dict[str, Agent[Any]]:
    """Every agent reachable from ``entry`` through handoffs, by name; duplicates are an error."""
    found: dict[str, Agent[Any]] = {}
    stack = [entry]
    seen: set[int] = set()
    while stack:
        agent = stack.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        other = found.get(agent.name)
        if other is not None and other is not agent:
            raise UserError(
                f"two different agents are named {agent.name!r} in the handoff graph of {entry.name!r}",
                hint="agent names must be unique across the graph so a checkpoint can find the active agent",
            )
        found[agent.name] = agent
        for item in agent.handoffs:
            stack.append(as_agent(item.target) if isinstance(item, Handoff) else item)
    return found


def resume_agents(entry: Agent[Any], snap: RunSnapshot) -> tuple[Agent[Any], Agent[Any] | None]:
    """The agent that drove ``snap`` and the handoff target it recorded, found in ``entry``'s graph."""
    graph = agent_graph(entry)
    name, pending_name = snap.head.agent_name, snap.head.pending_handoff
    agent = graph.get(name)
    if agent is None:
        raise UserError(
            f"run {snap.run_id!r} was driven by agent {name!r}, which is not in the handoff graph of {entry.name!r}",
            hint=f"restore the agent named {name!r} (renaming an agent breaks resume of its in-flight runs)",
        )
    if pending_name is None:
        return agent, None
    pending = graph.get(pending_name)
    if pending is None:
        raise UserError(
            f"run {snap.run_id!r} recorded a handoff to {pending_name!r}, which no longer exists",
            hint=f"restore the agent named {pending_name!r}",
        )
    return agent, pending


async def load_history(session: Session | None, session_id: str | None) -> tuple[list[TranscriptEntry], dict[str, Any]]:
    """The session's entries so far, and the context state its last segment carried."""
    if session is None or session_id is None:
        return [], {}
    history, last_meta = await history_of(session, session_id)  # incremental in the bundled stores
    return history, dict((last_meta or {}).get("context_state") or {})


def classify(exc: BaseException) -> RunStatus:
    """``interrupted`` for stops worth resuming as-is, ``failed`` for everything else."""
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, RunCancelled, MaxTurnsExceeded, BudgetExceeded)):
        return "interrupted"
    if isinstance(exc, (TimeoutError, ConnectionError, LeaseLostError)):
        return "interrupted"
    if isinstance(exc, ProviderError) and exc.retryable:
        return "interrupted"
    return "failed"


def error_payload(exc: BaseException) -> dict[str, Any]:
    """JSON-safe description of the error that stopped a run."""
    payload: dict[str, Any] = {"type": type(exc).__name__, "message": str(getattr(exc, "message", None) or exc)}
    hint = getattr(exc, "hint", None)
    if hint:
        payload["hint"] = hint
    return payload


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class CheckpointWriter:
    """Saves the run's new entries plus its head; one save at a time, O(new entries) each.

    With a lease, every save is fenced and a background task renews the lease; once the lease
    is lost the next save raises :class:`LeaseLostError` and nothing more is written.
    """

    def __init__(self, options: CheckpointOptions, *, persisted: int = 0) -> None:
        assert options.checkpointer is not None
        self.options = options
        self.checkpointer = options.checkpointer
        self.run_id = options.effective_run_id
        self._persisted = persisted
        self._lock = asyncio.Lock()
        self._lease: Lease | None = None
        self._lease_error: BaseException | None = None
        self._renewer: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Acquire the lease when one is configured."""
        ttl = self.options.lease_ttl
        if ttl is None:
            return
        cp = self.checkpointer
        assert isinstance(cp, LeasingCheckpointer)
        self._lease = await cp.acquire_lease(self.run_id, owner=_default_owner(), ttl=ttl)
        self._renewer = asyncio.ensure_future(self._renew_forever(cp, ttl))

    async def _renew_forever(self, cp: LeasingCheckpointer, ttl: float) -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            assert self._lease is not None
            try:
                self._lease = await cp.renew_lease(self._lease, ttl=ttl)
            except LeaseLostError as exc:
                self._lease_error = exc
                logger.warning("run.lease_lost run_id=%s", self.run_id)
                return
            except Exception:  # transient store trouble: try again on the next tick
                logger.exception("lease renewal failed for run %s", self.run_id)

    def rebase(self, persisted: int) -> None:
        """Set how many of the run's own entries are already stored (after planning)."""
        self._persisted = persisted

    async def save(
        self,
        state: RunState,
        *,
        status: RunStatus = "running",
        output: Any = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        """Append the state's entries new since the last save and overwrite the head (with a
        terminal status, the JSON-safe ``output`` or the ``error`` payload)."""
        async with self._lock:
            if self._lease_error is not None:
                raise LeaseLostError(
                    f"run {self.run_id!r} was taken over by another worker; this worker stops without writing",
                    hint="another process resumed the run after this worker's lease expired",
                ) from self._lease_error
            new = list(state.entries[self._persisted :])
            head = state.saved_head(updated_at=now())
            head.status = status
            head.output = output
            head.error = error
            write = asyncio.ensure_future(self._write(new, head))
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                # A cancelled caller does not stop the store: SQLite, for one, commits on its own
                # thread. Let the write finish and count it (under the lock) before stopping, or
                # the terminal save would append the same entries a second time.
                while not write.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait([write])
                if not write.cancelled():
                    write.exception()  # retrieved: the cancellation is what propagates
                raise

    async def _write(self, new: list[TranscriptEntry], head: RunHead) -> None:
        if self._lease is not None:
            cp = self.checkpointer
            assert isinstance(cp, LeasingCheckpointer)
            await cp.append_fenced(self.run_id, new, head, lease=self._lease)
        else:
            await self.checkpointer.append(self.run_id, new, head)
        self._persisted += len(new)

    async def delete(self) -> None:
        """Drop the snapshot (``delete_on_success``)."""
        await self.checkpointer.delete(self.run_id)

    async def close(self) -> None:
        """Stop renewing and release the lease (best effort)."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._renewer
        if self._lease is not None and self._lease_error is None:
            cp = self.checkpointer
            assert isinstance(cp, LeasingCheckpointer)
            with contextlib.suppress(Exception):
                await cp.release_lease(self._lease)


def now() -> float:
    """Wall-clock seconds (one place, so timing meta is consistent)."""
    return time.time()
