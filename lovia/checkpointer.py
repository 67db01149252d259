"""The Checkpointer protocol and its data: ``RunHead``, ``RunSnapshot``, ``CheckpointOptions``.

A checkpoint keeps the run in flight: its own entries as append-only batches plus one small
mutable head. ``run_id`` is the global key and an idempotency key: re-issuing a call with the same
``run_id`` resumes an interrupted run or replays a completed one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ._json import dumps
from .exceptions import UserError
from .messages import Usage
from .transcript import TranscriptEntry, entry_from_dict, entry_to_dict

__all__ = [
    "CheckpointOptions",
    "Checkpointer",
    "IfRunExists",
    "Lease",
    "LeasingCheckpointer",
    "RunHead",
    "RunInfo",
    "RunSnapshot",
    "RunStatus",
]

RunStatus = Literal["running", "interrupted", "completed", "failed"]
IfRunExists = Literal["resume", "restart", "fail", "resume_only"]
_STATUSES = ("running", "interrupted", "completed", "failed")
_POLICIES = ("resume", "restart", "fail", "resume_only")


@dataclass(slots=True)
class RunHead:
    """The small mutable part of a snapshot, overwritten on every save.

    This is the one declaration of a run's durable fields: the run loop keeps a ``RunHead`` as
    its live record (see ``lovia.run.state``) and :class:`RunSnapshot` reads through to it.
    """

    agent_name: str
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    status: RunStatus = "running"
    output: Any = None
    """JSON-safe final output (completed runs only)."""
    error: dict[str, Any] | None = None
    """``{"type", "message"}`` of the error that stopped the run."""
    last_input_tokens: int | None = None
    context_state: dict[str, Any] = field(default_factory=dict)
    """The context policy's carried state."""
    pending_handoff: str | None = None
    """Name of a handoff target that fired but was not applied yet."""
    started_calls: list[str] = field(default_factory=list)
    """Calls of non-idempotent tools that started and have no stored result yet."""
    repair_attempts: int = 0
    """Structured-output repair turns used so far (a resumed run does not get fresh ones)."""
    started_at: float = None  # type: ignore[assignment]  # None is replaced by updated_at on creation
    """When the run first started (a resumed run keeps it); omitted, it is ``updated_at``."""
    updated_at: float = field(default_factory=time.time)
    model_usage: dict[str, Usage] = field(default_factory=dict)
    """``usage`` split by ``"vendor:model"`` over every attempt (what the run's cost is computed from)."""
    trace: dict[str, str] | None = None
    """``{"trace_id", "span_id"}`` (hex) of the first attempt's run span, for tracers that link attempts."""
    provider_state: dict[str, Any] = field(default_factory=dict)
    """State the run's provider carries (e.g. which failover member answers), JSON-safe."""

    def __post_init__(self) -> None:
        if self.started_at is None:
            self.started_at = self.updated_at

    def copy(self) -> RunHead:
        """An independent copy (usage, state and lists are not shared)."""
        return _copy_head(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "agent_name": self.agent_name,
            "usage": self.usage.to_dict(),
            "turns": self.turns,
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "last_input_tokens": self.last_input_tokens,
            "context_state": self.context_state,
            "pending_handoff": self.pending_handoff,
            "started_calls": list(self.started_calls),
            "repair_attempts": self.repair_attempts,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "model_usage": {model: usage.to_dict() for model, usage in self.model_usage.items()},
            "trace": self.trace,
            "provider_state": self.provider_state,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunHead:
        """Inverse of :meth:`to_dict`; unknown keys are ignored, a bad shape is a ``ValueError``."""
        if not isinstance(data, dict) or not isinstance(data.get("agent_name"), str):
            raise ValueError("run head needs a string 'agent_name'")
        status = data.get("status", "running")
        if status not in _STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        turns = data.get("turns", 0)
        if not isinstance(turns, int):
            raise ValueError("run head 'turns' must be an integer")
        now = time.time()
        return cls(
            agent_name=data["agent_name"],
            usage=Usage.from_dict(data.get("usage")),
            turns=turns,
            status=status,
            output=data.get("output"),
            error=data.get("error"),
            last_input_tokens=data.get("last_input_tokens"),
            context_state=dict(data.get("context_state") or {}),
            pending_handoff=data.get("pending_handoff"),
            started_calls=[str(c) for c in data.get("started_calls") or []],
            repair_attempts=int(data.get("repair_attempts") or 0),
            started_at=float(_first_number(data.get("started_at"), data.get("updated_at"), now)),
            updated_at=float(_first_number(data.get("updated_at"), now)),
            model_usage=_model_usage(data.get("model_usage")),
            trace=_trace(data.get("trace")),
            provider_state=dict(data.get("provider_state") or {}),
        )

    def to_json(self) -> str:
        """Compact JSON text."""
        return dumps(self.to_dict())

    @classmethod
    def from_json(cls, payload: str | bytes) -> RunHead:
        """Parse :meth:`to_json` output."""
        return cls.from_dict(json.loads(payload))


def _copy_head(head: RunHead) -> RunHead:
    # Built directly (not dataclasses.replace): the run copies its head on every checkpoint save.
    return RunHead(
        agent_name=head.agent_name,
        usage=head.usage.copy(),
        turns=head.turns,
        status=head.status,
        output=head.output,
        error=head.error,
        last_input_tokens=head.last_input_tokens,
        context_state=dict(head.context_state),
        pending_handoff=head.pending_handoff,
        started_calls=list(head.started_calls),
        repair_attempts=head.repair_attempts,
        started_at=head.started_at,
        updated_at=head.updated_at,
        model_usage={model: usage.copy() for model, usage in head.model_usage.items()},
        trace=dict(head.trace) if head.trace is not None else None,
        provider_state=dict(head.provider_state),
    )


def _model_usage(data: Any) -> dict[str, Usage]:
    if not isinstance(data, dict):
        return {}
    return {str(model): Usage.from_dict(usage) for model, usage in data.items() if isinstance(usage, dict)}


def _trace(data: Any) -> dict[str, str] | None:
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("trace_id", "span_id")):
        return None
    return {"trace_id": data["trace_id"], "span_id": data["span_id"]}


