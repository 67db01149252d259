"""Stateful property tests: every bundled session and checkpoint store against a plain reference model.

Hypothesis drives random sequences of operations (append, trim, rewind, clear, re-open; for
checkpointers: append batches, overwrite heads, delete, re-open) and after every step compares
what the store returns with a model made of Python lists and dicts. The model encodes the
contract of ``docs/sessions.md`` / ``docs/checkpoints.md`` (append-only, idempotent by run id,
trim and rewind) in its own terms: it borrows only the wording of the trim note
(``trim_marker``), never the stores' own trim/rewind planning.

Each machine instance owns a private event loop (the stores are async) and a fresh namespace:
a new SQLite file, or a new table prefix inside this test's throwaway PostgreSQL schema.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import itertools
import json
import os
import re
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from lovia.checkpointer import RunHead, RunSnapshot
from lovia.exceptions import StoreError
from lovia.messages import FilePart, ImagePart, TextPart, Usage
from lovia.session import Segment
from lovia.stores import InMemoryCheckpointer, InMemorySession, SQLiteCheckpointer, SQLiteSession
from lovia.stores._maintenance import trim_marker
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)

# tests/stores is not a package: load the shared PostgreSQL plumbing by path.
_spec = importlib.util.spec_from_file_location(
    "_lovia_pg_support_stateful", Path(__file__).parents[1] / "pg_support.py"
)
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)

T = TypeVar("T")

# Modest budgets: the whole file must stay well under a minute on two shared cores.
# LOVIA_STATEFUL_SCALE=N multiplies the example counts for a longer hunt.
_SCALE = max(1, int(os.environ.get("LOVIA_STATEFUL_SCALE", "1")))
LOCAL = settings(
    max_examples=25 * _SCALE,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
REMOTE = settings(LOCAL, max_examples=8 * _SCALE, stateful_step_count=12)

SESSION_IDS = ("u1", "u2", "ü-ß 会话 🚀", "")
# Most steps hit one busy session, so histories grow long enough to trim and rewind inside.
sessions = st.sampled_from(("u1", "u1", "u1", *SESSION_IDS[1:]))

# --------------------------------------------------------------------------- generators

_text = st.text(max_size=12)
_json_scalar = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10)
)
json_values = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=5,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
# Cheap to draw, so a machine's data budget goes into many steps rather than a few huge ones.
small_objects = st.builds(dict) | json_objects

# An output that already ends in a trim marker although nobody trimmed it: left alone forever.
_fake_trimmed = st.builds(lambda body, n: body + trim_marker(n), st.text(max_size=20), st.integers(1, 10_000))
_long_output = st.builds(lambda chunk, n: chunk * n, st.text(min_size=2, max_size=4), st.integers(60, 800))
outputs = st.one_of(st.text(max_size=30), _long_output, _long_output, _long_output, _fake_trimmed)

_b64 = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", min_size=1, max_size=16)
parts = st.one_of(
    st.builds(TextPart, _text),
    st.builds(ImagePart, url=st.just("https://example.test/a.png"), detail=st.sampled_from(["low", "high", "auto"])),
    st.builds(ImagePart, data=_b64, mime_type=st.just("image/png")),
    st.builds(FilePart, url=st.just("https://example.test/r.pdf"), filename=st.none() | _text),
    st.builds(FilePart, data=_b64, mime_type=st.just("application/pdf"), filename=st.none() | _text),
)
part_lists = st.lists(parts, min_size=1, max_size=3)

inputs = st.builds(InputEntry, role=st.sampled_from(["user", "user", "system"]), content=_text | part_lists)
texts = st.builds(AssistantTextEntry, _text, st.none() | st.just("msg_1"))
reasonings = st.builds(
    ReasoningEntry,
    _text,
    id=st.none() | st.just("rs_1"),
    provider=st.none() | st.just("anthropic"),
    metadata=small_objects,
)
_arguments = st.builds(lambda d: json.dumps(d, ensure_ascii=False), small_objects)
_tool_names = st.sampled_from(["search", "read_file", "transfer_to_billing", "wörk"])


@st.composite
def results_for(draw: st.DrawFn, call_id: str) -> ToolResultEntry:
    return ToolResultEntry(
        call_id=call_id,
        output=draw(outputs),
        raw=draw(st.none() | st.none() | json_values),
        is_error=draw(st.booleans()),
        parts=draw(st.none() | st.none() | part_lists),
    )


# Hypothesis leans towards the simplest value (False, 0): spell out the odds where that matters.
_rarely = st.sampled_from([False] * 7 + [True])


@st.composite
def runs(draw: st.DrawFn) -> list[TranscriptEntry]:
    """One finished run's own entries: tool-consistent (every call answered once, after the call)."""
    entries: list[TranscriptEntry] = []
    if draw(_rarely):
        return entries  # an empty run is a legal segment
    prefix = draw(st.sampled_from(["call_", "toolu_", "调用-"]))
    # Some OpenAI-compatible servers number calls per turn, so a later turn reuses "call_0".
    reuse_ids = draw(st.booleans())
    entries.append(draw(inputs))
    ids = itertools.count()
    for _turn in range(draw(st.sampled_from([1, 2, 3, 0]))):
        if reuse_ids:
            ids = itertools.count()
        if draw(st.booleans()):
            entries.append(draw(reasonings))
        if draw(st.booleans()):
            entries.append(draw(texts))
        calls = [
            ToolCallEntry(f"{prefix}{next(ids)}", draw(_tool_names), draw(_arguments))
            for _ in range(draw(st.sampled_from([1, 2, 0, 3])))
        ]
        entries += calls
        for index in draw(st.permutations(range(len(calls)))):  # results arrive in completion order
            entries.append(draw(results_for(calls[index].call_id)))
        if draw(_rarely):
            entries.append(draw(inputs))  # a mailbox injection between turns
    return entries


