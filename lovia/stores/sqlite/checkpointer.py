"""``SQLiteCheckpointer``: the bundled durable checkpoint store, with run leases.

Layout: ``snapshot_turns(id PK, run_id, prev_id, entries_json)`` holds one row per non-empty save,
each pointing at the run's previous one, and ``snapshot_heads(run_id PK, head_json, updated_at,
last_turn, entry_count)`` is overwritten on every save and points at the newest. A save appends
one row at the end of the table and updates one head row: O(new entries), old batches are never
rewritten, and no index has to be maintained. Loading walks the chain back from the head (ids
strictly decrease along it, so even a corrupted chain cannot loop) and checks the entry count.
Each batch row also holds a CRC-32 of its text (``checksum``), verified on load.
``run_leases(run_id PK, owner, token, expires_at)`` holds leases; a fenced save checks its lease
in the same transaction as the write.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from types import TracebackType

from ...checkpointer import Lease, RunHead, RunInfo, RunSnapshot, RunStatus
from ...exceptions import CorruptRecordError
from ...transcript import TranscriptEntry
from .. import _leases
from .._codec import checksum, decode_entries, decode_head, encode_entries, verify_checksum
from .._listing import run_info
from .._maintenance import check_non_negative
from ._db import Database, read, write

__all__ = ["SQLiteCheckpointer"]


def _save(
    conn: sqlite3.Connection, run_id: str, batch: str | None, count: int, head_json: str, updated_at: float
) -> None:
    last_turn = None
    if batch is not None:
        last_turn = conn.execute(
            "INSERT INTO snapshot_turns (run_id, prev_id, entries_json, checksum) "
            "VALUES (?, (SELECT last_turn FROM snapshot_heads WHERE run_id = ?), ?, ?)",
            (run_id, run_id, batch, checksum(batch)),
        ).lastrowid
    conn.execute(
        "INSERT INTO snapshot_heads (run_id, head_json, updated_at, last_turn, entry_count) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET head_json = excluded.head_json, updated_at = excluded.updated_at, "
        "last_turn = COALESCE(excluded.last_turn, snapshot_heads.last_turn), "
        "entry_count = snapshot_heads.entry_count + excluded.entry_count",
        (run_id, head_json, updated_at, last_turn, count),
    )


def _lease_row(conn: sqlite3.Connection, run_id: str) -> _leases.LeaseRow | None:
    row = conn.execute("SELECT owner, token, expires_at FROM run_leases WHERE run_id = ?", (run_id,)).fetchone()
    return (str(row[0]), int(row[1]), float(row[2])) if row else None


def _put_lease(conn: sqlite3.Connection, run_id: str, row: _leases.LeaseRow) -> None:
    conn.execute(
        "INSERT INTO run_leases (run_id, owner, token, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, expires_at = "
        "excluded.expires_at",
        (run_id, *row),
    )


# The run's batches, oldest first, found by walking back from the head's newest one.
_CHAIN_SQL = """
WITH RECURSIVE chain(id, prev_id, entries_json, checksum) AS (
    SELECT id, prev_id, entries_json, checksum FROM snapshot_turns WHERE id = ? AND run_id = ?
    UNION ALL
    SELECT t.id, t.prev_id, t.entries_json, t.checksum FROM snapshot_turns t JOIN chain c ON t.id = c.prev_id
    WHERE t.id < c.id AND t.run_id = ?
)
SELECT id, prev_id, entries_json, checksum FROM chain ORDER BY id
"""


def _load(conn: sqlite3.Connection, run_id: str) -> RunSnapshot | None:
    with read(conn):
        head_row = conn.execute(
            "SELECT head_json, last_turn, entry_count FROM snapshot_heads WHERE run_id = ?", (run_id,)
        ).fetchone()
        if head_row is None:
            return None
        head_json, last_turn, expected = head_row
        batches = conn.execute(_CHAIN_SQL, (last_turn, run_id, run_id)).fetchall() if last_turn is not None else []
    head = decode_head(run_id, head_json)
    entries: list[TranscriptEntry] = []
    for _, _, text, stored in batches:
        verify_checksum(stored, text, session_id=None, run_id=run_id)
        entries += decode_entries(text, session_id=None, run_id=run_id)
    if (batches and batches[0][1] is not None) or len(entries) != expected:
        raise CorruptRecordError(
            f"checkpoint of run {run_id!r} is incomplete: found {len(entries)} of its {expected} entries",
            run_id=run_id,
            hint="rows of snapshot_turns were deleted or edited by hand; delete the checkpoint "
            "(Checkpointer.delete) to start the run over",
        )
    return RunSnapshot.from_parts(run_id, entries, head)


def delete_rows(conn: sqlite3.Connection, run_id: str) -> None:
    """Forget a run's checkpoint inside the caller's write transaction on a connection to the store's file
    (a live lease on it is kept); the web app's chat index deletes a chat in one transaction with it."""
    row = conn.execute("SELECT last_turn FROM snapshot_heads WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None and row[0] is not None:
        conn.execute(
            f"DELETE FROM snapshot_turns WHERE id IN (SELECT id FROM ({_CHAIN_SQL}))", (row[0], run_id, run_id)
        )
    conn.execute("DELETE FROM snapshot_heads WHERE run_id = ?", (run_id,))
    conn.execute("DELETE FROM run_leases WHERE run_id = ? AND expires_at <= ?", (run_id, time.time()))


def _delete(conn: sqlite3.Connection, run_id: str) -> None:
    with write(conn):
        delete_rows(conn, run_id)


_LIST_SQL = """
SELECT run_id, head_json, entry_count, updated_at
FROM snapshot_heads
WHERE ? IS NULL OR (json_valid(head_json) AND json_extract(head_json, '$.status') = ?)
ORDER BY updated_at DESC, run_id DESC
LIMIT ? OFFSET ?
"""


def _list(conn: sqlite3.Connection, status: str | None, limit: int, offset: int) -> list[RunInfo]:
    rows = conn.execute(_LIST_SQL, (status, status, limit, offset)).fetchall()
    return [run_info(str(run_id), head_json, count, updated_at=stamp) for run_id, head_json, count, stamp in rows]


class SQLiteCheckpointer:
    """A :class:`~lovia.checkpointer.LeasingCheckpointer` in a SQLite file.

    Args:
        path: the database file (created when missing); may be shared with a
            :class:`~lovia.stores.SQLiteSession` and other writers; use ``wal=True`` then.
        wal: WAL journal + ``synchronous=NORMAL``. Off by default.

    Lease times use the wall clock (``time.time()``), so workers sharing a file need roughly
    synchronised clocks.
    """

    def __init__(self, path: str | os.PathLike[str], *, wal: bool = False) -> None:
        self._db = Database(path, wal=wal, component="checkpoint")

    @property
    def path(self) -> str:
        """The database file."""
        return self._db.path

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Append a batch of new entries (possibly empty) and overwrite the head, in one transaction."""
        batch = encode_entries(entries) if entries else None
        count = len(entries)
        head_json = head.to_json()

        def save(conn: sqlite3.Connection) -> None:
            with write(conn):
                _save(conn, run_id, batch, count, head_json, head.updated_at)

        await self._db.write(save, size=len(batch or "") + len(head_json))

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The stored snapshot, or ``None``."""
        return await self._db.run(lambda conn: _load(conn, run_id))

    async def delete(self, run_id: str) -> None:
        """Forget the run (no error when absent); a live lease on it is kept."""
        await self._db.run(lambda conn: _delete(conn, run_id))

    async def list_runs(self, *, status: RunStatus | None = None, limit: int = 50, offset: int = 0) -> list[RunInfo]:
        """Stored runs, most recently updated first, optionally only those with ``status``."""
        check_non_negative(limit=limit, offset=offset)
        return await self._db.run(lambda conn: _list(conn, status, limit, offset))

    async def acquire_lease(self, run_id: str, *, owner: str, ttl: float) -> Lease:
        """Claim the run; raises :class:`~lovia.exceptions.RunBusy` while another live lease holds it."""
        _leases.check_ttl(ttl)

        def acquire(conn: sqlite3.Connection) -> Lease:
            with write(conn):
                lease = _leases.decide_acquire(run_id, _lease_row(conn, run_id), owner=owner, ttl=ttl, now=time.time())
                _put_lease(conn, run_id, (lease.owner, lease.token, lease.expires_at))
            return lease

        return await self._db.run(acquire)

    async def renew_lease(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend the lease; raises :class:`~lovia.exceptions.LeaseLostError` if it is no longer current."""
        _leases.check_ttl(ttl)

        def renew(conn: sqlite3.Connection) -> Lease:
            with write(conn):
                _leases.check_current(lease, _lease_row(conn, lease.run_id))
                renewed = Lease(run_id=lease.run_id, owner=lease.owner, token=lease.token, expires_at=time.time() + ttl)
                _put_lease(conn, lease.run_id, (renewed.owner, renewed.token, renewed.expires_at))
            return renewed

        return await self._db.run(renew)

    async def release_lease(self, lease: Lease) -> None:
        """Give the run up (no error when already lost)."""

        def release(conn: sqlite3.Connection) -> None:
            with write(conn):
                conn.execute(
                    "UPDATE run_leases SET owner = '', expires_at = 0 WHERE run_id = ? AND owner = ? AND token = ?",
                    (lease.run_id, lease.owner, lease.token),
                )

        await self._db.run(release)

    async def live_leases(self) -> list[Lease]:
        """Leases held right now (who drives which run), soonest to expire first."""

        def read(conn: sqlite3.Connection) -> list[Lease]:
            rows = conn.execute(
                "SELECT run_id, owner, token, expires_at FROM run_leases WHERE owner != '' AND expires_at > ? "
                "ORDER BY expires_at",
                (time.time(),),
            ).fetchall()
            return [Lease(run_id=r, owner=o, token=int(t), expires_at=float(e)) for r, o, t, e in rows]

        return await self._db.run(read)

    async def append_fenced(
        self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead, *, lease: Lease
    ) -> None:
        """``append`` that raises :class:`~lovia.exceptions.LeaseLostError` (writing nothing)
        unless ``lease`` is current."""
        batch = encode_entries(entries) if entries else None
        count = len(entries)
        head_json = head.to_json()

        def save(conn: sqlite3.Connection) -> None:
            with write(conn):
                _leases.check_current(lease, _lease_row(conn, run_id) if lease.run_id == run_id else None)
                _save(conn, run_id, batch, count, head_json, head.updated_at)

        await self._db.write(save, size=len(batch or "") + len(head_json))

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        await self._db.close()

    async def __aenter__(self) -> SQLiteCheckpointer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
