"""The SQLite checkpointer's save path: the chained batch layout and the WAL fast path."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from lovia.checkpointer import RunHead
from lovia.exceptions import CorruptRecordError
from lovia.stores import SQLiteCheckpointer
from lovia.stores.sqlite import _db
from lovia.stores.sqlite._db import Database, write
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sqlite"


def result(n: int, size: int = 50) -> ToolResultEntry:
    return ToolResultEntry(call_id=f"c{n}", output=str(n) * size)


def rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


# ---------------------------------------------------------------------------- chained batches


async def test_interleaved_runs_keep_their_own_order(tmp_path):
    path = tmp_path / "cp.db"
    async with SQLiteCheckpointer(path, wal=True) as cp:
        for n in range(30):
            for run in ("a", "b", "c"):
                entries = [result(n)] if (n + len(run)) % 4 else []  # some saves carry no entries
                await cp.append(run, entries, RunHead(agent_name=run, turns=n))
        for run in ("a", "b", "c"):
            snap = await cp.load(run)
            expected = [f"c{n}" for n in range(30) if (n + len(run)) % 4]
            assert snap is not None and [e.call_id for e in snap.entries] == expected and snap.turns == 29
        await cp.delete("b")
        assert await cp.load("b") is None
        assert rows(path, "SELECT DISTINCT run_id FROM snapshot_turns ORDER BY run_id") == [("a",), ("c",)]
        infos = {i.run_id: i.entries for i in await cp.list_runs()}
        assert infos == {"a": 23, "c": 23}  # 30 saves, 7 of them empty
        await cp.append("b", [result(99)], RunHead(agent_name="b"))  # a fresh chain under a reused id
        snap = await cp.load("b")
        assert snap is not None and [e.call_id for e in snap.entries] == ["c99"]


async def test_version_2_file_migrates_to_chains(tmp_path):
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "checkpoint_v2.sql").read_text())
    # A second run whose batches interleave with job-1's in insertion order.
    conn.execute("INSERT INTO snapshot_heads SELECT 'job-2', head_json, updated_at + 1 FROM snapshot_heads")
    conn.executemany(
        "INSERT INTO snapshot_turns VALUES ('job-2', ?, ?)",
        [(seq, f'[{{"type":"input","role":"user","content":"m{seq}"}}]') for seq in (3, 1, 2)],
    )
    conn.commit()
    conn.close()
    async with SQLiteCheckpointer(path) as cp:
        one, two = await cp.load("job-1"), await cp.load("job-2")
        assert one is not None and one.entries[1] == ToolCallEntry(call_id="c1", name="migrate", arguments="{}")
        assert two is not None and [e.content for e in two.entries] == ["m1", "m2", "m3"]  # type: ignore[union-attr]
        assert {i.run_id: i.entries for i in await cp.list_runs()} == {"job-1": 2, "job-2": 3}
        await cp.append("job-2", [result(4)], two.head)
        again = await cp.load("job-2")
        assert again is not None and len(again.entries) == 4 and again.entries[-1] == result(4)
    assert rows(path, "SELECT name FROM sqlite_master WHERE name = 'snapshot_turns_migrating'") == []


async def test_missing_batch_is_reported_not_skipped(tmp_path):
    path = tmp_path / "cp.db"
    async with SQLiteCheckpointer(path) as cp:
        for n in range(3):
            await cp.append("r", [result(n)], RunHead(agent_name="a"))
        await cp.append("other", [result(7)], RunHead(agent_name="a"))
    middle = rows(path, "SELECT id FROM snapshot_turns WHERE run_id = 'r' ORDER BY id")[1][0]
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM snapshot_turns WHERE id = ?", (middle,))
    async with SQLiteCheckpointer(path) as cp:
        with pytest.raises(CorruptRecordError) as err:
            await cp.load("r")
        assert "found 1 of its 3 entries" in str(err.value) and err.value.run_id == "r" and err.value.hint
        assert await cp.load("other") is not None


async def test_a_chain_pointing_forward_or_into_another_run_cannot_loop(tmp_path):
    path = tmp_path / "cp.db"
    async with SQLiteCheckpointer(path) as cp:
        await cp.append("r", [InputEntry(role="user", content="go")], RunHead(agent_name="a"))
        await cp.append("r", [result(1)], RunHead(agent_name="a"))
        await cp.append("x", [result(2)], RunHead(agent_name="a"))
    with sqlite3.connect(path) as conn:
        last = conn.execute("SELECT last_turn FROM snapshot_heads WHERE run_id = 'r'").fetchone()[0]
        conn.execute("UPDATE snapshot_turns SET prev_id = ? WHERE id = ?", (last, last))  # a self-loop
    async with SQLiteCheckpointer(path) as cp:
        with pytest.raises(CorruptRecordError, match="incomplete"):
            await cp.load("r")


# ---------------------------------------------------------------------------- the WAL fast path


async def test_wal_saves_commit_on_the_calling_thread_when_the_lock_is_free(tmp_path):
    db = Database(tmp_path / "f.db", wal=True, component="checkpoint")
    seen: list[int] = []

    def save(conn: sqlite3.Connection) -> None:
        seen.append(threading.get_ident())
        with write(conn):
            conn.execute("INSERT INTO run_leases VALUES ('r', 'o', 1, 0)")

    await db.run(lambda conn: None)  # open: the first job runs on the worker
    await db.write(save, size=10)
    assert seen == [threading.get_ident()]
    await db.write(lambda conn: seen.append(threading.get_ident()), size=_db.FAST_MAX_BYTES + 1)
    assert seen[-1] != threading.get_ident()  # a large write goes to the worker
    await db.close()

    plain = Database(tmp_path / "p.db", wal=False, component="checkpoint")
    await plain.run(lambda conn: None)
    await plain.write(lambda conn: seen.append(threading.get_ident()), size=10)
    assert seen[-1] != threading.get_ident()  # the default journal fsyncs: never on the loop
    await plain.close()


async def test_a_held_write_lock_sends_the_save_to_the_worker_and_the_loop_keeps_running(tmp_path):
    path = tmp_path / "held.db"
    async with SQLiteCheckpointer(path, wal=True) as cp:
        await cp.append("r", [result(0)], RunHead(agent_name="a"))
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        saving = asyncio.create_task(cp.append("r", [result(1)], RunHead(agent_name="a", turns=1)))
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.005)
            ticks += 1
        assert not saving.done() and ticks == 20  # waiting for the lock, off the loop
        blocker.execute("COMMIT")
        blocker.close()
        await asyncio.wait_for(saving, 5)
        snap = await cp.load("r")
        assert snap is not None and [e.call_id for e in snap.entries] == ["c0", "c1"] and snap.turns == 1


async def test_the_log_is_folded_back_while_saves_run_on_the_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(_db, "CHECKPOINT_EVERY", 50)
    path = tmp_path / "log.db"
    async with SQLiteCheckpointer(path, wal=True) as cp:
        for n in range(1500):
            await cp.append("r", [result(n, size=400)], RunHead(agent_name="a", turns=n))
            if n % 25 == 0:
                # Wait for the worker to drain its queue, so any checkpoint queued so far has run: on a
                # loaded machine a fixed sleep could end before the worker thread got the GIL.
                await cp._db.run(lambda conn: None)
        wal = Path(f"{path}-wal").stat().st_size
        # 1,500 saves of ~2 KB wrote well over 10 MB of log pages; folded every 50, the log is reused.
        assert wal < 2 * 1024 * 1024, wal
        snap = await cp.load("r")
        assert snap is not None and len(snap.entries) == 1500


def test_threads_with_their_own_loops_share_one_store(tmp_path):
    path = tmp_path / "threads.db"
    cp = SQLiteCheckpointer(path, wal=True)
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        async def go() -> None:
            for n in range(200):
                await cp.append(name, [result(n)], RunHead(agent_name=name, turns=n))

        try:
            asyncio.run(go())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    async def check() -> None:
        for i in range(4):
            snap = await cp.load(f"t{i}")
            assert snap is not None and [e.call_id for e in snap.entries] == [f"c{n}" for n in range(200)]
        await cp.close()

    asyncio.run(check())


# ---------------------------------------------------------------------------- the worker thread


async def test_the_worker_keeps_nothing_of_a_finished_job(tmp_path):
    """A job's result (a 10,000-entry load, say) is the caller's alone once handed over: the idle
    worker must not keep it alive until its next job, nor free it in the middle of that job."""
    import weakref

    class Result:
        pass

    db = Database(tmp_path / "w.db", wal=False, component="session")
    try:
        got = await db.run(lambda conn: Result())
        ref = weakref.ref(got)
        del got
        for _ in range(200):  # the worker lets go right after handing the result over
            if ref() is None:
                break
            await asyncio.sleep(0.005)
        assert ref() is None
    finally:
        await db.close()
