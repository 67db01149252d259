"""The incremental history cache stays correct across every way a session can change.

A store that already served a session keeps what it decoded and, on the next load, reads only
what changed (see ``lovia/stores/_history.py``). Here another real process appends, rewinds,
trims or clears the same session (SQLite file and PostgreSQL), a SIGKILLed writer leaves no
half-counted change, every counter is shown to share its change's transaction, and a hypothesis
state machine compares cached loads with fresh ones after random interleavings of two writers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from lovia.exceptions import StoreError
from lovia.stores import PostgresSession, SQLiteSession
from lovia.stores._history import history_of

HERE = Path(__file__).parent
CHILD = HERE / "history_child.py"

_spec = importlib.util.spec_from_file_location("_lovia_pg_support_hist", HERE.parent / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)

sys.path.insert(0, str(HERE))
from history_child import run_entries  # noqa: E402

sys.path.remove(str(HERE))


class Backend:
    """Where the session lives, how to open a store on it here, and how to name it to a child."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind, self.target = kind, target
        self._children: dict[str, subprocess.Popen[str]] = {}

    def open(self) -> Any:
        if self.kind == "sqlite":
            return SQLiteSession(self.target)
        dsn, schema = self.target.split("|")
        return PostgresSession(dsn, schema=schema)

    def child(self, sid: str, op: str, arg: object = None) -> None:
        """Have another process make the change (one process per session, kept for later changes)."""
        proc = self._children.get(sid)
        if proc is None:
            argv = [sys.executable, str(CHILD), self.kind, self.target, sid, "serve"]
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self._children[sid] = proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{op} {'' if arg is None else arg}\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ok", f"the child failed to {op} {arg}"

    def stop_children(self) -> None:
        for proc in self._children.values():
            proc.communicate(timeout=30)  # EOF on stdin: it closes its store and exits
            assert proc.returncode == 0
        self._children.clear()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, _pg.requires_pg])])
def backend(request, tmp_path) -> Iterator[Backend]:
    if request.param == "sqlite":
        chosen = Backend("sqlite", str(tmp_path / "shared.db"))
        yield chosen
        chosen.stop_children()
        return
    schema = _pg.new_schema("hist")
    chosen = Backend("postgres", f"{_pg.DSN}|{schema}")
    yield chosen
    chosen.stop_children()
    _pg.drop_schema(schema)


async def _fresh(backend: Backend, sid: str) -> tuple[list, list]:
    async with backend.open() as store:
        return await store.load(sid), await store.segments(sid)


async def _assert_cached_matches_fresh(store: Any, backend: Backend, sid: str) -> None:
    entries, segments = await _fresh(backend, sid)
    assert await store.load(sid) == entries
    assert await store.segments(sid) == segments
    history, meta = await history_of(store, sid)
    assert history == entries and meta == (segments[-1].meta if segments else None)


async def test_changes_by_another_process_reach_a_cached_history(backend):
    sid = "shared"
    async with backend.open() as store:
        for n in range(3):
            await store.append(sid, run_entries(f"p{n}"), run_id=f"p{n}", meta={"n": n})
        await _assert_cached_matches_fresh(store, backend, sid)  # warm the cache
        steps = [
            ("append", "c1"),
            ("append", "c2"),
            ("trim", None),
            ("append", "c3"),
            ("rewind", 9),  # lands inside a run: truncated, meta dropped
            ("append", "c4"),
            ("rewind", 100),  # past the end: a no-op
            ("clear", None),
            ("append", "c5"),
        ]
        for op, arg in steps:
            before = await store.load(sid)
            backend.child(sid, op, arg)
            await _assert_cached_matches_fresh(store, backend, sid)
            if op != "rewind" or arg != 100:
                assert await store.load(sid) != before, f"{op} {arg} changed nothing visible"
            # And this process's own append right after a foreign change extends the right state.
            await store.append(sid, run_entries(f"own-{op}-{arg}"), run_id=f"own-{op}-{arg}")
            await _assert_cached_matches_fresh(store, backend, sid)


async def test_own_maintenance_and_foreign_appends_interleave(backend):
    sid = "mixed"
    async with backend.open() as store:
        await store.append(sid, run_entries("a"), run_id="a")
        await store.load(sid)
        backend.child(sid, "append", "b")
        assert await store.rewind(sid, keep_entries=6) == 3  # the call left dangling at the cut goes too
        await _assert_cached_matches_fresh(store, backend, sid)
        backend.child(sid, "append", "c")
        assert await store.trim_tool_results(sid, keep_chars=5, keep_runs=1) >= 1
        await _assert_cached_matches_fresh(store, backend, sid)
        await store.clear(sid)
        backend.child(sid, "append", "d")
        await _assert_cached_matches_fresh(store, backend, sid)
        assert [s.run_id for s in await store.segments(sid)] == ["d"]


