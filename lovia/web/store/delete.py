"""Deleting a chat with its subagent tasks in one SQLite transaction (see :meth:`ChatStore.delete`).

The chat index shares its file with the session, the checkpointer and the schedule store in the
usual setup (:meth:`ChatStore.sqlite`). The delete then runs on the index's connection and removes
the rows of all of them at once: either the whole task tree goes, or nothing does.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field

from ...exceptions import StoreError
from ...stores.sqlite.checkpointer import delete_rows as delete_checkpoint_rows
from ...stores.sqlite.session import clear_rows as clear_session_rows

__all__ = ["Doomed", "SharedStores", "same_file", "sqlite_delete_tree"]

SUBAGENT = "subagent"

_CHAT_TABLES = ("chat_runs", "chat_uploads", "chat_origins", "chat_ui_data", "chat_variants")
"""The index tables keyed by ``session_id`` (``chat_sessions`` is keyed by ``id``)."""


@dataclass(frozen=True, slots=True)
class SharedStores:
    """Which stores beside the chat index live in its database, so a delete reaches them in its transaction."""

    session: bool
    checkpointer: bool
    schedules: bool


@dataclass(slots=True)
class Doomed:
    """What one delete removed: the chats (the root first), their runs and their uploads' files."""

    chats: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    uploads: list[str] = field(default_factory=list)


def same_file(a: str, b: str) -> bool:
    """Whether two SQLite paths name the same file (never true for ``":memory:"``)."""
    if ":memory:" in (a, b):
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def task_tree(conn: sqlite3.Connection, root: str) -> list[str]:
    """``root`` then its subagent tasks, theirs, and so on (breadth first), read on ``conn``."""
    out, seen, frontier = [root], {root}, [root]
    while frontier:
        marks = ", ".join("?" * len(frontier))
        rows = conn.execute(
            "SELECT o.session_id FROM chat_origins o JOIN chat_sessions s ON s.id = o.session_id "
            f"WHERE o.kind = ? AND o.origin_session_id IN ({marks}) ORDER BY s.created_at, s.id",
            (SUBAGENT, *frontier),
        ).fetchall()
        frontier = [str(r[0]) for r in rows if str(r[0]) not in seen]
        seen.update(frontier)
        out += frontier
    return out


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _drop_chat(conn: sqlite3.Connection, chat_id: str, shared: SharedStores, present: set[str], doomed: Doomed) -> None:
    runs = [str(r[0]) for r in conn.execute("SELECT run_id FROM chat_runs WHERE session_id = ?", (chat_id,))]
    active = conn.execute("SELECT active_run_id FROM chat_sessions WHERE id = ?", (chat_id,)).fetchone()
    if active is not None and active[0] and active[0] not in runs:
        runs.insert(0, str(active[0]))
    doomed.run_ids += runs
    rows = conn.execute("SELECT path FROM chat_uploads WHERE session_id = ?", (chat_id,))
    doomed.uploads += [str(r[0]) for r in rows]
    if shared.checkpointer and "snapshot_heads" in present:
        for run_id in runs:  # failed runs keep a checkpoint: it goes with the chat
            delete_checkpoint_rows(conn, run_id)
    if shared.session and "session_runs" in present:
        clear_session_rows(conn, chat_id)
    if shared.schedules and "web_schedules" in present:
        conn.execute(
            "DELETE FROM web_schedule_claims WHERE schedule_id IN (SELECT id FROM web_schedules WHERE session_id = ?)",
            (chat_id,),
        )
        conn.execute("DELETE FROM web_schedules WHERE session_id = ?", (chat_id,))
    for table in _CHAT_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (chat_id,))
    conn.execute("DELETE FROM chat_sessions WHERE id = ?", (chat_id,))


def sqlite_delete_tree(conn: sqlite3.Connection, root: str, shared: SharedStores) -> Doomed:
    """Delete ``root`` and its task chats at any depth in one write transaction on ``conn`` (the index's)."""
    doomed = Doomed()
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            doomed.chats = task_tree(conn, root)
            present = _tables(conn)
            for chat_id in reversed(doomed.chats):  # the deepest tasks first
                _drop_chat(conn, chat_id, shared, present, doomed)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(
            f"cannot delete chat {root!r}: {exc}; nothing was deleted",
            hint="check that the database file is writable and not locked by another program, then retry",
        ) from exc
    return doomed