def _first_number(*values: Any) -> float:
    """The first value that is a number (0.0 included); the last one is the fallback."""
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    raise ValueError("run head timestamps must be numbers")


_HEAD_FIELDS = frozenset(f.name for f in dataclasses.fields(RunHead))


@dataclass(init=False, slots=True)
class RunSnapshot:
    """A stored run: its id, its own entries and its :class:`RunHead`.

    The head's fields read through as attributes (``snap.turns`` is ``snap.head.turns``), and the
    constructor takes them flat as well: ``RunSnapshot("r1", entries, "agent", turns=2)``.
    """

    run_id: str
    entries: list[TranscriptEntry]
    head: RunHead = field(init=False)

    def __init__(
        self,
        run_id: str,
        entries: Sequence[TranscriptEntry],
        agent_name: str | None = None,
        *,
        head: RunHead | None = None,
        **head_fields: Any,
    ) -> None:
        unknown = set(head_fields) - _HEAD_FIELDS
        if unknown:
            raise TypeError(f"RunSnapshot got unexpected fields {sorted(unknown)}")
        if head is None:
            if agent_name is None:
                raise TypeError("RunSnapshot needs an agent_name (or head=)")
            head = RunHead(agent_name=agent_name, **head_fields)
        elif agent_name is not None or head_fields:
            # dataclasses.replace(snap, turns=3) lands here: the head is copied with the changes.
            changes = dict(head_fields)
            if agent_name is not None:
                changes["agent_name"] = agent_name
            head = dataclasses.replace(head, **changes)
        self.run_id = run_id
        self.entries = list(entries)
        self.head = head

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            """The head's fields, read through (``snap.status`` is ``snap.head.status``)."""
            ...

    @classmethod
    def from_parts(cls, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> RunSnapshot:
        """Assemble a snapshot from its stored parts."""
        return cls(run_id, entries, head=head)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {"run_id": self.run_id, "entries": [entry_to_dict(e) for e in self.entries], **self.head.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSnapshot:
        """Inverse of :meth:`to_dict`."""
        head = RunHead.from_dict(data)
        entries = [entry_from_dict(e, strict=False) for e in data.get("entries", [])]
        return cls.from_parts(str(data["run_id"]), entries, head)

    def to_json(self) -> str:
        """Compact JSON text."""
        return dumps(self.to_dict())

    @classmethod
    def from_json(cls, payload: str | bytes) -> RunSnapshot:
        """Parse :meth:`to_json` output."""
        return cls.from_dict(json.loads(payload))


def _read_through(name: str) -> property:
    def get(self: RunSnapshot) -> Any:
        return getattr(self.head, name)

    def put(self: RunSnapshot, value: Any) -> None:
        setattr(self.head, name, value)

    return property(get, put, doc=f"``head.{name}``")


def _expose_head_fields() -> None:
    # The head's fields stay stored once, in ``head``; they are listed as the snapshot's fields
    # too (read through), so ``dataclasses.fields``/``replace(snap, turns=3)`` see the flat shape
    # the snapshot always had. ``head`` itself is not an init field: ``replace`` rebuilds it.
    listed = RunSnapshot.__dataclass_fields__
    for head_field in dataclasses.fields(RunHead):
        setattr(RunSnapshot, head_field.name, _read_through(head_field.name))
        listed[head_field.name] = copy.copy(head_field)


_expose_head_fields()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One row of a run listing (bundled checkpointers' ``list_runs``), for inspection."""

    run_id: str
    agent_name: str
    status: RunStatus
    turns: int
    entries: int
    """How many entries the run has stored so far."""
    started_at: float
    updated_at: float
    damaged: str | None = None
    """``None``, or why this run's stored row cannot be read and what to do (a damaged row: the other
    fields then hold what the table still says, and ``status`` is ``failed`` when nothing does)."""


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that one worker drives a run: fenced writes carry it and fail once it is stale."""

    run_id: str
    owner: str
    token: int
    """Fencing token: strictly increases each time the run changes hands."""
    expires_at: float


@runtime_checkable
class Checkpointer(Protocol):
    """Where the run in flight is kept, keyed by the global ``run_id``."""

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Append a batch of new entries (possibly empty) and overwrite the head, atomically."""
        ...

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The stored snapshot, or ``None``."""
        ...

    async def delete(self, run_id: str) -> None:
        """Forget the run (no error when absent)."""
        ...


@runtime_checkable
class LeasingCheckpointer(Checkpointer, Protocol):
    """A checkpointer that can lease runs to one worker at a time and fence stale writers."""

    async def acquire_lease(self, run_id: str, *, owner: str, ttl: float) -> Lease:
        """Claim the run; raise :class:`~lovia.exceptions.RunBusy` while another live lease holds it."""
        ...

    async def renew_lease(self, lease: Lease, *, ttl: float) -> Lease:
        """Extend the lease; raise :class:`~lovia.exceptions.LeaseLostError` if it was taken over."""
        ...

    async def release_lease(self, lease: Lease) -> None:
        """Give the run up (no error when already lost)."""
        ...

    async def append_fenced(
        self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead, *, lease: Lease
    ) -> None:
        """``append`` that refuses (``LeaseLostError``) unless ``lease`` is still the current one."""
        ...


@dataclass(frozen=True, slots=True)
class CheckpointOptions:
    """How a run uses a checkpointer: ``CheckpointOptions(cp, run_id, ...)``.

    Args:
        checkpointer: the store.
        run_id: the global idempotency key of the run.
        if_run_exists: ``"resume"`` (default), ``"restart"``, ``"fail"`` or ``"resume_only"``.
        delete_on_success: delete the snapshot once the run is in the session.
        resume_from: a :class:`RunSnapshot` obtained elsewhere to rehydrate.
        lease_ttl: seconds; when set, the run is leased to this worker (needs a leasing store).
    """

    checkpointer: Checkpointer | None = None
    run_id: str | None = None
    if_run_exists: IfRunExists = "resume"
    delete_on_success: bool = False
    resume_from: RunSnapshot | None = None
    lease_ttl: float | None = None

    def __post_init__(self) -> None:
        if self.if_run_exists not in _POLICIES:
            raise UserError(
                f"unknown if_run_exists policy {self.if_run_exists!r}",
                hint=f"use one of {', '.join(repr(p) for p in _POLICIES)}",
            )
        if self.resume_from is not None and not isinstance(self.resume_from, RunSnapshot):
            raise UserError("resume_from must be a RunSnapshot", hint="load one with checkpointer.load(run_id)")
        if self.run_id is not None and (not isinstance(self.run_id, str) or not self.run_id):
            raise UserError("run_id must be a non-empty string", hint="generate one, e.g. uuid4().hex")
        if self.resume_from is None and (self.checkpointer is None or not self.run_id):
            raise UserError(
                "CheckpointOptions needs a checkpointer and a run_id (or resume_from=)",
                hint="CheckpointOptions(SQLiteCheckpointer('runs.db'), 'my-run-id')",
            )
        if self.resume_from is not None and self.run_id is not None and self.run_id != self.resume_from.run_id:
            raise UserError(
                f"run_id {self.run_id!r} does not match resume_from.run_id {self.resume_from.run_id!r}",
                hint="omit run_id or pass the snapshot's own id",
            )
        if self.delete_on_success and self.checkpointer is None:
            raise UserError(
                "delete_on_success needs a checkpointer", hint="pass the checkpointer the snapshot lives in"
            )
        if self.checkpointer is not None and not isinstance(self.checkpointer, Checkpointer):
            raise UserError(
                f"{type(self.checkpointer).__name__} is not a Checkpointer",
                hint="it needs async append(run_id, entries, head), load(run_id) and delete(run_id)",
            )
        if self.lease_ttl is not None:
            if not isinstance(self.lease_ttl, (int, float)) or self.lease_ttl <= 0:
                raise UserError("lease_ttl must be a positive number of seconds", hint="e.g. lease_ttl=30")
            if not isinstance(self.checkpointer, LeasingCheckpointer):
                raise UserError(
                    f"{type(self.checkpointer).__name__} does not support run leases",
                    hint="use SQLiteCheckpointer or PostgresCheckpointer, or drop lease_ttl",
                )

    @property
    def effective_run_id(self) -> str:
        """``run_id``, or the id of ``resume_from``."""
        if self.run_id:
            return self.run_id
        assert self.resume_from is not None
        return self.resume_from.run_id

    @property
    def resolved_run_id(self) -> str:
        """The run id these options name (same as :attr:`effective_run_id`)."""
        return self.effective_run_id