@st.composite
def loose_entries(draw: st.DrawFn) -> TranscriptEntry:
    """Any single entry: checkpoint batches hold runs in flight, dangling calls included."""
    call_id = draw(st.sampled_from(["c1", "c2", "c3"]))
    return draw(
        st.one_of(
            inputs,
            texts,
            reasonings,
            st.builds(ToolCallEntry, st.just(call_id), _tool_names, _arguments),
            results_for(call_id),
        )
    )


metas = (
    st.none()
    | small_objects
    | st.fixed_dictionaries(
        {
            "context_state": small_objects,
            "timing": st.fixed_dictionaries({"started_at": st.floats(1e9, 2e9), "finished_at": st.floats(1e9, 2e9)}),
        }
    )
)

_counts = st.integers(0, 10**6)
heads = st.builds(
    RunHead,
    agent_name=_text,
    usage=st.builds(Usage, _counts, _counts, _counts, _counts),
    turns=st.integers(0, 100),
    status=st.sampled_from(["running", "interrupted", "completed", "failed"]),
    output=json_values,
    error=st.none() | st.fixed_dictionaries({"type": _text, "message": _text}),
    last_input_tokens=st.none() | _counts,
    context_state=json_objects,
    pending_handoff=st.none() | _text,
    started_calls=st.lists(_text, max_size=3),
    # Realistic epoch seconds: RunHead.from_dict treats a falsy started_at as "missing".
    started_at=st.floats(1e9, 2e9),
    updated_at=st.floats(1e9, 2e9),
)

# --------------------------------------------------------------------------- backends


@dataclass
class Backend:
    """How to open a store of one kind; ``slot()`` names a fresh, empty namespace."""

    name: str
    durable: bool
    open_session: Callable[[str], Any]
    open_checkpointer: Callable[[str], Any]
    slot: Callable[[], str]
    nul_in_ids: bool = True  # PostgreSQL text cannot hold NUL: such an id is refused, with a hint saying so


