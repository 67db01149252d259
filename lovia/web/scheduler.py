"""``Scheduler``: fires due schedule slots exactly once, across restarts and across servers.

Each poll reads the due schedules and, for each, claims its slot in the store (see
:mod:`lovia.web.store`): the claim row and the move to the next slot commit together,
so of several schedulers on one database exactly one fires a given slot. Then it calls ``fire``
(start a run) and records the run on the claim.

Slots missed while no server was running are coalesced: on the next poll the schedule fires
once (for its oldest missed slot, recorded as that slot's claim) and moves to the first slot
after *now*; the older missed slots are skipped, not replayed. A process killed after claiming a
slot but before recording its run leaves a claim with no ``fired_at``; after ``reclaim_after``
seconds any scheduler takes it over and fires it, so the slot is not lost. (A kill in the few
milliseconds between the run starting and its record being written can therefore repeat that
one slot; a kill before the claim commits leaves the slot due, to be claimed by the next poll.)

The trigger functions (:data:`TRIGGER_KINDS`, :func:`validate_trigger`, :func:`initial_next_fire`,
:func:`advance_next_fire`) come from :mod:`lovia.web.triggers`; :func:`fire_input` is the message
a fire sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from .._owners import OWNER
from ..exceptions import UserError
from .schedule_fire import FireState, fire_in_chat, fire_input
from .store import ScheduleRow, ScheduleStore
from .triggers import MAX_FIRES, MAX_TIME, TRIGGER_KINDS, advance_next_fire, initial_next_fire, validate_trigger

__all__ = [
    "TRIGGER_KINDS",
    "Clock",
    "FireFn",
    "ManualClock",
    "Scheduler",
    "SchedulerDeps",
    "advance_next_fire",
    "fire_input",
    "initial_next_fire",
    "next_state",
    "validate_trigger",
]

logger = logging.getLogger("lovia.web.scheduler")

Clock = Callable[[], float]
"""Returns the current epoch time in seconds (``time.time`` by default)."""

FireFn = Callable[[ScheduleRow], Awaitable[tuple[str | None, str | None]]]
"""Starts the run of one fire; returns ``(session_id, run_id)``."""


class SchedulerDeps(FireState, Protocol):
    """What :class:`Scheduler` reads of the server (:class:`~lovia.web.api.RouterDeps` has it all)."""

    schedules: ScheduleStore | None
    clock: Clock | None


class ManualClock:
    """A clock that only moves when told to (tests and examples).

    Args:
        start: the initial epoch time.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds``; returns the new time."""
        self.now += seconds
        return self.now

    def set(self, when: float) -> None:
        """Jump to ``when``."""
        self.now = when


def next_state(row: ScheduleRow, *, now: float) -> ScheduleRow:
    """``row`` as it is once its current slot fired at ``now``: next slot, and whether it goes on."""
    following = advance_next_fire(row.trigger_kind, row.trigger_expr, now=now, slot=row.next_fire)
    reason: str | None = None
    if following is None:
        reason = "done"
    elif row.max_fires is not None and row.fire_count + 1 >= row.max_fires:
        reason = "max_fires"
    elif row.expires_at is not None and following > row.expires_at:
        reason = "expired"
    return dataclasses.replace(
        row,
        next_fire=row.next_fire if following is None else following,
        active=reason is None,
        finished_reason=reason,
        fire_count=row.fire_count + 1,
    )


_RETIME = "retime it with PATCH /api/schedules/{id} (a valid trigger), or delete it"


class Scheduler:
    """Polls the schedules of a server and fires what is due, each slot once.

    Args:
        deps: the server (:class:`~lovia.web.api.RouterDeps`): its schedule store (``deps.schedules``,
            else the chat store's own, :attr:`~lovia.web.store.ChatStore.schedule_store`), and the
            chats and runs a fire starts in.
        poll_interval: seconds between polls while :meth:`start` runs.
        clock: the time source (default ``deps.clock``, else ``time.time``; a :class:`ManualClock` in tests).
        owner: recorded on this scheduler's claims.
        reclaim_after: seconds after which a claim with no recorded run is taken over.
    """

    def __init__(
        self,
        deps: SchedulerDeps,
        *,
        poll_interval: float = 1.0,
        clock: Clock | None = None,
        owner: str = OWNER,
        reclaim_after: float = 30.0,
    ) -> None:
        store = deps.schedules if deps.schedules is not None else deps.store.schedule_store

        async def fire(row: ScheduleRow) -> tuple[str | None, str | None]:
            return await fire_in_chat(deps, row)

        self._setup(
            store,
            fire,
            clock=clock or deps.clock,
            poll_interval=poll_interval,
            owner=owner,
            reclaim_after=reclaim_after,
        )

    @classmethod
    def for_store(
        cls,
        store: ScheduleStore,
        fire: FireFn,
        *,
        clock: Clock | None = None,
        poll_interval: float = 1.0,
        owner: str = OWNER,
        reclaim_after: float = 30.0,
    ) -> Scheduler:
        """A scheduler over a bare schedule store that fires through ``fire`` (no server needed).

        Args:
            store: where schedules and claims live.
            fire: starts the run of one fire and returns ``(session_id, run_id)``.
            clock: the time source (default ``time.time``).
            poll_interval: seconds between polls while :meth:`start` runs.
            owner: recorded on this scheduler's claims.
            reclaim_after: seconds after which a claim with no recorded run is taken over.
        """
        made = cls.__new__(cls)
        made._setup(store, fire, clock=clock, poll_interval=poll_interval, owner=owner, reclaim_after=reclaim_after)
        return made

    def _setup(
        self,
        store: ScheduleStore,
        fire: FireFn,
        *,
        clock: Clock | None,
        poll_interval: float,
        owner: str,
        reclaim_after: float,
    ) -> None:
        self.store = store
        self.fire = fire
        self.clock: Clock = clock or time.time
        self.poll_interval = poll_interval
        self.owner = owner
        self.reclaim_after = reclaim_after
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def start(self) -> None:
        """Poll in the background until :meth:`stop`."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    def wake(self) -> None:
        """Poll now instead of at the end of the current interval."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop polling (a fire in progress is cancelled before its claim is recorded: it is reclaimed later)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_due()
            except Exception:  # a database hiccup must not end the poller
                logger.exception("schedule poll failed; retrying in %.1fs", self.poll_interval)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)
            self._wake.clear()

    async def run_due(self) -> int:
        """One poll: take over abandoned claims, then fire every due slot this scheduler claims.

        Returns:
            How many fires this call started.
        """
        now = self.clock()
        fired = 0
        for claim in await self.store.reclaim(owner=self.owner, older_than=now - self.reclaim_after, now=now):
            row = await self.store.get(claim.schedule_id)
            if row is None:
                await self.store.finish_claim(
                    claim.schedule_id, claim.slot, run_id=None, session_id=None, error="schedule deleted"
                )
                continue
            logger.warning("firing slot %s of schedule %s, abandoned by its claimer", claim.slot, row.id)
            fired += await self._fire(row, claim.slot)
        for row in await self.store.due(now):
            try:
                if row.expires_at is not None and now >= row.expires_at:
                    await self.store.update(dataclasses.replace(row, active=False, finished_reason="expired"))
                    continue
                slot = row.next_fire
                following = next_state(row, now=now)
                following.check()
            except UserError as exc:  # a row stored before its fields were checked: it must not stall the others
                await self._retire(row, exc, now=now)
                continue
            except (ArithmeticError, ValueError) as exc:
                await self._retire(row, UserError(f"its timing cannot be computed: {exc}", hint=_RETIME), now=now)
                continue
            if await self.store.claim(following, slot=slot, owner=self.owner, now=now, advance=True):
                fired += await self._fire(row, slot)
        return fired

    async def _retire(self, row: ScheduleRow, exc: UserError, *, now: float) -> None:
        """Deactivate a schedule whose stored trigger or limits cannot be used (``finished_reason="invalid"``)."""
        logger.warning("schedule %s cannot fire and is paused: %s", row.id, exc.message)

        def finite(value: float | None) -> float | None:
            return value if value is not None and math.isfinite(value) and 0 <= value <= MAX_TIME else None

        await self.store.update(
            dataclasses.replace(
                row,
                active=False,
                finished_reason="invalid",
                last_error=f"{exc.message} ({exc.hint})" if exc.hint else exc.message,
                next_fire=finite(row.next_fire) or now,
                expires_at=finite(row.expires_at),
                max_fires=row.max_fires if row.max_fires is not None and 1 <= row.max_fires <= MAX_FIRES else None,
                fire_count=min(max(row.fire_count, 0), MAX_FIRES),
                updated_at=now,
            )
        )

    async def fire_now(self, sched: ScheduleRow) -> str | None:
        """Fire ``sched`` once, at once (its timing is unchanged); returns the chat the fire ran in.

        Raises:
            UserError: the fire could not start (its chat or agent is gone, the server is at its
                run limit or shutting down); the failure is recorded in its fire history.
        """
        session_id, _run_id = await self.fire_now_run(sched)
        return session_id

    async def fire_now_run(self, row: ScheduleRow) -> tuple[str | None, str | None]:
        """:meth:`fire_now`, returning ``(session_id, run_id)``."""
        slot = self.clock()
        while not await self.store.claim(row, slot=slot, owner=self.owner, now=slot, advance=False):
            slot += 1e-6  # two manual fires in the same instant: keep both
        session_id, run_id, error = await self._start(row)
        await self.store.finish_claim(row.id, slot, run_id=run_id, session_id=session_id, error=error)
        if error is not None:
            raise UserError(
                f"schedule {row.id!r} could not fire: {error}",
                hint="check that its chat and agent still exist and the server is not shutting down",
            )
        return session_id, run_id

    async def _start(self, row: ScheduleRow) -> tuple[str | None, str | None, str | None]:
        try:
            session_id, run_id = await self.fire(row)
        except Exception as exc:
            logger.warning("schedule %s could not fire: %s", row.id, exc)
            return None, None, f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
        return session_id, run_id, None

    async def _fire(self, row: ScheduleRow, slot: float) -> int:
        session_id, run_id, error = await self._start(row)
        await self.store.finish_claim(row.id, slot, run_id=run_id, session_id=session_id, error=error)
        return 1 if error is None else 0
