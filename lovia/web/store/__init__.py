"""The web app's store: the chat index beside a session and a checkpointer, on SQLite or PostgreSQL.

* :mod:`.protocol`: :class:`ChatIndex`, what the web app asks of either backend.
* :mod:`.records` and :mod:`.runs`: the records every backend returns (:class:`ChatMeta`,
  :class:`UploadRecord`, and :class:`RunRow`, the one record of a run).
* :mod:`.base`: what both backends do the same way, over the methods each implements.
* :mod:`.sqlite`: :class:`ChatStore`, everything in one SQLite file (or in memory).
* :mod:`.postgres`: :class:`PostgresChatStore`, everything in one PostgreSQL database, shared by replicas.
* :mod:`.schedules`: the schedule store beside the chats (:class:`ScheduleStore` and its backends).
* :mod:`.schema` and :mod:`.pg_schema`: the chat index's migrations on each database;
  :mod:`.delete`: deleting a chat tree in one transaction; :mod:`.common`: small pure helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...stores._dsn import is_postgres_url
from .common import like_pattern, new_ui_data_ref
from .protocol import ChatIndex
from .records import MAX_TITLE_CHARS, SUBAGENT, ChatMeta, UploadRecord
from .runs import RunRow
from .schedules import (
    PostgresScheduleStore,
    ScheduleClaim,
    ScheduleRow,
    ScheduleStore,
    SQLiteScheduleStore,
    json_object,
    open_schedule_store,
)
from .sqlite import ChatStore

if TYPE_CHECKING:
    from .postgres import DEFAULT_LEASE_TTL, PostgresChatStore

__all__ = [
    "DEFAULT_LEASE_TTL",
    "MAX_TITLE_CHARS",
    "SUBAGENT",
    "ChatIndex",
    "ChatMeta",
    "ChatStore",
    "PostgresChatStore",
    "PostgresScheduleStore",
    "RunRow",
    "SQLiteScheduleStore",
    "ScheduleClaim",
    "ScheduleRow",
    "ScheduleStore",
    "UploadRecord",
    "is_postgres_url",
    "json_object",
    "like_pattern",
    "new_ui_data_ref",
    "open_schedule_store",
]

_POSTGRES = ("DEFAULT_LEASE_TTL", "PostgresChatStore")


def __getattr__(name: str) -> Any:
    """The PostgreSQL store on first use: importing it loads the optional driver."""
    if name in _POSTGRES:
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