def _memory() -> Backend:
    return Backend("memory", False, lambda _: InMemorySession(), lambda _: InMemoryCheckpointer(), lambda: "")


def _sqlite(directory: Path, *, wal: bool) -> Backend:
    counter = itertools.count()
    return Backend(
        "sqlite-wal" if wal else "sqlite",
        True,
        lambda path: SQLiteSession(path, wal=wal),
        lambda path: SQLiteCheckpointer(path, wal=wal),
        lambda: str(directory / f"m{next(counter)}_{uuid.uuid4().hex[:8]}.db"),
    )


def _postgres(schema: str) -> Backend:
    from lovia.stores import PostgresCheckpointer, PostgresSession

    counter = itertools.count()
    return Backend(
        "postgres",
        True,
        lambda prefix: PostgresSession(_pg.DSN, schema=schema, table_prefix=prefix, min_size=1, max_size=2),
        lambda prefix: PostgresCheckpointer(_pg.DSN, schema=schema, table_prefix=prefix, min_size=1, max_size=2),
        lambda: f"m{next(counter)}_{uuid.uuid4().hex[:8]}_",
        nul_in_ids=False,
    )


class _LoopMachine(RuleBasedStateMachine):
    """A machine with its own event loop and one or more open handles on one namespace.

    Durable backends may re-open the namespace: the old handle is closed first, or kept open
    beside the new one (two connections on one file or schema), and later steps may go back to
    any open handle. A neighbour store of the other kind shares the namespace throughout and
    must come out of the run untouched. Everything is closed in teardown, then the loop.
    """

    backend: ClassVar[Backend]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.slot = self.backend.slot()
        self.handles: list[Any] = [self.open()]
        self.store: Any = self.handles[0]
        self.neighbour: Any = None
        if self.backend.durable:
            self.neighbour = self.open_neighbour()
            self.run(self.write_neighbour())

    def open(self) -> Any:
        raise NotImplementedError

    def open_neighbour(self) -> Any:
        raise NotImplementedError

    async def write_neighbour(self) -> None:
        raise NotImplementedError

    async def check_neighbour(self) -> None:
        raise NotImplementedError

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @precondition(lambda self: self.backend.durable)
    @rule(close_old=st.booleans())
    def reopen(self, close_old: bool) -> None:
        if close_old:
            self.handles.remove(self.store)
            self.run(self.store.close())
        self.store = self.open()
        self.handles.append(self.store)

    @precondition(lambda self: len(self.handles) > 1)
    @rule(data=st.data())
    def switch_handle(self, data: st.DataObject) -> None:
        self.store = data.draw(st.sampled_from(self.handles), label="handle")

    def teardown(self) -> None:
        try:
            if self.neighbour is not None:
                self.run(self.check_neighbour())
        finally:
            try:
                for handle in [*self.handles, self.neighbour]:
                    close = getattr(handle, "close", None)
                    if close is not None:
                        self.run(close())
            finally:
                self.loop.close()


NEIGHBOUR = [InputEntry("user", "a neighbour in the same file")]


# --------------------------------------------------------------------------- session model


@dataclass
class MSeg:
    run_id: str
    entries: list[TranscriptEntry]
    meta: dict[str, Any] | None
    order: int  # global append order: list_sessions sorts sessions by their newest run


# An output ending in exactly the note a trim writes counts as trimmed already.
_MARK_TAIL = re.compile(re.escape(trim_marker(918273)).replace("918273", r"\d+") + r"\Z")


def model_trim(entry: TranscriptEntry, keep_chars: int) -> TranscriptEntry | None:
    """The trimmed form of ``entry``, or ``None`` when it stays as it is."""
    if not isinstance(entry, ToolResultEntry) or _MARK_TAIL.search(entry.output):
        return None
    surplus = len(entry.output) - keep_chars
    if surplus <= 0:
        return None
    shorter = entry.output[:keep_chars] + trim_marker(surplus)
    if len(shorter) >= len(entry.output):
        return None  # the note would not save any space
    return replace(entry, output=shorter, raw=None)


