"""The pydantic models of the HTTP API: request bodies the routes validate and the shapes they answer with.

This module is the one definition of each model; the route modules import them from here. Field
limits (``max_length``, ``ge``, ``min_length``) are part of the contract: a body outside them is
refused with ``422`` before any work is done. Where a limit here is tighter than a client might
expect (a message of at most :data:`MAX_MESSAGE_CHARS`), the tighter limit is the served one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from .ids import ChatId
from .triggers import MAX_FIRES, MAX_TIME

__all__ = [
    "MAX_FIRES",
    "MAX_MESSAGE_CHARS",
    "MAX_NOTES_CHARS",
    "AgentInfo",
    "AnswerRequest",
    "ApprovalRequest",
    "Attachment",
    "ChatRequest",
    "ChatResponse",
    "ChatSessionInfo",
    "CreateSessionRequest",
    "FollowupsResponse",
    "ForkRequest",
    "ForkResponse",
    "InjectCancelRequest",
    "InjectRequest",
    "MemoryDreamResult",
    "MemoryNotes",
    "MemoryUpdate",
    "MessageOut",
    "ProcessInfo",
    "RewindRequest",
    "RewindResponse",
    "RunInfo",
    "RunRecordInfo",
    "ScheduleInfo",
    "SchedulePatch",
    "ScheduleSpec",
    "ServerInfo",
    "SessionDetail",
    "SessionOrigin",
    "SessionPatch",
    "TodoItemOut",
    "TodosResponse",
    "ToolImageOut",
    "UploadedFile",
    "WorkspaceEntry",
    "WorkspaceFile",
    "WorkspaceInfo",
]

MAX_MESSAGE_CHARS = 200_000
"""The longest chat message, steering message or schedule input the API reads (longer: 422)."""

MAX_NOTES_CHARS = 1_000_000
"""The longest Memory notes body ``PUT /api/memory`` reads (longer: 422 before any budget check)."""

_MAX_ID_CHARS = 200  # session ids and message refs the routes look up

TriggerKind = Literal["cron", "every", "at"]


# --------------------------------------------------------------------------- agents and the server


class AgentInfo(BaseModel):
    """What a client may know about an agent (``GET /api/agents``): never its provider's keys."""

    name: str
    instructions: str | None = None
    tools: list[str] = Field(default_factory=list)
    workspace: bool = False
    memory: bool = False
    context_window: int | None = None
    model: str | None = None


class ServerInfo(BaseModel):
    """The server's summary (``GET /api/info``): title, the served agents' names, version and feature flags.

    ``demo`` is true when the only agent is the offline demo model. ``GET /api/agents`` describes
    the agents themselves.
    """

    title: str
    agents: list[str] = Field(default_factory=list)
    default_agent: str | None = None
    version: str | None = None
    configured: bool = True
    features: dict[str, bool] = Field(default_factory=dict)
    demo: bool = False


# --------------------------------------------------------------------------- memory


class MemoryNotes(BaseModel):
    """The agent's notes: the editable body, its size, the budget, and when it was last dreamed."""

    content: str
    used: int
    budget: int
    dreamed_at: float | None = None


class MemoryDreamResult(MemoryNotes):
    """The notes after a dream, with the note counts before and after it."""

    before: int
    after: int


class MemoryUpdate(BaseModel):
    """Body of ``PUT /api/memory``: the whole new notes body (``- `` bullet lines; others are ignored)."""

    content: str = Field(max_length=MAX_NOTES_CHARS)


# --------------------------------------------------------------------------- workspace, processes, files


class WorkspaceInfo(BaseModel):
    """An agent's workspace as the Files panel names it."""

    name: str
    scratch_dir: str


class WorkspaceEntry(BaseModel):
    """One file or folder of a workspace listing (``size``/``mtime`` absent when unreadable)."""

    path: str
    is_dir: bool
    size: int | None = None
    mtime: float | None = None
    symlink_target: str | None = None


class WorkspaceFile(BaseModel):
    """A text file's lines ``start``..``end`` (1-based, inclusive) out of ``total_lines``.

    ``truncated``: the file goes on past ``end``; ``binary``: not text, ``content`` is empty.
    """

    path: str
    content: str
    start: int = 1
    end: int = 0
    total_lines: int = 0
    truncated: bool = False
    binary: bool = False


class ProcessInfo(BaseModel):
    """A background process a tool started: its id, command line and state."""

    process_id: str
    command: str
    status: Literal["running", "exited", "killed"]
    exit_code: int | None = None


class UploadedFile(BaseModel):
    """A file saved by an upload: where it is, what it is, and how big."""

    path: str
    name: str
    mime: str
    kind: Literal["image", "file"]
    size: int


