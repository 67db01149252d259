"""What only the SQLite stores do: schema versions, corrupt rows, threads, processes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lovia.checkpointer import RunHead
from lovia.exceptions import CorruptRecordError, SchemaTooNewError, StoreError
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.stores._codec import checksum
from lovia.stores.sqlite._schema import latest_version, record_shape
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sqlite"


def _versions(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        # The record is keyed by ``store`` (older files of ours: ``component``): take the first two columns.
        return {row[0]: row[1] for row in conn.execute("SELECT * FROM lovia_schema").fetchall()}


def _sql(path: Path, *statements: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(path)
    with conn:
        for s in statements:
            conn.execute(s, params) if params else conn.execute(s)
    conn.close()


@pytest.fixture
async def stores(tmp_path):
    path = tmp_path / "s.db"
    session, checkpointer = SQLiteSession(path), SQLiteCheckpointer(path)
    await session.load("-")  # open (and create the tables) now: tests write rows by hand
    await checkpointer.load("-")
    yield path, session, checkpointer
    await session.close()
    await checkpointer.close()


# ---------------------------------------------------------------------------- schema


async def test_new_file_records_each_component_version(stores):
    path, session, checkpointer = stores
    await session.load("x")
    await checkpointer.load("x")
    assert _versions(path) == {"session": latest_version("session"), "checkpoint": latest_version("checkpoint")}
    assert latest_version("checkpoint") == 5 and latest_version("session") == 4


async def test_pre_versioning_file_is_adopted(tmp_path):
    path = tmp_path / "old.db"
    _sql(
        path,
        "CREATE TABLE session_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, run_id TEXT, "
        "entries_json TEXT, meta_json TEXT, created_at REAL, UNIQUE(session_id, run_id))",
        "INSERT INTO session_runs (session_id, run_id, entries_json, meta_json, created_at) "
        """VALUES ('u1', 'r1', '[{"type":"input","role":"user","content":"hi"}]', NULL, 1.0)""",
    )
    async with SQLiteSession(path) as session:
        assert await session.load("u1") == [InputEntry(role="user", content="hi")]
        assert await session.append("u1", [], run_id="r1") == "r1"
        assert len(await session.segments("u1")) == 1
    assert _versions(path) == {"session": 4}


@pytest.mark.parametrize(
    "fixture",
    [
        "session_v1.sql",
        "session_v2.sql",
        "session_v3.sql",
        "session_v4.sql",
        "checkpoint_v1.sql",
        "checkpoint_v2.sql",
        "checkpoint_v3.sql",
        "checkpoint_v4.sql",
        "checkpoint_v5.sql",
    ],
)
async def test_frozen_fixture_of_every_version_opens_and_migrates(tmp_path, fixture):
    path = tmp_path / "fixture.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / fixture).read_text())
    conn.close()
    async with SQLiteSession(path) as session, SQLiteCheckpointer(path) as checkpointer:
        if fixture.startswith("session"):
            segments = await session.segments("u1")
            assert [s.run_id for s in segments] == ["run_a", "run_b"]
            assert segments[0].meta == {"timing": {"started_at": 1700000000.0, "finished_at": 1700000001.5}}
            assert segments[1].entries[2] == ToolResultEntry(call_id="c1", output="Atlas", raw={"hit": True})
        else:
            snap = await checkpointer.load("job-1")
            assert snap is not None and snap.status == "interrupted" and snap.usage.input_tokens == 10
            assert snap.entries[1] == ToolCallEntry(call_id="c1", name="migrate", arguments="{}")
            lease = await checkpointer.acquire_lease("job-1", owner="host-b:7", ttl=30)
            assert lease.token == (1 if fixture.endswith("v1.sql") else 4)
        await session.load("u1")  # stores open lazily: make sure both components were opened
        await checkpointer.load("job-1")
    assert _versions(path) == {"session": 4, "checkpoint": 5}


async def test_file_keyed_by_component_is_converted_to_the_store_shape_with_the_same_versions(tmp_path):
    path = tmp_path / "ours.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "session_v4.sql").read_text())
    # Another store's row in the same record (nothing to migrate for it here) must survive as it is.
    conn.execute("INSERT INTO lovia_schema VALUES ('memory', 2, 'some_step', 1700000123.0)")
    conn.commit()
    before = conn.execute("SELECT * FROM lovia_schema ORDER BY 1").fetchall()
    assert record_shape(conn) == "component"
    conn.close()
    async with SQLiteSession(path) as session:
        assert [s.run_id for s in await session.segments("u1")] == ["run_a", "run_b"]
    with sqlite3.connect(path) as conn:
        assert record_shape(conn) == "store"
        columns = [(row[1], row[2], row[3], row[5]) for row in conn.execute("PRAGMA table_info(lovia_schema)")]
        assert columns == [
            ("store", "TEXT", 0, 1),
            ("version", "INTEGER", 1, 0),
            ("migration", "TEXT", 0, 0),
            ("applied_at", "REAL", 0, 0),
        ]
        assert (
            conn.execute("SELECT store, version, migration, applied_at FROM lovia_schema ORDER BY 1").fetchall()
            == before
        )


async def test_failed_migration_step_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "checkpoint_v1.sql").read_text())
    # Step 3 creates this name: it fails after steps 2 (run_leases) and the record's conversion ran.
    conn.execute("CREATE VIEW snapshot_turns_chained AS SELECT 1")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    checkpointer = SQLiteCheckpointer(path)
    with pytest.raises(StoreError) as err:
        await checkpointer.load("job-1")
    assert isinstance(err.value.__cause__, sqlite3.Error) and "already exists" in str(err.value)
    await checkpointer.close()
    assert path.read_bytes() == before  # all steps share one transaction: none of them stays
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'run_leases'").fetchall() == []
        conn.execute("DROP VIEW snapshot_turns_chained")
    async with SQLiteCheckpointer(path) as checkpointer:  # once the obstacle is gone the next open migrates
        assert (await checkpointer.load("job-1")) is not None
    assert _versions(path) == {"checkpoint": 5}


@pytest.mark.parametrize("component", ["session", "checkpoint"])
async def test_newer_schema_is_refused_with_upgrade_hint(tmp_path, component):
    path = tmp_path / "new.db"
    async with SQLiteSession(path) as session, SQLiteCheckpointer(path) as checkpointer:
        await session.append("u1", [InputEntry(role="user", content="hi")], run_id="r")
        await checkpointer.load("x")
    _sql(path, "UPDATE lovia_schema SET version = 99 WHERE store = ?", params=(component,))
    store = SQLiteSession(path) if component == "session" else SQLiteCheckpointer(path)
    with pytest.raises(SchemaTooNewError) as err:
        await store.load("u1")
    assert "99" in str(err.value) and err.value.hint and "upgrade lovia" in err.value.hint
    await store.close()
    assert _versions(path)[component] == 99


async def test_not_a_database_is_a_store_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    async with SQLiteSession(path) as session:
        with pytest.raises(StoreError) as err:
            await session.load("u1")
    assert err.value.hint and isinstance(err.value.__cause__, sqlite3.Error)


# ---------------------------------------------------------------------------- transient errors


def _locked_by_another_connection(path: Path) -> sqlite3.Connection:
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)  # released from the store's thread
    other.execute("BEGIN EXCLUSIVE")
    return other


async def test_an_operational_error_that_is_not_transient_propagates_at_once(tmp_path):
    async with SQLiteSession(tmp_path / "s.db") as session:
        await session.load("u1")
        attempts = []

        def missing_table(conn: sqlite3.Connection) -> None:
            attempts.append(time.monotonic())
            conn.execute("SELECT * FROM no_such_table")

        with pytest.raises(sqlite3.OperationalError) as err:  # 0.9.119-era code catches it as that
            await session._db.run(missing_table)
    assert len(attempts) == 1
    assert isinstance(err.value, StoreError) and err.value.hint and "no such table" in str(err.value)
    assert isinstance(err.value.__cause__, sqlite3.OperationalError)


async def test_database_is_locked_is_retried_three_times_then_propagates(tmp_path):
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        await session.load("u1")
        other = _locked_by_another_connection(path)
        attempts = []

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA busy_timeout = 0")  # fail at once instead of waiting 5 s per attempt
            attempts.append(time.monotonic())
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()

        try:
            with pytest.raises(StoreError) as err:
                await session._db.run(write)
        finally:
            other.rollback()
            other.close()
    assert isinstance(err.value, sqlite3.OperationalError) and "database is locked" in str(err.value)
    assert err.value.hint and err.value.sqlite_errorname == "SQLITE_BUSY"
    gaps = [later - earlier for earlier, later in zip(attempts, attempts[1:], strict=False)]
    assert len(attempts) == 4, gaps
    assert gaps[0] >= 0.05 and gaps[1] >= 0.2 and gaps[2] >= 0.5


async def test_a_lock_released_during_the_retries_lets_the_write_through(tmp_path):
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        await session.load("u1")
        other = _locked_by_another_connection(path)
        attempts = []

        def append(conn: sqlite3.Connection) -> str:
            conn.execute("PRAGMA busy_timeout = 0")
            attempts.append(time.monotonic())
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                if len(attempts) == 2:  # the other process finishes between our second and third attempt
                    other.rollback()
                raise
            conn.rollback()
            return "written"

        assert await session._db.run(append) == "written"
        other.close()
    assert len(attempts) == 3


async def test_unable_to_open_is_retried_and_a_folder_that_appears_in_time_is_used(tmp_path):
    folder = tmp_path / "later"
    session = SQLiteSession(folder / "s.db")
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as err:
        await session.load("u1")
    assert time.monotonic() - started >= 0.75  # 0.05 + 0.2 + 0.5 s of pauses before the last try
    assert isinstance(err.value, StoreError) and "unable to open database file" in str(err.value)
    assert err.value.hint

    async def make_folder_soon() -> None:
        await asyncio.sleep(0.1)
        folder.mkdir()

    maker = asyncio.create_task(make_folder_soon())
    assert await session.load("u1") == []
    await maker
    await session.close()


# ---------------------------------------------------------------------------- corrupt rows and lenient reads


def _put_row(path: Path, session_id: str, run_id: str, entries_json: str, meta_json: str | None = None) -> None:
    # Written as a (future) lovia would: with its checksum and the head bump, so what is tested
    # is the decoding of the row (checksums have their own tests in test_checksums.py).
    _sql(
        path,
        "INSERT INTO session_runs (session_id, run_id, entries_json, meta_json, created_at, checksum) "
        "VALUES (?, ?, ?, ?, 1.0, ?)",
        params=(session_id, run_id, entries_json, meta_json, checksum(entries_json, meta_json)),
    )
    _sql(path, "UPDATE session_heads SET version = version + 1 WHERE session_id = ?", params=(session_id,))


@pytest.mark.parametrize(
    ("entries_json", "meta_json", "needle"),
    [
        ("[{not json", None, "not valid JSON"),
        ('{"type": "input"}', None, "not a JSON array"),
        ('[{"type": "tool_call", "call_id": "c"}]', None, "missing field"),
        ("[]", "[1, 2]", "not a JSON object"),
        ("[]", "{oops", "not valid JSON"),
    ],
)
async def test_corrupt_session_row_names_its_ids(stores, entries_json, meta_json, needle):
    path, session, _ = stores
    await session.append("good", [InputEntry(role="user", content="fine")], run_id="r0")
    await session.append("bad", [InputEntry(role="user", content="fine")], run_id="r0")
    _put_row(path, "bad", "r-broken", entries_json, meta_json)
    # load() reads entries only; segments() (what the runner reads) also decodes meta.
    with pytest.raises(CorruptRecordError) as err:
        await (session.segments("bad") if meta_json else session.load("bad"))
    assert (err.value.session_id, err.value.run_id) == ("bad", "r-broken")
    assert needle in str(err.value) and "'bad'" in str(err.value) and err.value.hint
    assert await session.load("good") == [InputEntry(role="user", content="fine")]
    assert [i.session_id for i in await session.list_sessions()] == ["bad", "good"]


async def test_unknown_fields_are_ignored_but_unknown_types_are_errors(stores):
    path, session, _ = stores
    newer = [
        {"type": "input", "role": "user", "content": "hi", "lang": "en"},
        {"type": "tool_result", "call_id": "c", "output": "o", "is_error": False, "raw": None, "duration_ms": 12},
    ]
    _put_row(path, "s", "r1", json.dumps(newer))
    assert await session.load("s") == [InputEntry(role="user", content="hi"), ToolResultEntry(call_id="c", output="o")]
    _put_row(path, "s", "r2", json.dumps([{"type": "hologram", "content": "?"}]))
    with pytest.raises(CorruptRecordError) as err:
        await session.load("s")
    assert "'hologram'" in str(err.value) and err.value.run_id == "r2" and "upgrade lovia" in (err.value.hint or "")


async def test_maintenance_on_corrupt_session_changes_nothing(stores):
    path, session, _ = stores
    await session.append("s", [ToolResultEntry(call_id="c", output="x" * 5000)], run_id="r1")
    _put_row(path, "s", "r2", "[{broken")
    await session.append("s", [AssistantTextEntry(content="last")], run_id="r3")
    with pytest.raises(CorruptRecordError):
        await session.trim_tool_results("s")
    with pytest.raises(CorruptRecordError):
        await session.rewind("s", keep_entries=0)
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT run_id, length(entries_json) FROM session_runs ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["r1", "r2", "r3"] and rows[0][1] > 5000


@pytest.mark.parametrize(
    ("statement", "needle"),
    [
        ("UPDATE snapshot_heads SET head_json = '{nope' WHERE run_id = 'r'", "head of run 'r'"),
        ("""UPDATE snapshot_heads SET head_json = '{"status": "running"}' WHERE run_id = 'r'""", "head of run 'r'"),
        (
            "UPDATE snapshot_turns SET entries_json = '[{\"type\": 7}]' WHERE run_id = 'r'",
            "does not match its checksum",
        ),
    ],
)
async def test_corrupt_checkpoint_rows(stores, statement, needle):
    path, _, checkpointer = stores
    for run_id in ("r", "other"):
        await checkpointer.append(run_id, [InputEntry(role="user", content="go")], RunHead(agent_name="a"))
    _sql(path, statement)
    with pytest.raises(CorruptRecordError) as err:
        await checkpointer.load("r")
    assert needle in str(err.value) and err.value.run_id == "r" and err.value.hint
    assert await checkpointer.load("other") is not None


# ---------------------------------------------------------------------------- threads and processes


async def test_event_loop_keeps_ticking_while_a_big_session_loads(tmp_path):
    async with SQLiteSession(tmp_path / "big.db", wal=True) as session:
        for n in range(10):
            run = [ToolResultEntry(call_id=f"c{n}-{i}", output="y" * 200, raw={"i": i}) for i in range(1000)]
            await session.append("big", run, run_id=f"r{n}")
    # A cold load (a new store: nothing cached yet) is the one that decodes everything.
    async with SQLiteSession(tmp_path / "big.db", wal=True) as session:
        ticks = 0
        loading = asyncio.create_task(session.load("big"))
        while not loading.done():
            ticks += 1
            await asyncio.sleep(0.001)
        assert len(await loading) == 10_000
        # A load run on the loop itself would let the ticker run once, before it. (On the worker
        # thread the ticker gets the GIL back at each switch interval, every 5 ms by default.)
        assert ticks >= 3, ticks


async def test_cancelled_caller_gets_cancelled_error_and_store_stays_usable(tmp_path):
    async with SQLiteSession(tmp_path / "c.db") as session:
        await session.append("s", [AssistantTextEntry(content="x" * 100)] * 2000, run_id="r")
        task = asyncio.create_task(session.load("s"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(await session.load("s")) == 2000


async def test_closed_store_refuses_with_hint(tmp_path):
    session = SQLiteSession(tmp_path / "c.db")
    await session.close()
    await session.close()
    with pytest.raises(StoreError, match="closed"):
        await session.load("s")


async def test_many_stores_one_file_concurrent_in_one_process(tmp_path):
    path = tmp_path / "shared.db"
    sessions = [SQLiteSession(path, wal=True) for _ in range(4)]
    checkpointers = [SQLiteCheckpointer(path, wal=True) for _ in range(2)]
    writes = [
        s.append("s", [InputEntry(role="user", content=f"{k}-{n}")], run_id=f"{k}-{n}")
        for k, s in enumerate(sessions)
        for n in range(50)
    ]
    writes += [s.append("s", [], run_id="dup") for s in sessions]
    writes += [
        c.append(f"run-{k}", [InputEntry(role="user", content=str(n))], RunHead(agent_name="a", turns=n))
        for k, c in enumerate(checkpointers)
        for n in range(50)
    ]
    await asyncio.gather(*writes)
    runs = [seg.run_id for seg in await sessions[0].segments("s")]
    assert len(runs) == len(set(runs)) == 201
    for k in range(2):
        snap = await checkpointers[0].load(f"run-{k}")
        assert snap is not None and len(snap.entries) == 50
    for store in [*sessions, *checkpointers]:
        await store.close()


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from lovia.checkpointer import RunHead
    from lovia.stores import SQLiteCheckpointer, SQLiteSession
    from lovia.transcript import InputEntry, AssistantTextEntry

    async def main(path, k, start):
        session, cp = SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)
        while __import__("time").time() < start:
            await asyncio.sleep(0.005)
        for n in range(50):
            entries = [InputEntry(role="user", content=f"p{k} r{n}"), AssistantTextEntry(content="ok")]
            await session.append("shared", entries, run_id=f"p{k}-r{n}")
            await session.append("shared", entries, run_id=f"common-{n % 10}")
            await cp.append(f"cp-{k}", entries, RunHead(agent_name="a", turns=n))
        await session.close()
        await cp.close()

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
    """
)


@pytest.mark.slow
async def test_four_processes_append_to_one_wal_file(tmp_path):
    path = tmp_path / "multi.db"
    start = time.time() + 1.0  # all four open the fresh file and migrate at the same moment
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), str(k), str(start)], stderr=subprocess.PIPE, text=True
        )
        for k in range(4)
    ]
    errors = [child.communicate(timeout=120)[1] for child in children]
    assert [c.returncode for c in children] == [0, 0, 0, 0], errors
    assert not any("locked" in e for e in errors)
    async with SQLiteSession(path, wal=True) as session, SQLiteCheckpointer(path, wal=True) as cp:
        runs = [seg.run_id for seg in await session.segments("shared")]
        expected = {f"p{k}-r{n}" for k in range(4) for n in range(50)} | {f"common-{n}" for n in range(10)}
        assert len(runs) == len(set(runs)) == len(expected) and set(runs) == expected
        for k in range(4):
            snap = await cp.load(f"cp-{k}")
            assert snap is not None and len(snap.entries) == 100 and snap.turns == 49
