"""Internal: run-lease rules shared by every bundled checkpointer.

A lease row is ``(owner, token, expires_at)`` per run. Rules, applied inside one transaction:

* no row, or an expired/released row: the caller takes the run with ``token + 1`` (tokens never
  go back, so a stale worker's token can never match again);
* a live row of the same owner: renewed in place (same token);
* a live row of another owner: :class:`~lovia.exceptions.RunBusy`.

Release keeps the row (owner cleared, expired) so the next taker still gets a higher token.
"""

from __future__ import annotations

import math

from ..checkpointer import Lease
from ..exceptions import LeaseLostError, RunBusy, UserError

__all__ = ["LeaseRow", "check_current", "check_ttl", "decide_acquire", "released"]

LeaseRow = tuple[str, int, float]
"""``(owner, token, expires_at)`` as stored."""


def check_ttl(ttl: float) -> None:
    """A TTL must be a positive, finite number of seconds."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise UserError(f"lease ttl must be a positive number of seconds, got {ttl!r}", hint="e.g. ttl=30")


def decide_acquire(run_id: str, row: LeaseRow | None, *, owner: str, ttl: float, now: float) -> Lease:
    """The lease the caller gets given the stored ``row``; raises ``RunBusy`` while another holds it."""
    check_ttl(ttl)
    if not owner:
        raise UserError("lease owner must be a non-empty string", hint="use a worker id, e.g. f'{hostname}:{pid}'")
    if row is None:
        return Lease(run_id=run_id, owner=owner, token=1, expires_at=now + ttl)
    held_by, token, expires_at = row
    if expires_at > now:
        if held_by == owner:
            return Lease(run_id=run_id, owner=owner, token=token, expires_at=now + ttl)
        raise RunBusy(
            f"run {run_id!r} is leased by {held_by!r} for another {expires_at - now:.1f}s",
            run_id=run_id,
            expires_in=expires_at - now,
            hint="another worker is driving this run; retry after the lease expires, or use a new run_id",
        )
    return Lease(run_id=run_id, owner=owner, token=token + 1, expires_at=now + ttl)


def check_current(lease: Lease, row: LeaseRow | None) -> None:
    """Raise :class:`LeaseLostError` unless ``lease`` is still the stored one."""
    if row is None or row[0] != lease.owner or row[1] != lease.token:
        holder = f"{row[0]!r} (token {row[1]})" if row and row[0] else "nobody"
        raise LeaseLostError(
            f"lease on run {lease.run_id!r} (owner {lease.owner!r}, token {lease.token}) is no longer current; "
            f"now held by {holder}",
            hint="this worker lost the run (its lease expired or was released); stop driving it and do not retry the "
            "write",
        )


def released(row: LeaseRow) -> LeaseRow:
    """The row after a release: nobody holds it, the token is kept."""
    return ("", row[1], 0.0)