def model_rewind(segs: list[MSeg], keep: int) -> tuple[list[MSeg], int]:
    """The session after keeping the first ``keep`` entries of the flat view, and how many went."""
    total = sum(len(s.entries) for s in segs)
    if keep >= total:
        return segs, 0
    kept: list[MSeg] = []
    count = 0
    for seg in segs:
        if count + len(seg.entries) <= keep:
            kept.append(seg)
            count += len(seg.entries)
            continue
        head = seg.entries[: keep - count]
        # A call stays only if a kept result answers it; a result answers the oldest open call
        # with its id (ids may be reused by later turns).
        waiting: dict[str, list[int]] = {}
        answered: set[int] = set()
        for i, e in enumerate(head):
            if isinstance(e, ToolCallEntry):
                waiting.setdefault(e.call_id, []).append(i)
            elif isinstance(e, ToolResultEntry):
                assert waiting.get(e.call_id), "generated runs answer only open calls"
                answered.update((waiting[e.call_id].pop(0), i))
        head = [e for i, e in enumerate(head) if i in answered or not isinstance(e, ToolCallEntry)]
        if head:
            kept.append(MSeg(seg.run_id, head, None, seg.order))  # a cut run loses its meta
            count += len(head)
        break
    return kept, total - count


def as_json(value: Any) -> str:
    """Exact JSON text: catches drift that ``==`` forgives (1 vs 1.0 vs True, key order)."""
    if isinstance(value, list):
        return json.dumps([entry_to_dict(e) for e in value], ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def assert_tool_consistent(entries: Sequence[TranscriptEntry], where: str) -> None:
    """Each call is answered by exactly one later result, and each result answers an open call.

    An id may come back in a later turn once its earlier call was answered.
    """
    open_calls: set[str] = set()
    for e in entries:
        if isinstance(e, ToolCallEntry):
            assert e.call_id not in open_calls, f"{where}: call {e.call_id!r} opened twice"
            open_calls.add(e.call_id)
        elif isinstance(e, ToolResultEntry):
            assert e.call_id in open_calls, f"{where}: result {e.call_id!r} without an open call"
            open_calls.discard(e.call_id)
    assert not open_calls, f"{where}: dangling calls {sorted(open_calls)}"


def _rewind_kind(total: int, keep: int, boundaries: list[int], kept: int) -> str:
    if not total:
        return "empty session"
    if keep >= total:
        return "at or past the end"
    if keep == 0:
        return "to 0"
    if keep in boundaries:
        return "on a boundary"
    return "inside a run" if kept == keep else "inside a run, dangling call dropped"


class SessionMachine(_LoopMachine):
    """Random session histories against the list-of-segments model."""

    def __init__(self) -> None:
        self.model: dict[str, list[MSeg]] = {sid: [] for sid in SESSION_IDS}
        self.order = itertools.count()
        super().__init__()

    def open(self) -> Any:
        return self.backend.open_session(self.slot)

    def open_neighbour(self) -> Any:
        return self.backend.open_checkpointer(self.slot)

    async def write_neighbour(self) -> None:
        await self.neighbour.append("neighbour", NEIGHBOUR, RunHead(agent_name="n", started_at=1e9, updated_at=1e9))

    async def check_neighbour(self) -> None:
        snap = await self.neighbour.load("neighbour")
        assert snap is not None and snap.entries == NEIGHBOUR

    # ------------------------------------------------------------------ rules

    @initialize(history=st.lists(st.tuples(runs(), metas), min_size=1, max_size=4))
    def seed(self, history: list[tuple[list[TranscriptEntry], dict[str, Any] | None]]) -> None:
        for entries, meta in history:
            run_id = self.run(self.store.append("u1", entries, meta=meta))
            self.model["u1"].append(MSeg(run_id, list(entries), meta, next(self.order)))

    @rule(session_id=sessions, entries=runs(), meta=metas, data=st.data())
    def append(
        self, session_id: str, entries: list[TranscriptEntry], meta: dict[str, Any] | None, data: st.DataObject
    ) -> None:
        own = [s.run_id for s in self.model[session_id]]
        elsewhere = [s.run_id for sid, segs in self.model.items() if sid != session_id for s in segs]
        choices: list[st.SearchStrategy[str | None]] = [
            st.none(),
            st.text(max_size=10),
            st.sampled_from(["", "run\x00nul", "🚀 ß"]),
        ]
        if own:
            choices.append(st.sampled_from(own))  # a replayed run: must change nothing
        if elsewhere:
            choices.append(st.sampled_from(elsewhere))  # run ids are scoped by session
        run_id = data.draw(st.one_of(choices), label="run_id")
        if run_id is not None and "\x00" in run_id and not self.backend.nul_in_ids:
            with pytest.raises(StoreError) as refused:
                self.run(self.store.append(session_id, entries, run_id=run_id, meta=meta))
            assert "NUL" in (refused.value.hint or "")
            event("append: NUL id refused")
            return

        returned = self.run(self.store.append(session_id, entries, run_id=run_id, meta=meta))

        if run_id is not None:
            assert returned == run_id
        else:
            assert isinstance(returned, str) and returned and returned not in own
        event(
            "append: replayed run id"
            if returned in own
            else f"append: new ({'generated' if run_id is None else 'given'} id)"
        )
        if returned not in own:
            self.model[session_id].append(MSeg(returned, copy.deepcopy(entries), copy.deepcopy(meta), next(self.order)))
        # What the caller passed in is theirs again: changing it must not reach the store.
        entries.append(InputEntry("user", "added after append"))
        if meta is not None:
            meta["added after append"] = True

    def _some_session(self, data: st.DataObject) -> str:
        """Mostly a session with history (maintenance of an empty one is checked now and then)."""
        busy = [sid for sid, segs in self.model.items() if segs]
        return data.draw(st.sampled_from(busy) if busy and not data.draw(_rarely) else sessions, label="session_id")

    @precondition(lambda self: any(self.model.values()))
    @rule(
        keep_chars=st.sampled_from([0, 1, 10, 100, 400]) | st.integers(0, 1500),
        keep_runs=st.sampled_from([0, 1, 1, 2, 5]),
        data=st.data(),
    )
    def trim_tool_results(self, keep_chars: int, keep_runs: int, data: st.DataObject) -> None:
        session_id = self._some_session(data)
        before = self.run(self.store.segments(session_id))
        segs = self.model[session_id]
        expected = 0
        for seg in segs[: max(len(segs) - keep_runs, 0)]:
            for i, entry in enumerate(seg.entries):
                trimmed = model_trim(entry, keep_chars)
                if trimmed is not None:
                    seg.entries[i] = trimmed
                    expected += 1

        got = self.run(self.store.trim_tool_results(session_id, keep_chars=keep_chars, keep_runs=keep_runs))
        assert got == expected
        event(f"trim: {'some' if got else 'none'} trimmed")

        after = self.run(self.store.segments(session_id))
        assert [s.run_id for s in after] == [s.run_id for s in before]
        for old, new in zip(before, after, strict=True):
            assert old.meta == new.meta
            assert len(old.entries) == len(new.entries)
            for a, b in zip(old.entries, new.entries, strict=True):
                assert type(a) is type(b)
                if isinstance(a, ToolResultEntry):
                    assert isinstance(b, ToolResultEntry)
                    assert (a.call_id, a.is_error, a.parts) == (b.call_id, b.is_error, b.parts)
                    if a.output != b.output:
                        assert b.output.startswith(a.output[:keep_chars]) and len(b.output) < len(a.output)
                        assert str(len(a.output) - keep_chars) in b.output[keep_chars:]
                        assert b.raw is None
                else:
                    assert a == b

        # Idempotent: the same call again trims nothing and changes nothing.
        assert self.run(self.store.trim_tool_results(session_id, keep_chars=keep_chars, keep_runs=keep_runs)) == 0
        assert self.run(self.store.segments(session_id)) == after

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        session_id = self._some_session(data)
        segs = self.model[session_id]
        total = sum(len(s.entries) for s in segs)
        boundaries = list(itertools.accumulate(len(s.entries) for s in segs))
        flat = [e for s in segs for e in s.entries]
        after_calls = [i + 1 for i, e in enumerate(flat) if isinstance(e, ToolCallEntry)]
        keep = data.draw(
            st.one_of(
                st.integers(min(1, total), total),  # anywhere, usually inside a run
                st.sampled_from(after_calls or [0]),  # between a call and its result
                st.integers(total // 2, total),
                st.sampled_from(boundaries or [0]),  # on a run boundary
                st.integers(total, total + 5),  # at or past the end: no-op
                st.just(0),
            ),
            label="keep_entries",
        )
        original = {s.run_id: len(s.entries) for s in segs}
        self.model[session_id], expected = model_rewind(segs, keep)

        removed = self.run(self.store.rewind(session_id, keep_entries=keep))
        assert removed == expected
        event(f"rewind: {_rewind_kind(total, keep, boundaries, total - removed)}")
        stored = self.run(self.store.segments(session_id))
        assert sum(len(s.entries) for s in stored) == total - removed
        if stored and len(stored[-1].entries) < original[stored[-1].run_id]:
            assert stored[-1].meta is None, "a run cut by rewind keeps no meta"

    @rule(session_id=sessions)
    def clear(self, session_id: str) -> None:
        self.run(self.store.clear(session_id))
        self.model[session_id] = []

    @rule(session_id=sessions, which=st.sampled_from(["chars", "runs", "entries"]))
    def negative_arguments(self, session_id: str, which: str) -> None:
        with pytest.raises(ValueError):
            if which == "entries":
                self.run(self.store.rewind(session_id, keep_entries=-1))
            elif which == "chars":
                self.run(self.store.trim_tool_results(session_id, keep_chars=-1))
            else:
                self.run(self.store.trim_tool_results(session_id, keep_runs=-2))

    # ------------------------------------------------------------------ invariants

    @invariant()
    def stores_equal_model(self) -> None:
        for sid, segs in self.model.items():
            stored = self.run(self.store.segments(sid))
            assert [s.run_id for s in stored] == [s.run_id for s in segs], f"run order of {sid!r}"
            assert len({s.run_id for s in stored}) == len(stored), f"duplicate run id in {sid!r}"
            for seg, want in zip(stored, segs, strict=True):
                assert isinstance(seg, Segment)
                assert seg.entries == want.entries, f"entries of {sid!r}/{seg.run_id!r}"
                assert as_json(seg.entries) == as_json(want.entries), f"entries of {sid!r}/{seg.run_id!r} drifted"
                assert seg.meta == want.meta and as_json(seg.meta) == as_json(want.meta), (
                    f"meta of {sid!r}/{seg.run_id!r}"
                )
                assert_tool_consistent(seg.entries, f"{sid!r}/{seg.run_id!r}")
                # What a read returns is the caller's: changing it must not reach the store.
                seg.entries.clear()
                if seg.meta is not None:
                    seg.meta["changed by a reader"] = 1
            flat = [e for s in segs for e in s.entries]
            loaded = self.run(self.store.load(sid))
            assert loaded == flat and as_json(loaded) == as_json(flat), f"load of {sid!r}"
            loaded.clear()

    @invariant()
    def listing_matches(self) -> None:
        infos = self.run(self.store.list_sessions(limit=100))
        live = {sid: segs for sid, segs in self.model.items() if segs}
        assert {i.session_id for i in infos} == set(live)
        for info in infos:
            segs = live[info.session_id]
            assert info.runs == len(segs)
            assert info.entries == sum(len(s.entries) for s in segs)
            assert info.created_at <= info.updated_at
        newest_first = sorted(live, key=lambda sid: max(s.order for s in live[sid]), reverse=True)
        assert [i.session_id for i in infos] == newest_first
        pages = [self.run(self.store.list_sessions(limit=2, offset=k)) for k in range(0, len(infos) + 1, 2)]
        assert [i for page in pages for i in page] == infos
        # The substring filter (the empty string matches every id).
        for query in ("u", "会话", ""):
            found = self.run(self.store.list_sessions(limit=100, query=query))
            assert [i.session_id for i in found] == [sid for sid in newest_first if query in sid]


# --------------------------------------------------------------------------- checkpoint model


@dataclass
class MRun:
    batches: list[list[TranscriptEntry]] = field(default_factory=list)
    head: RunHead | None = None

    @property
    def entries(self) -> list[TranscriptEntry]:
        return [e for batch in self.batches for e in batch]


RUN_IDS = ("r1", "r2", "run ü 🚀", "job/42")


class CheckpointMachine(_LoopMachine):
    """Random checkpoint write sequences against the batches-plus-head model."""

    def __init__(self) -> None:
        self.model: dict[str, MRun] = {}
        super().__init__()

    def open(self) -> Any:
        return self.backend.open_checkpointer(self.slot)

    def open_neighbour(self) -> Any:
        return self.backend.open_session(self.slot)

    async def write_neighbour(self) -> None:
        await self.neighbour.append("neighbour", NEIGHBOUR, run_id="n", meta={"k": 1})

    async def check_neighbour(self) -> None:
        assert await self.neighbour.segments("neighbour") == [Segment("n", NEIGHBOUR, {"k": 1})]

    @rule(run_id=st.sampled_from(RUN_IDS), batch=st.lists(loose_entries(), max_size=4), head=heads)
    def append(self, run_id: str, batch: list[TranscriptEntry], head: RunHead) -> None:
        self.run(self.store.append(run_id, batch, head))
        run = self.model.setdefault(run_id, MRun())
        if batch:
            run.batches.append(list(batch))
        run.head = copy.deepcopy(head)
        # The caller's head and batch are theirs again: changing them must not reach the store.
        head.context_state["changed after append"] = True
        head.turns += 1
        batch.append(InputEntry("user", "added after append"))

    @rule(run_id=st.sampled_from(RUN_IDS), head=heads)
    def overwrite_head(self, run_id: str, head: RunHead) -> None:
        """An empty batch: only the head changes."""
        self.append(run_id, [], head)

    @rule(run_id=st.sampled_from(RUN_IDS))
    def delete(self, run_id: str) -> None:
        self.run(self.store.delete(run_id))
        self.model.pop(run_id, None)

    @invariant()
    def snapshots_equal_model(self) -> None:
        for run_id in RUN_IDS:
            snap = self.run(self.store.load(run_id))
            want = self.model.get(run_id)
            if want is None:
                assert snap is None, f"{run_id!r} should be gone"
                continue
            assert isinstance(snap, RunSnapshot)
            assert snap.run_id == run_id
            assert snap.entries == want.entries, f"entries of {run_id!r}"
            assert as_json(snap.entries) == as_json(want.entries), f"entries of {run_id!r} drifted"
            assert snap.head == want.head, f"head of {run_id!r}"
            assert snap.head.to_json() == want.head.to_json(), f"head of {run_id!r} drifted"
            assert RunSnapshot.from_json(snap.to_json()) == snap
            snap.entries.clear()
            snap.context_state["changed by a reader"] = 1

    @invariant()
    def listing_matches(self) -> None:
        infos = self.run(self.store.list_runs(limit=100))
        assert {i.run_id for i in infos} == set(self.model)
        for info in infos:
            run = self.model[info.run_id]
            assert run.head is not None
            assert (info.status, info.turns, info.agent_name) == (run.head.status, run.head.turns, run.head.agent_name)
            assert info.entries == len(run.entries)
            assert info.updated_at == run.head.updated_at
        stamps = [i.updated_at for i in infos]
        assert stamps == sorted(stamps, reverse=True), "most recently updated first"
        pages = [self.run(self.store.list_runs(limit=2, offset=k)) for k in range(0, len(infos) + 1, 2)]
        assert [i for page in pages for i in page] == infos
        for status in ("running", "completed"):
            found = self.run(self.store.list_runs(status=status, limit=100))  # type: ignore[arg-type]
            assert {i.run_id for i in found} == {
                rid for rid, r in self.model.items() if r.head and r.head.status == status
            }


# --------------------------------------------------------------------------- the tests


def _machine(base: type[_LoopMachine], backend: Backend) -> type[_LoopMachine]:
    return type(f"{base.__name__}_{backend.name.replace('-', '_')}", (base,), {"backend": backend})


@pytest.fixture
def pg_schema() -> Iterator[str]:
    schema = _pg.new_schema("st")
    yield schema
    _pg.drop_schema(schema)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite-wal"])
def test_session_stores_match_model(kind: str, tmp_path: Path) -> None:
    backend = _memory() if kind == "memory" else _sqlite(tmp_path, wal=kind == "sqlite-wal")
    run_state_machine_as_test(_machine(SessionMachine, backend), settings=LOCAL)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite-wal"])
def test_checkpointers_match_model(kind: str, tmp_path: Path) -> None:
    backend = _memory() if kind == "memory" else _sqlite(tmp_path, wal=kind == "sqlite-wal")
    run_state_machine_as_test(_machine(CheckpointMachine, backend), settings=LOCAL)


@pytest.mark.postgres
@_pg.requires_pg
def test_postgres_session_matches_model(pg_schema: str) -> None:
    run_state_machine_as_test(_machine(SessionMachine, _postgres(pg_schema)), settings=REMOTE)


@pytest.mark.postgres
@_pg.requires_pg
def test_postgres_checkpointer_matches_model(pg_schema: str) -> None:
    run_state_machine_as_test(_machine(CheckpointMachine, _postgres(pg_schema)), settings=REMOTE)


@pytest.mark.postgres
@_pg.requires_pg
def test_postgres_refuses_nul_in_ids_with_a_hint_that_says_so(pg_schema: str) -> None:
    """Found by the session machine: the refusal used to blame the server, DSN or credentials."""
    backend = _postgres(pg_schema)
    slot = backend.slot()
    loop = asyncio.new_event_loop()
    session, checkpointer = backend.open_session(slot), backend.open_checkpointer(slot)
    try:
        with pytest.raises(StoreError) as refused:
            loop.run_until_complete(session.append("u1", NEIGHBOUR, run_id="a\x00b"))
        assert "NUL" in (refused.value.hint or "")
        with pytest.raises(StoreError) as refused:
            loop.run_until_complete(checkpointer.append("a\x00b", NEIGHBOUR, RunHead(agent_name="a")))
        assert "NUL" in (refused.value.hint or "")
        # NUL inside entries and meta is fine: they travel as JSON, where it is escaped.
        loop.run_until_complete(
            session.append("u1", [InputEntry("user", "a\x00b")], run_id="r", meta={"k\x00": "\x00"})
        )
        assert loop.run_until_complete(session.segments("u1")) == [
            Segment("r", [InputEntry("user", "a\x00b")], {"k\x00": "\x00"})
        ]
    finally:
        loop.run_until_complete(session.close())
        loop.run_until_complete(checkpointer.close())
        loop.close()
