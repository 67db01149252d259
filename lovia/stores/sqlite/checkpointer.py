"""``SQLiteCheckpointer``: the bundled durable checkpoint store, with run leases.

Layout: ``snapshot_heads(run_id PK, head_json, updated_at)`` overwritten on every save, and
``snapshot_turns(run_id, seq, entries_json, PK(run_id, seq))`` with one row per non-empty save, so
a save costs O(new entries) and never rewrites old ones. ``run_leases(run_id PK, owner, token,
expires_at)`` holds leases; a fenced save checks its lease in the same transaction as the write.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from types import TracebackType

from ...checkpointer import Lease, RunHead, RunInfo, RunSnapshot, RunStatus
from ...transcript import TranscriptEntry
from .. import _leases
from .._codec import decode_entries, decode_head, encode_entries
from .._maintenance import check_non_negative
from ._db import Database, read, write

__all__ = ["SQLiteCheckpointer"]


def _save(conn: sqlite3.Connection, run_id: str, batch: str | None, head_json: str, updated_at: float) -> None:
    if batch is not None:
        conn.execute(
            "INSERT INTO snapshot_turns (run_id, seq, entries_json) "
            "SELECT ?, COALESCE(MAX(seq), 0) + 1, ? FROM snapshot_turns WHERE run_id = ?",
            (run_id, batch, run_id),
        )
    conn.execute(
        "INSERT INTO snapshot_heads (run_id, head_json, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET head_json = excluded.head_json, updated_at = excluded.updated_at",
        (run_id, head_json, updated_at),
    )


def _lease_row(conn: sqlite3.Connection, run_id: str) -> _leases.LeaseRow | None:
    row = conn.execute("SELECT owner, token, expires_at FROM run_leases WHERE run_id = ?", (run_id,)).fetchone()
    return (str(row[0]), int(row[1]), float(row[2])) if row else None


def _put_lease(conn: sqlite3.Connection, run_id: str, row: _leases.LeaseRow) -> None:
    conn.execute(
        "INSERT INTO run_leases (run_id, owner, token, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at",
        (run_id, *row),
    )


def _load(conn: sqlite3.Connection, run_id: str) -> RunSnapshot | None:
    with read(conn):
        head_row = conn.execute("SELECT head_json FROM snapshot_heads WHERE run_id = ?", (run_id,)).fetchone()
        if head_row is None:
            return None
        batches = conn.execute(
            "SELECT seq, entries_json FROM snapshot_turns WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    head = decode_head(run_id, head_row[0])
    entries = [e for _, text in batches for e in decode_entries(text, session_id=None, run_id=run_id)]
    return RunSnapshot.from_parts(run_id, entries, head)


def _delete(conn: sqlite3.Connection, run_id: str) -> None:
    with write(conn):
        conn.execute("DELETE FROM snapshot_turns WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM snapshot_heads WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM run_leases WHERE run_id = ? AND expires_at <= ?", (run_id, time.time()))


_LIST_SQL = """
SELECT h.run_id, h.head_json,
       (SELECT COALESCE(SUM(CASE WHEN json_valid(t.entries_json) THEN json_array_length(t.entries_json) ELSE 0 END), 0)
        FROM snapshot_turns t WHERE t.run_id = h.run_id)
FROM snapshot_heads h
WHERE ? IS NULL OR (json_valid(h.head_json) AND json_extract(h.head_json, '$.status') = ?)
ORDER BY h.updated_at DESC, h.run_id DESC
LIMIT ? OFFSET ?
"""


def _list(conn: sqlite3.Connection, status: str | None, limit: int, offset: int) -> list[RunInfo]:
    rows = conn.execute(_LIST_SQL, (status, status, limit, offset)).fetchall()
    infos = []
    for run_id, head_json, count in rows:
        head = decode_head(run_id, head_json)
        infos.append(RunInfo(run_id, head.agent_name, head.status, head.turns, int(count), head.started_at, head.updated_at))
    return infos


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
        head_json = head.to_json()

        def save(conn: sqlite3.Connection) -> None:
            with write(conn):
                _save(conn, run_id, batch, head_json, head.updated_at)

        await self._db.run(save)

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

    async def append_fenced(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead, *, lease: Lease) -> None:
        """``append`` that raises :class:`~lovia.exceptions.LeaseLostError` (writing nothing) unless ``lease`` is current."""
        batch = encode_entries(entries) if entries else None
        head_json = head.to_json()

        def save(conn: sqlite3.Connection) -> None:
            with write(conn):
                _leases.check_current(lease, _lease_row(conn, run_id) if lease.run_id == run_id else None)
                _save(conn, run_id, batch, head_json, head.updated_at)

        await self._db.run(save)

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        await self._db.close()

    async def __aenter__(self) -> SQLiteCheckpointer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
