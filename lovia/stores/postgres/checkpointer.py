"""``PostgresCheckpointer``: a durable checkpoint store with run leases for many workers on many hosts.

A save is one statement (one round trip, one transaction): a data-modifying CTE upserts the head
row, which also allocates the batch's ``seq`` under the head's row lock, and inserts the batch as
one ``snapshot_turns`` row. Cost is O(new entries); stored batches are never rewritten. A fenced
save adds the lease check to that same statement: the lease row is read ``FOR SHARE`` (a takeover
waits for the save to commit, and the save sees a committed takeover), and nothing is written
unless owner and token still match.

Leases follow the shared rules of :mod:`lovia.stores._leases`, with every time taken from the
database clock (``clock_timestamp()``), so workers on hosts with skewed clocks agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from ...checkpointer import Lease, RunHead, RunInfo, RunSnapshot, RunStatus
from ...transcript import TranscriptEntry
from .. import _leases
from .._codec import checksum, decode_entries, decode_head, encode_entries, verify_checksum
from .._listing import run_info
from .._maintenance import check_non_negative
from ._db import Database

__all__ = ["PostgresCheckpointer"]

_NOW = "extract(epoch from clock_timestamp())::double precision"

_SAVE = """
WITH {lease_cte}h AS (
    INSERT INTO {heads} AS cur (run_id, head_json, status, batches, entry_count, updated_at)
    SELECT %(run_id)s, %(head)s, %(status)s, %(inc)s, %(count)s, %(updated_at)s {lease_from}
    ON CONFLICT (run_id) DO UPDATE SET
        head_json = excluded.head_json, status = excluded.status, updated_at = excluded.updated_at,
        batches = cur.batches + excluded.batches, entry_count = cur.entry_count + excluded.entry_count
    RETURNING batches
), t AS (
    INSERT INTO {turns} (run_id, seq, entries_json, entry_count, checksum)
    SELECT %(run_id)s, h.batches, %(batch)s, %(count)s, %(checksum)s::bigint FROM h WHERE %(batch)s::text IS NOT NULL
)
SELECT count(*) FROM h
"""

_FENCE = (
    "l AS (SELECT 1 FROM {leases} WHERE run_id = %(run_id)s AND owner = %(owner)s AND token = %(token)s FOR SHARE), "
)


class PostgresCheckpointer:
    """A :class:`~lovia.checkpointer.LeasingCheckpointer` in PostgreSQL (``pip install 'lovia[postgres]'``).

    Args:
        dsn: a libpq connection string, e.g. ``"postgresql://user@db-host/app"``.
        pool: instead of ``dsn``, a ``psycopg_pool.AsyncConnectionPool`` you own (lovia never
            closes it).
        schema: PostgreSQL schema for the tables (created if missing); default: the search path.
        table_prefix: prefix for every table name, e.g. ``"agents_"``.
        min_size: minimum connections in the pool lovia creates.
        max_size: maximum connections in the pool lovia creates.

    Lease expiry uses the database clock, so hosts need not agree on the time.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: Any | None = None,
        schema: str | None = None,
        table_prefix: str = "",
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self._db = Database(
            dsn,
            pool=pool,
            schema=schema,
            table_prefix=table_prefix,
            min_size=min_size,
            max_size=max_size,
            component="checkpoint",
        )
        self._sql = _statements(self._db)

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Append a batch of new entries (possibly empty) and overwrite the head, in one statement."""
        params = _save_params(run_id, entries, head)
        async with self._db.connection("saving a checkpoint") as conn:
            await conn.execute(self._sql["save"], params)

    async def append_fenced(
        self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead, *, lease: Lease
    ) -> None:
        """``append`` that raises :class:`~lovia.exceptions.LeaseLostError` (writing nothing)
        unless ``lease`` is current."""
        params = {**_save_params(run_id, entries, head), "owner": lease.owner, "token": lease.token}
        if lease.run_id != run_id:
            _leases.check_current(lease, None)
        async with self._db.connection("saving a checkpoint") as conn:
            cur = await conn.execute(self._sql["save_fenced"], params)
            row = await cur.fetchone()
            if row is None or int(row[0]) == 0:
                _leases.check_current(lease, await self._lease_row(conn, run_id))
                _leases.check_current(lease, None)  # the lease changed hands and back between the two reads

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The stored snapshot, or ``None`` (head and batches read in one statement)."""
        async with self._db.connection("loading a checkpoint") as conn:
            cur = await conn.execute(self._sql["load"], (run_id,))
            row = await cur.fetchone()
        if row is None:
            return None
        head = decode_head(run_id, row[0])
        entries: list[TranscriptEntry] = []
        for text, stored in zip(row[1] or [], row[2] or [], strict=True):
            verify_checksum(stored, text, session_id=None, run_id=run_id)
            entries += decode_entries(text, session_id=None, run_id=run_id)
        return RunSnapshot.from_parts(run_id, entries, head)

    async def delete(self, run_id: str) -> None:
        """Forget the run (no error when absent); a live lease on it is kept."""
        async with self._db.transaction("deleting a checkpoint") as conn:
            await conn.execute(self._sql["delete_head"], (run_id,))  # head first: waits for an in-flight save
            await conn.execute(self._sql["delete_turns"], (run_id,))
            await conn.execute(self._sql["delete_lease"], (run_id,))

    async def delete_in(self, conn: Any, run_id: str) -> None:
        """:meth:`delete` inside the caller's transaction on ``conn`` (a connection to this store's database)."""
        await self._db.ready()
        for step in ("delete_head", "delete_turns", "delete_lease"):
            await conn.execute(self._sql[step], (run_id,))

    async def list_runs(self, *, status: RunStatus | None = None, limit: int = 50, offset: int = 0) -> list[RunInfo]:
        """Stored runs, most recently updated first, optionally only those with ``status``."""
        check_non_negative(limit=limit, offset=offset)
        async with self._db.connection("listing runs") as conn:
            cur = await conn.execute(self._sql["list"], {"status": status, "limit": limit, "offset": offset})
            rows = await cur.fetchall()
        return [run_info(r, head, count, status=st, updated_at=stamp) for r, head, count, st, stamp in rows]

    async def acquire_lease(self, run_id: str, *, owner: str, ttl: float) -> Lease:
        """Claim the run; raises :class:`~lovia.exceptions.RunBusy` while another live lease holds it."""
        _leases.check_ttl(ttl)
        async with self._db.transaction("acquiring a run lease") as conn:
            await conn.execute(self._sql["lease_seed"], (run_id,))
            cur = await conn.execute(self._sql["lease_lock"], (run_id,))
            found = await cur.fetchone()
            assert found is not None
            held_by, token, expires_at, now = found
            row = None if int(token) == 0 else (str(held_by), int(token), float(expires_at))
            lease = _leases.decide_acquire(run_id, row, owner=owner, ttl=ttl, now=float(now))
            await conn.execute(self._sql["lease_put"], (lease.owner, lease.token, lease.expires_at, run_id))
        return lease

    async def renew_lease(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend the lease; raises :class:`~lovia.exceptions.LeaseLostError` if it is no longer current."""
        _leases.check_ttl(ttl)
        async with self._db.connection("renewing a run lease") as conn:
            cur = await conn.execute(self._sql["lease_renew"], (float(ttl), lease.run_id, lease.owner, lease.token))
            row = await cur.fetchone()
            if row is None:
                _leases.check_current(lease, await self._lease_row(conn, lease.run_id))
                _leases.check_current(lease, None)
        assert row is not None
        return Lease(run_id=lease.run_id, owner=lease.owner, token=lease.token, expires_at=float(row[0]))

    async def release_lease(self, lease: Lease) -> None:
        """Give the run up (no error when already lost)."""
        async with self._db.connection("releasing a run lease") as conn:
            await conn.execute(self._sql["lease_release"], (lease.run_id, lease.owner, lease.token))

    async def live_leases(self) -> list[Lease]:
        """Leases held right now (who drives which run), soonest to expire first (database clock)."""
        async with self._db.connection("listing run leases") as conn:
            cur = await conn.execute(self._sql["lease_live"])
            rows = await cur.fetchall()
        return [Lease(run_id=str(r), owner=str(o), token=int(t), expires_at=float(e)) for r, o, t, e in rows]

    async def _lease_row(self, conn: Any, run_id: str) -> _leases.LeaseRow | None:
        cur = await conn.execute(self._sql["lease_get"], (run_id,))
        row = await cur.fetchone()
        return (str(row[0]), int(row[1]), float(row[2])) if row else None

    async def close(self) -> None:
        """Close the pool this store created (idempotent); a caller's pool stays open."""
        await self._db.close()

    async def __aenter__(self) -> PostgresCheckpointer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def lease_rows(cp: PostgresCheckpointer) -> list[tuple[str, str, float]]:
    """Every lease row as ``(run_id, owner, seconds left)``, expired and released ones included.

    Internal (``lovia runs ls``): the seconds are counted by the database clock, the one the
    leases themselves use; a released lease has an empty owner and a negative remainder.
    """
    async with cp._db.connection("listing run leases") as conn:
        cur = await conn.execute(cp._sql["lease_all"])
        rows = await cur.fetchall()
    return [(str(r), str(o), float(left)) for r, o, left in rows]


def _save_params(run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> dict[str, Any]:
    batch = encode_entries(entries) if entries else None
    return {
        "run_id": run_id,
        "head": head.to_json(),
        "status": head.status,
        "updated_at": head.updated_at,
        "batch": batch,
        "inc": 1 if batch is not None else 0,
        "count": len(entries),
        "checksum": checksum(batch) if batch is not None else None,
    }


def _statements(db: Database) -> dict[str, Any]:
    from psycopg import sql

    n = db.names
    heads, turns, leases = n.table("snapshot_heads"), n.table("snapshot_turns"), n.table("run_leases")

    def q(text: str) -> Any:
        return sql.SQL(text).format(heads=heads, turns=turns, leases=leases)

    return {
        "save": q(_SAVE.replace("{lease_cte}", "").replace("{lease_from}", "")),
        "save_fenced": q(_SAVE.replace("{lease_cte}", _FENCE).replace("{lease_from}", "FROM l")),
        "load": q(
            "SELECT h.head_json, (SELECT array_agg(t.entries_json ORDER BY t.seq) FROM {turns} t "
            "WHERE t.run_id = h.run_id), (SELECT array_agg(t.checksum ORDER BY t.seq) FROM {turns} t "
            "WHERE t.run_id = h.run_id) FROM {heads} h WHERE h.run_id = %s"
        ),
        "delete_head": q("DELETE FROM {heads} WHERE run_id = %s"),
        "delete_turns": q("DELETE FROM {turns} WHERE run_id = %s"),
        "delete_lease": q(f"DELETE FROM {{leases}} WHERE run_id = %s AND expires_at <= {_NOW}"),
        "list": q(
            "SELECT run_id, head_json, entry_count, status, updated_at FROM {heads} "
            "WHERE %(status)s::text IS NULL OR status = %(status)s::text "
            "ORDER BY updated_at DESC, run_id DESC LIMIT %(limit)s OFFSET %(offset)s"
        ),
        "lease_seed": q(
            "INSERT INTO {leases} (run_id, owner, token, expires_at) VALUES (%s, '', 0, 0) ON CONFLICT DO NOTHING"
        ),
        "lease_lock": q(f"SELECT owner, token, expires_at, {_NOW} FROM {{leases}} WHERE run_id = %s FOR UPDATE"),
        "lease_put": q("UPDATE {leases} SET owner = %s, token = %s, expires_at = %s WHERE run_id = %s"),
        "lease_renew": q(
            f"UPDATE {{leases}} SET expires_at = {_NOW} + %s WHERE run_id = %s AND owner = %s AND token = %s "
            "RETURNING expires_at"
        ),
        "lease_release": q(
            "UPDATE {leases} SET owner = '', expires_at = 0 WHERE run_id = %s AND owner = %s AND token = %s"
        ),
        "lease_get": q("SELECT owner, token, expires_at FROM {leases} WHERE run_id = %s"),
        "lease_all": q(f"SELECT run_id, owner, expires_at - {_NOW} FROM {{leases}}"),
        "lease_live": q(
            f"SELECT run_id, owner, token, expires_at FROM {{leases}} WHERE owner <> '' AND expires_at > {_NOW} "
            "ORDER BY expires_at"
        ),
    }
