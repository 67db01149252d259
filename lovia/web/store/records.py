"""The web store's records: a chat in the sidebar (:class:`ChatMeta`), what is kept about a run
(:class:`RunRecord`) and an uploaded file (:class:`UploadRecord`); the same on every backend."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...exceptions import CorruptRecordError

__all__ = ["MAX_TITLE_CHARS", "SUBAGENT", "ChatMeta", "RunRecord", "UploadRecord", "run_record"]

SUBAGENT = "subagent"
"""The origin kind of a chat run as a background task of its parent chat (``ChatMeta.parent_id``)."""
MAX_TITLE_CHARS = 120
"""The longest title :meth:`ChatStore.set_title` keeps."""
_ORIGIN_KINDS = ("fork", "spawn")


@dataclass(frozen=True, slots=True)
class ChatMeta:
    """One chat in the sidebar.

    ``parent_id`` names the chat whose background subagent task this chat is (it is deleted with
    that chat, see :meth:`ChatStore.task_tree`). ``origin_kind`` is ``"fork"`` (a branch of
    ``origin_session_id``, cut before the user message ``origin_ref``, ``None`` for a whole copy)
    or ``"spawn"`` (started by ``origin_session_id``'s agent, owned by neither), else ``None``.
    """

    id: str
    title: str | None
    agent: str | None
    created_at: float
    updated_at: float
    pinned: bool = False
    parent_id: str | None = None
    origin_kind: str | None = None
    origin_session_id: str | None = None
    origin_ref: str | None = None
    active_run_id: str | None = None
    """The run in flight (its checkpoint key), kept so a restarted server can resume it."""
    damaged: str | None = None
    """``None``, or why this chat's index row cannot be read and what to do (listed, not hidden)."""

    @classmethod
    def from_row(cls, row: Any) -> ChatMeta:
        """A chat from an index row: ``id, title, agent, created_at, updated_at, active_run_id, pinned``,
        optionally followed by the origin's ``kind, origin_session_id`` and the fork's ``origin_ref``.

        A row that cannot be read gives a ``damaged`` chat (listed with the reason, never hidden).
        """
        values = tuple(row)
        kind, origin, ref = (values[7:10] + (None, None, None))[:3]
        try:
            return cls(
                str(values[0]),
                values[1] or None,  # an untitled chat has no title
                values[2],
                float(values[3]),
                float(values[4]),
                bool(values[6]),
                parent_id=str(origin) if kind == SUBAGENT and origin is not None else None,
                origin_kind=kind if kind in _ORIGIN_KINDS else None,
                origin_session_id=str(origin) if kind in _ORIGIN_KINDS and origin is not None else None,
                origin_ref=ref if kind == "fork" else None,
                active_run_id=values[5],
            )
        except (TypeError, ValueError) as exc:  # one damaged row must not hide the other chats
            damaged = CorruptRecordError(
                f"the index row of chat {values[0]!r} cannot be read: {exc}",
                session_id=str(values[0]),
                hint="the row was damaged outside lovia; delete the chat or restore the database from a backup",
            )
            title = values[1] if isinstance(values[1], str) else ""
            return cls(str(values[0]), title, None, 0.0, 0.0, damaged=str(damaged))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        out = {
            "id": self.id,
            "title": self.title,
            "agent": self.agent,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "active_run_id": self.active_run_id,
            "pinned": self.pinned,
            "parent_id": self.parent_id,
            "origin_kind": self.origin_kind,
            "origin_session_id": self.origin_session_id,
            "origin_ref": self.origin_ref,
        }
        if self.damaged:
            out["damaged"] = self.damaged
        return out


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What the web app remembers about one run of a chat."""

    run_id: str
    session_id: str
    status: str
    usage: dict[str, int] | None
    started_at: float
    finished_at: float | None
    damaged: str | None = None
    """``None``, or why this record cannot be read and what to do (listed, not hidden)."""
    agent: str | None = None
    source: str = "user"
    """Why the run started: ``user``, ``schedule:<id>``, ``subagent:<chat>``, ``subagent-report:<task>``..."""
    error: str | None = None
    """``"Type: message"`` of a failed run, else ``None``."""
    owner: str | None = None
    """The serving process that last ran it (``host:pid``): tells a run live elsewhere from an orphan."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (the fields of ``GET /api/runs/history``)."""
        out = {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "agent": self.agent,
            "source": self.source,
            "status": self.status,
            "error": self.error,
            "usage": self.usage,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }
        if self.damaged:
            out["damaged"] = self.damaged
        return out


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """A file uploaded into a chat, kept on disk next to the chat index until the chat is deleted."""

    id: str
    session_id: str
    name: str
    mime_type: str
    size: int
    path: str
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON the API returns (the disk path stays on the server)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "name": self.name,
            "mime_type": self.mime_type,
            "size": self.size,
            "created_at": self.created_at,
        }


def run_record(row: tuple[Any, ...]) -> RunRecord:
    """A run record from a row of the run table's columns (a damaged row gives a ``damaged`` record)."""
    try:
        usage = json.loads(row[3]) if row[3] else None
        if usage is not None and not isinstance(usage, dict):
            raise ValueError("usage is not a JSON object")
        finished = float(row[5]) if row[5] is not None else None
        more = {"agent": row[6], "source": row[7] or "user", "error": row[8]} if len(row) > 6 else {}
        if len(row) > 9:
            more["owner"] = row[9]
        return RunRecord(row[0], row[1], row[2], usage, float(row[4]), finished, **more)
    except (TypeError, ValueError) as exc:  # one damaged record must not hide the others
        damaged = CorruptRecordError(
            f"the record of run {row[0]!r} cannot be read: {exc}",
            session_id=str(row[1]),
            run_id=str(row[0]),
            hint="the row was damaged outside lovia; it only holds the run's usage and timing, so it is safe to ignore",
        )
        return RunRecord(str(row[0]), str(row[1]), str(row[2]), None, 0.0, None, damaged=str(damaged))
