"""A full disk says so: every store's hint tells the user to free space (and nothing stored is lost)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from lovia import Agent, CheckpointOptions, LoviaError, Runner, SQLiteCheckpointer, tool
from lovia._guard import as_lovia_error, disk_full
from lovia.exceptions import StoreError
from lovia.testing import ScriptedProvider, call, text
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema


def big_agent(ran: list[int]) -> Agent:
    @tool
    def produce(n: int) -> str:
        """Produce n kilobytes of text."""
        ran.append(n)
        return "x" * (n * 1024)

    provider = ScriptedProvider([call("produce", {"n": 400}), text("done")])
    return Agent(name="a", model=provider, tools=[produce], max_tool_output_chars=10_000_000)


async def test_sqlite_full_database_gives_the_free_space_hint_and_keeps_what_was_saved(tmp_path: Path) -> None:
    ran: list[int] = []
    async with SQLiteCheckpointer(tmp_path / "full.db") as cp:
        await Runner.run(
            Agent(name="a", model=ScriptedProvider([text("ok")])), "warm up", checkpoint=CheckpointOptions(cp, "r0")
        )
        # The real SQLite engine reports SQLITE_FULL once the file may not grow any more.
        pages = await cp._db.run(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
        await cp._db.run(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages + 2}"))
        with pytest.raises(StoreError) as info:
            await Runner.run(big_agent(ran), "go", checkpoint=CheckpointOptions(cp, "r1"))
        assert "free space" in (info.value.hint or "") and "full" in str(info.value)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert ran == [400]
        earlier = await cp.load("r0")
        assert earlier is not None and earlier.status == "completed"


@pytest.mark.postgres
async def test_postgres_disk_full_gives_the_free_space_hint() -> None:
    if UNREACHABLE is not None:
        pytest.skip(UNREACHABLE)
    import psycopg

    from lovia.stores import PostgresCheckpointer

    schema = new_schema("full")
    try:
        async with PostgresCheckpointer(DSN, schema=schema) as cp:
            await Runner.run(
                Agent(name="a", model=ScriptedProvider([text("ok")])), "x", checkpoint=CheckpointOptions(cp, "r0")
            )
            # The server itself raises disk_full (SQLSTATE 53100) for every new batch, as a full
            # data directory would.
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(
                    f'CREATE FUNCTION "{schema}".no_space() RETURNS trigger LANGUAGE plpgsql AS '
                    "$$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' "
                    "USING ERRCODE = 'disk_full'; END $$"
                )
                conn.execute(
                    f'CREATE TRIGGER no_space BEFORE INSERT ON "{schema}".snapshot_turns '
                    f'FOR EACH ROW EXECUTE FUNCTION "{schema}".no_space()'
                )
            with pytest.raises(StoreError) as info:
                await Runner.run(big_agent([]), "go", checkpoint=CheckpointOptions(cp, "r1"))
            assert "free space" in (info.value.hint or "")
            assert getattr(info.value.__cause__, "sqlstate", None) == "53100"
            earlier = await cp.load("r0")
            assert earlier is not None and earlier.status == "completed"
    finally:
        drop_schema(schema)


def test_a_real_enospc_is_recognised() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is missing")
    with pytest.raises(OSError) as info, open("/dev/full", "w") as full:  # noqa: PTH123
        full.write("x")
        full.flush()
    assert info.value.errno == errno.ENOSPC and disk_full(info.value)
    wrapped = as_lovia_error(info.value)
    assert isinstance(wrapped, LoviaError) and isinstance(wrapped, OSError)
    assert "free space" in (wrapped.hint or "")
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