# --------------------------------------------------------------------------- chat requests


class Attachment(BaseModel):
    """A file sent with a chat message, named by its path (as an upload answered it)."""

    path: str = Field(max_length=1024)
    mime: str = Field(max_length=255)
    kind: Literal["image", "file"]
    name: str | None = Field(default=None, max_length=255)


class ChatRequest(BaseModel):
    """Body of ``POST /api/chat/stream`` and ``POST /api/chat``.

    ``attachments`` lists upload ids (``POST /api/sessions/{id}/uploads``), each sent with the
    message as a content part; at most 20. ``context`` is the page's client context (a JSON
    object of at most 64 KB) handed to ``create_app(run_deps=...)``.
    """

    message: str = Field(max_length=MAX_MESSAGE_CHARS)
    session_id: ChatId | None = None
    agent: str | None = None
    attachments: list[Attachment | str] | None = Field(default=None, max_length=20)
    context: dict[str, Any] | None = None


class InjectRequest(BaseModel):
    """Body of ``POST /api/chat/inject``: a steering message for the live run's next turn."""

    session_id: ChatId
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class InjectCancelRequest(BaseModel):
    """Body of ``POST /api/chat/uninject``: take back a queued message the run has not seen yet."""

    session_id: ChatId
    id: int = Field(ge=0)


class ApprovalRequest(BaseModel):
    """Body of ``POST /api/chat/approve``: the decision on one pending tool call."""

    session_id: ChatId
    call_id: str
    decision: Literal["approve", "deny"]


class AnswerRequest(BaseModel):
    """Body of ``POST /api/chat/answer``: the answer to the chat's pending ``ask_human`` question."""

    session_id: ChatId
    answer: str = Field(max_length=100_000)


class ChatResponse(BaseModel):
    """What a blocking ``POST /api/chat`` answers: the run's output, its chat and its token usage."""

    output: Any
    session_id: str | None
    usage: dict[str, int]


# --------------------------------------------------------------------------- messages and chats


class ToolImageOut(BaseModel):
    """A stub for an image a tool returned: its position in the result and its type (the bytes
    are served by ``GET /api/sessions/{id}/tool-images/{call_id}/{index}``)."""

    index: int
    mime_type: str | None = None


class MessageOut(BaseModel):
    """One chat message as the API shows it.

    A user message carries its ``ref`` (``"<run_id>:<n>"``) once its run has finished; the
    answer that ends a run carries the run's ``duration`` in seconds; a tool message says
    whether it was an error and which images it returned.
    """

    role: str
    content: Any
    ref: str | None = None
    reasoning: str | None = None
    tool_call_id: str | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    timestamp: float | None = None
    duration: float | None = None
    is_error: bool = False
    images: list[ToolImageOut] = Field(default_factory=list)
    compaction: dict[str, Any] | None = None


class SessionOrigin(BaseModel):
    """Where a chat came from: a ``fork`` of another chat (before ``ref``) or a ``spawn`` by its agent.

    ``exists`` is false once that other chat was deleted (``title`` is then what it was).
    """

    kind: Literal["fork", "spawn"]
    session_id: str
    ref: str | None = None
    title: str | None = None
    exists: bool = True


class SessionDetail(BaseModel):
    """One chat with its messages (``GET /api/sessions/{id}``)."""

    id: str
    title: str | None = None
    agent: str | None = None
    created_at: float
    updated_at: float
    entries: list[MessageOut] = Field(default_factory=list)
    active_run_id: str | None = None
    parent_id: str | None = None
    origin: SessionOrigin | None = None


class ChatSessionInfo(BaseModel):
    """One chat in a listing (``GET /api/sessions``)."""

    id: str
    title: str | None = None
    agent: str | None = None
    created_at: float
    updated_at: float
    pinned: bool = False
    parent_id: str | None = None
    last_run_status: str | None = None
    origin_kind: Literal["fork", "spawn"] | None = None


class CreateSessionRequest(BaseModel):
    """Body of ``POST /api/sessions``: an empty chat, optionally titled and bound to an agent."""

    title: str = Field(default="", max_length=_MAX_ID_CHARS)
    agent: str | None = None


class SessionPatch(BaseModel):
    """Body of ``PATCH /api/sessions/{id}``: a new title, the pin state, or both."""

    title: str | None = Field(default=None, min_length=1, max_length=120)
    pinned: bool | None = None