async def test_a_sigkilled_writer_never_leaves_a_change_uncounted(backend):
    sid = "killed"
    async with backend.open() as store:
        await store.append(sid, run_entries("first"), run_id="first")
        await store.load(sid)
        argv = [sys.executable, str(CHILD), backend.kind, backend.target, sid, "append_forever"]
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            for _ in range(3):  # some appends committed (the cache follows them); then kill it mid-stream
                assert child.stdout.readline().strip()
                seen = await store.load(sid)
                assert seen == (await _fresh(backend, sid))[0][: len(seen)]
            time.sleep(0.05)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.communicate(timeout=30)  # reaps it and closes the pipes
        await _assert_cached_matches_fresh(store, backend, sid)
        await store.append(sid, run_entries("after"), run_id="after")
        await _assert_cached_matches_fresh(store, backend, sid)


async def test_meta_of_this_process_appends_is_the_stored_meta_and_never_shared(backend):
    """The cache keeps a run this process appended with its meta as stored (decoded only when
    asked for): what comes back equals what a fresh store reads (tuples as lists, lone surrogates
    replaced) and is the caller's own: mutating it changes no later answer."""
    sid = "meta"
    meta = {"tags": ("a", "b"), "note\ud800": "x\udc00y", "n": {"deep": [1, 2.5, None]}}
    async with backend.open() as store:
        assert await store.load(sid) == []  # cached while empty: the appends below extend the cache
        await store.append(sid, run_entries("a"), run_id="a", meta=meta)
        await store.append(sid, run_entries("b"), run_id="b")
        stored = {"tags": ["a", "b"], "note\ufffd": "x\ufffdy", "n": {"deep": [1, 2.5, None]}}
        segments = await store.segments(sid)
        assert [s.meta for s in segments] == [stored, None]
        segments[0].meta["n"]["deep"].append("mutated")
        _, last = await history_of(store, sid)
        assert last is None
        await store.append(sid, run_entries("c"), run_id="c", meta={"k": [1]})
        _, last = await history_of(store, sid)
        assert last == {"k": [1]}
        last["k"].append(2)
        assert [s.meta for s in await store.segments(sid)] == [stored, None, {"k": [1]}]
        await _assert_cached_matches_fresh(store, backend, sid)


async def test_sqlite_appends_are_their_own_counter_and_maintenance_bumps_in_its_transaction(tmp_path):
    """In SQLite an append is counted by its own row (the session's largest id), so it touches no
    other table; each maintenance call bumps the epoch in its own transaction: make that bump
    fail and the change it would have counted must not be stored either."""
    path = tmp_path / "t.db"
    async with SQLiteSession(path) as store:
        await store.append("s", run_entries("a"), run_id="a")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM session_heads").fetchone() == (0,)  # never maintained
        for event in ("INSERT", "UPDATE"):
            conn.execute(
                f"CREATE TRIGGER no_bump_{event} BEFORE {event} ON session_heads BEGIN SELECT RAISE(ABORT, 'no'); END"
            )
    async with SQLiteSession(path) as store, SQLiteSession(path) as other:
        assert await other.load("s") == run_entries("a")  # cached by the other store
        await store.append("s", run_entries("b"), run_id="b")  # no head write: the trigger never fires
        before = run_entries("a") + run_entries("b")
        assert await other.load("s") == before  # the new largest id told the other store
        for change in (
            store.rewind("s", keep_entries=0),
            store.trim_tool_results("s", keep_chars=1, keep_runs=0),
            store.clear("s"),
        ):
            with pytest.raises(StoreError):
                await change
        assert await store.load("s") == before and await other.load("s") == before
    async with SQLiteSession(path) as fresh:
        assert await fresh.load("s") == before


async def test_sqlite_rows_removed_by_hand_are_noticed(tmp_path):
    """Deleting the newest row outside lovia lowers the largest id: the cache reads the session again."""
    path = tmp_path / "h.db"
    async with SQLiteSession(path) as store:
        for tag in ("a", "b", "c"):
            await store.append("s", run_entries(tag), run_id=tag)
        assert await store.load("s") == run_entries("a") + run_entries("b") + run_entries("c")
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM session_runs WHERE run_id = 'c'")
        assert await store.load("s") == run_entries("a") + run_entries("b")


@pytest.mark.postgres
@_pg.requires_pg
async def test_the_head_bump_shares_the_appends_statement_in_postgres():
    import psycopg

    schema = _pg.new_schema("histtx")
    try:
        async with PostgresSession(_pg.DSN, schema=schema) as store:
            await store.append("s", run_entries("a"), run_id="a")
            with psycopg.connect(_pg.DSN, autocommit=True, options=f"-c search_path={schema}") as conn:
                conn.execute(
                    "CREATE FUNCTION no_bump() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'no'; END $$"
                )
                conn.execute(
                    "CREATE TRIGGER no_bump BEFORE UPDATE ON session_heads FOR EACH ROW EXECUTE FUNCTION no_bump()"
                )
            before = await store.load("s")
            for change in (
                store.append("s", run_entries("b"), run_id="b"),
                store.rewind("s", keep_entries=0),
                store.clear("s"),
            ):
                with pytest.raises(StoreError):
                    await change
        async with PostgresSession(_pg.DSN, schema=schema) as fresh:
            assert await fresh.load("s") == before
    finally:
        _pg.drop_schema(schema)


