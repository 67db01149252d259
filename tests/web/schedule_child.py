"""Child process for the schedule tests (run as a script, not collected).

* ``claim-then-die DB``: create a due schedule, claim its slot, then SIGKILL itself before starting
  anything — the state a server killed between the claim's commit and the run's start leaves.
* ``race DSN SCHEMA CLOCK_FILE LOG``: a scheduler on PostgreSQL whose clock is read from
  ``CLOCK_FILE`` (the parent moves it; ``stop`` ends the loop); each fire appends ``pid slot`` to ``LOG``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from lovia.web.scheduler import Scheduler, next_state
from lovia.web.store import PostgresScheduleStore, ScheduleRow, SQLiteScheduleStore

T0 = 1_800_000_000.0


async def claim_then_die(db: str) -> None:
    store = SQLiteScheduleStore(db)
    row = ScheduleRow(
        id="a",
        agent=None,
        input="ping",
        session_id=None,
        trigger_kind="every",
        trigger_expr="10",
        next_fire=T0,
        active=True,
        last_session_id=None,
        created_at=T0,
        updated_at=T0,
    )
    await store.add(row)
    assert await store.claim(next_state(row, now=T0), slot=T0, owner="doomed", now=T0, advance=True)
    os.kill(os.getpid(), signal.SIGKILL)


async def race(dsn: str, schema: str, clock_file: str, log: str) -> None:
    store = PostgresScheduleStore(dsn, schema=schema)
    state = {"now": T0, "slot": 0.0}

    def clock() -> float:
        return state["now"]

    async def fire(row: ScheduleRow) -> tuple[str | None, str | None]:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {state['slot']}\n")
        return None, None

    sched = Scheduler.for_store(store, fire, clock=clock, owner=f"pid{os.getpid()}")
    while True:
        with open(clock_file, encoding="utf-8") as fh:
            text = fh.read().strip()
        if text == "stop":
            break
        if text:
            state["now"] = float(text)
            due = await store.due(state["now"])
            state["slot"] = due[0].next_fire if due else 0.0
            await sched.run_due()
        await asyncio.sleep(0.002)
    await store.close()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    asyncio.run(claim_then_die(*args) if mode == "claim-then-die" else race(*args))
