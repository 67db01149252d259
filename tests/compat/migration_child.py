"""Crash child: ``python migration_child.py STORE PATH WAL K kill|raise``: open a store, its K-th step dying.

The K-th call of ``lovia.stores.sqlite._schema._apply_step`` (counted from 1) runs its step, then
SIGKILLs this process (``kill``) or raises (``raise``), inside the migration's transaction. Exits 3
when the store opened with fewer than K steps.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lovia.stores.sqlite import _schema  # noqa: E402
from tests.compat._stores import STORES  # noqa: E402

store, path, wal, k, how = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5]
original = _schema._apply_step
calls = 0


def dying_step(conn: object, name: str, migration: _schema.Migration) -> None:
    global calls
    original(conn, name, migration)  # type: ignore[arg-type]
    calls += 1
    if calls == k:
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"step {k} ({migration.name}) failed")


_schema._apply_step = dying_step  # type: ignore[assignment]
try:
    asyncio.run(STORES[store].open(path, wal))
except RuntimeError as exc:
    print(exc)
    sys.exit(2)
sys.exit(3)