# ---------------------------------------------------------------------------- state machine

_tags = st.text(alphabet="abcxyz", min_size=1, max_size=4)


def _meta(tag: str) -> dict[str, Any]:
    # What the store keeps differs from the dict passed in: a tuple is stored as a list, a lone
    # surrogate as U+FFFD; cached and fresh views must both show the stored form.
    return {"t": tag, "pair": (tag, 1.5), "odd\udc80": "x\ud800", "at": {"started_at": 1.0}}


class CachedVersusFresh(RuleBasedStateMachine):
    """Two stores on one database (each with its own cache, as two processes would have) change
    two sessions at random; after every step each cached view must equal a fresh store's."""

    backend: Backend

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.stores = [self.backend.open(), self.backend.open()]
        self.counter = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @rule(who=st.integers(0, 1), sid=st.sampled_from(["s1", "s2"]), tag=_tags, meta=st.booleans())
    def append(self, who: int, sid: str, tag: str, meta: bool) -> None:
        self.counter += 1
        rid = f"{tag}-{self.counter}"
        self.run(self.stores[who].append(sid, run_entries(rid), run_id=rid, meta=_meta(tag) if meta else None))

    @rule(who=st.integers(0, 1), sid=st.sampled_from(["s1", "s2"]), again=st.integers(0, 30))
    def append_again(self, who: int, sid: str, again: int) -> None:
        rid = f"x-{again % max(self.counter, 1)}"  # often an id already stored: a no-op
        self.run(self.stores[who].append(sid, run_entries(rid), run_id=rid))

    @rule(who=st.integers(0, 1), sid=st.sampled_from(["s1", "s2"]), keep=st.integers(0, 40))
    def rewind(self, who: int, sid: str, keep: int) -> None:
        self.run(self.stores[who].rewind(sid, keep_entries=keep))

    @rule(who=st.integers(0, 1), sid=st.sampled_from(["s1", "s2"]), runs=st.integers(0, 2))
    def trim(self, who: int, sid: str, runs: int) -> None:
        self.run(self.stores[who].trim_tool_results(sid, keep_chars=30, keep_runs=runs))

    @rule(who=st.integers(0, 1), sid=st.sampled_from(["s1", "s2"]))
    def clear(self, who: int, sid: str) -> None:
        self.run(self.stores[who].clear(sid))

    @rule(who=st.integers(0, 1), sid=st.sampled_from(["s1", "s2"]))
    def read(self, who: int, sid: str) -> None:  # warms (or refreshes) that store's cache
        self.run(self.stores[who].load(sid))

    @invariant()
    def cached_equals_fresh(self) -> None:
        for sid in ("s1", "s2"):
            entries, segments = self.run(_fresh(self.backend, sid))
            for store in self.stores:
                assert self.run(store.load(sid)) == entries
                assert self.run(store.segments(sid)) == segments
                assert self.run(history_of(store, sid)) == (entries, segments[-1].meta if segments else None)

    def teardown(self) -> None:
        try:
            for store in self.stores:
                self.run(store.close())
        finally:
            self.loop.close()


# LOVIA_STATEFUL_SCALE=10 runs ten times as many examples (the long version, run before a release).
_SCALE = max(1, int(os.environ.get("LOVIA_STATEFUL_SCALE", "1")))
MACHINE = settings(
    max_examples=15 * _SCALE, stateful_step_count=15, deadline=None, suppress_health_check=list(HealthCheck)
)


def test_cached_loads_equal_fresh_ones_sqlite(tmp_path):
    counter = iter(range(10**6))

    class Machine(CachedVersusFresh):
        def __init__(self) -> None:
            self.backend = Backend("sqlite", str(tmp_path / f"m{next(counter)}.db"))
            super().__init__()

    run_state_machine_as_test(Machine, settings=MACHINE)


@pytest.mark.postgres
@_pg.requires_pg
def test_cached_loads_equal_fresh_ones_postgres():
    schemas: list[str] = []

    class Machine(CachedVersusFresh):
        def __init__(self) -> None:
            schemas.append(_pg.new_schema("histsm"))
            self.backend = Backend("postgres", f"{_pg.DSN}|{schemas[-1]}")
            super().__init__()

    try:
        run_state_machine_as_test(Machine, settings=settings(MACHINE, max_examples=4, stateful_step_count=12))
    finally:
        for schema in schemas:
            _pg.drop_schema(schema)