class RewindRequest(BaseModel):
    """Body of ``POST /api/sessions/{id}/rewind``: drop a user message and everything after it.

    Name the message by exactly one of ``ref`` (``"<run_id>:<n>"``, from the chat's detail) or
    ``user_turn`` (its zero-based index among the chat's user messages). ``keep_answer`` (a
    regenerate) keeps that message's answer as an earlier variant of the turn. ``keep_question``
    (an edit) keeps the earlier version of the turn, the message with its answer, as a variant
    that starts with the message, beside the turn's earlier versions; the answers kept for the
    replaced message go. With neither, the turn's variants go too.
    """

    ref: str | None = Field(default=None, max_length=_MAX_ID_CHARS)
    user_turn: int | None = Field(default=None, ge=0)
    keep_answer: bool = False
    keep_question: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> RewindRequest:
        if (self.ref is None) == (self.user_turn is None):
            raise ValueError("name the user message by exactly one of 'ref' or 'user_turn'")
        return self


class RewindResponse(BaseModel):
    """What a rewind removed, and the chat's messages after it."""

    removed: int
    entries: list[MessageOut] = Field(default_factory=list)


class ForkRequest(BaseModel):
    """Body of ``POST /api/sessions/{id}/fork``: branch before the user message ``ref`` names
    (or ``user_turn``, its zero-based index among the user messages), or copy the chat whole."""

    ref: str | None = Field(default=None, max_length=_MAX_ID_CHARS)
    user_turn: int | None = Field(default=None, ge=0)


class ForkResponse(BaseModel):
    """The new chat a fork made."""

    session_id: str


class TodoItemOut(BaseModel):
    """One item of a chat's todo list."""

    content: str
    status: str
    active_form: str | None = None


class TodosResponse(BaseModel):
    """A chat's current todo list (``GET /api/sessions/{id}/todos``), rebuilt from its transcript."""

    todos: list[TodoItemOut] = Field(default_factory=list)


class FollowupsResponse(BaseModel):
    """The suggested next questions (``[]``: the feature is off, or nothing usable came back)."""

    followups: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- runs


class RunInfo(BaseModel):
    """A live supervised run (``GET /api/runs``)."""

    session_id: str
    run_id: str | None = None
    agent: str
    status: Literal["running", "blocked_on_approval"]
    turns: int
    source: str = "user"
    started_at: float | None = None


class RunRecordInfo(BaseModel):
    """A persisted run record (``GET /api/runs/history``): outcome, error, timing and token usage."""

    run_id: str
    session_id: str | None = None
    agent: str | None = None
    source: str
    status: Literal["running", "completed", "failed", "cancelled", "interrupted"]
    error: str | None = None
    started_at: float
    finished_at: float | None = None
    usage: dict[str, int] | None = None


# --------------------------------------------------------------------------- schedules


class ScheduleSpec(BaseModel):
    """Body of ``POST /api/schedules``: what to send, when, and to which chat and agent.

    ``until`` is a stop condition in plain words: each fire is asked to check it after the task
    and cancel the schedule once it holds. A repeating schedule with ``until`` needs a safety
    limit too (``max_fires`` or ``expires_at``), since the condition may never be judged met.
    """

    input: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    agent: str | None = Field(default=None, max_length=_MAX_ID_CHARS)
    session_id: ChatId | None = None
    trigger_kind: TriggerKind
    trigger_expr: str = Field(min_length=1, max_length=200)
    until: str | None = Field(default=None, max_length=2000)
    max_fires: int | None = Field(default=None, ge=1, le=MAX_FIRES)
    expires_at: float | None = Field(default=None, ge=0, le=MAX_TIME, allow_inf_nan=False)
    context: dict[str, Any] | None = None


class SchedulePatch(BaseModel):
    """Body of ``PATCH /api/schedules/{id}``: only the fields sent change."""

    input: str | None = Field(default=None, min_length=1, max_length=MAX_MESSAGE_CHARS)
    agent: str | None = Field(default=None, max_length=_MAX_ID_CHARS)
    session_id: ChatId | None = None
    trigger_kind: TriggerKind | None = None
    trigger_expr: str | None = Field(default=None, min_length=1, max_length=200)
    active: bool | None = None
    until: str | None = Field(default=None, max_length=2000)
    max_fires: int | None = Field(default=None, ge=1, le=MAX_FIRES)
    expires_at: float | None = Field(default=None, ge=0, le=MAX_TIME, allow_inf_nan=False)


class ScheduleInfo(BaseModel):
    """One schedule as the API shows it, with its last fire's outcome and why it finished."""

    id: str
    agent: str | None = None
    input: str
    session_id: str | None = None
    trigger_kind: str
    trigger_expr: str
    next_fire: float
    active: bool
    last_session_id: str | None = None
    last_status: str | None = None
    last_error: str | None = None
    created_at: float
    updated_at: float
    until: str | None = None
    max_fires: int | None = None
    expires_at: float | None = None
    fire_count: int = 0
    finished_reason: str | None = None
