"""The web store's records: a chat in the sidebar (:class:`ChatMeta`) and an uploaded file
(:class:`UploadRecord`), the same on every backend (a run's record is :class:`~lovia.web.store.RunRow`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...exceptions import CorruptRecordError

__all__ = ["MAX_TITLE_CHARS", "SUBAGENT", "ChatMeta", "UploadRecord"]

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
