"""Scheduled runs, offline: a schedule every 60 s on a manual clock, with two schedulers racing.

Two schedulers share one SQLite file (as two servers would share a database); the clock moves
one slot at a time, then jumps over five slots. Each slot fires exactly once, and the missed
slots coalesce into one fire. Prints who fired which slot.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from lovia.web.scheduler import ManualClock, Scheduler
from lovia.web.store import ScheduleRow, SQLiteScheduleStore


async def main() -> None:
    path = Path(tempfile.mkdtemp()) / "schedules.db"
    clock = ManualClock(1_800_000_000.0)
    fires: list[str] = []

    def firer(name: str):  # type: ignore[no-untyped-def]
        async def fire(row: ScheduleRow) -> tuple[str | None, str | None]:
            fires.append(name)
            return None, None

        return fire

    stores = [SQLiteScheduleStore(path), SQLiteScheduleStore(path)]
    schedulers = [
        Scheduler.for_store(s, firer(f"server{i}"), clock=clock, owner=f"server{i}") for i, s in enumerate(stores)
    ]
    now = clock()
    digest = ScheduleRow(
        id="digest",
        agent=None,
        input="summarize",
        session_id=None,
        trigger_kind="every",
        trigger_expr="60",
        next_fire=now + 60,
        active=True,
        last_session_id=None,
        created_at=now,
        updated_at=now,
    )
    await stores[0].add(digest)
    for _ in range(3):
        clock.advance(60)
        await asyncio.gather(*(s.run_due() for s in schedulers))
    clock.advance(300)  # five slots pass while nobody polls
    await asyncio.gather(*(s.run_due() for s in schedulers))
    claims = await stores[0].claims("digest")
    print(f"fires: {len(fires)} for {len(claims)} claimed slots, distinct: {len({c.slot for c in claims})}")
    print("fired by:", sorted(c.owner for c in claims))
    row = await stores[0].get("digest")
    assert row is not None
    print(f"fire_count={row.fire_count} next_fire=+{row.next_fire - 1_800_000_000.0:.0f}s")
    for s in stores:
        await s.close()


if __name__ == "__main__":
    asyncio.run(main())
