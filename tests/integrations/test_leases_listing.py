"""Who drives which run: ``live_leases()`` on every bundled checkpointer and ``lovia runs ls``.

``lovia runs ls`` is checked on an SQLite file and on a PostgreSQL schema (the real server, one
fresh schema per test): the owner column names the host and pid driving a live run, an expired
lease and a gone ``lovia web`` replica list as interrupted, and a wrong URL or schema is a clear
error that creates nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lovia import RunHead
from lovia.stores import InMemoryCheckpointer, SQLiteCheckpointer
from lovia.transcript import InputEntry
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema, requires_pg

ROOT = Path(__file__).resolve().parents[2]


async def check_live_leases(cp: object) -> None:
    assert await cp.live_leases() == []  # type: ignore[attr-defined]
    long = await cp.acquire_lease("long", owner="host-a:11:x", ttl=60)  # type: ignore[attr-defined]
    short = await cp.acquire_lease("short", owner="host-b:22:y", ttl=30)  # type: ignore[attr-defined]
    gone = await cp.acquire_lease("gone", owner="host-c:33:z", ttl=30)  # type: ignore[attr-defined]
    await cp.release_lease(gone)  # type: ignore[attr-defined]
    await cp.acquire_lease("stale", owner="host-d:44:w", ttl=0.05)  # type: ignore[attr-defined]
    await asyncio.sleep(0.2)
    live = await cp.live_leases()  # type: ignore[attr-defined]
    assert [(lease.run_id, lease.owner, lease.token) for lease in live] == [
        ("short", "host-b:22:y", short.token),
        ("long", "host-a:11:x", long.token),
    ]


async def test_live_leases_in_memory_and_sqlite(tmp_path: Path) -> None:
    await check_live_leases(InMemoryCheckpointer())
    async with SQLiteCheckpointer(str(tmp_path / "runs.db"), wal=True) as cp:
        await check_live_leases(cp)


@pytest.mark.postgres
@pytest.mark.skipif(UNREACHABLE is not None, reason=UNREACHABLE or "")
async def test_live_leases_in_postgres() -> None:
    from lovia.stores import PostgresCheckpointer

    schema = new_schema("leases")
    try:
        async with PostgresCheckpointer(DSN, schema=schema) as cp:
            await check_live_leases(cp)
    finally:
        drop_schema(schema)


CHILD = textwrap.dedent(
    """
    import asyncio, os, sys
    from lovia import Agent, CheckpointOptions, Runner, tool
    from lovia.stores import PostgresCheckpointer, SQLiteCheckpointer
    from lovia.testing import ScriptedProvider, call, text

    db, gate = sys.argv[1], sys.argv[2]
    schema = sys.argv[3] if len(sys.argv) > 3 else None

    @tool
    async def wait_for_gate() -> str:
        "Block until the gate file exists."
        print("holding", flush=True)
        while not os.path.exists(gate):
            await asyncio.sleep(0.05)
        return "opened"

    async def main() -> None:
        model = ScriptedProvider([call("wait_for_gate", {}, call_id="c1"), text("done")])
        agent = Agent(name="holder", instructions="Hold.", model=model, tools=[wait_for_gate])
        store = PostgresCheckpointer(db, schema=schema) if schema else SQLiteCheckpointer(db, wal=True)
        async with store as cp:
            await Runner.run(agent, "go", checkpoint=CheckpointOptions(cp, "held-run", lease_ttl=30))

    asyncio.run(main())
    """
)


def lovia(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def owner_cell(listing: str, run_id: str) -> tuple[list[str], str]:
    """The row of ``run_id`` (split) and the text under the ``owner`` header (the table is aligned)."""
    lines = listing.splitlines()
    header = lines[0]
    assert header.split()[-2:] == ["owner", "note"]
    row = next(line for line in lines[2:] if line.startswith(run_id + " "))
    start, end = header.index("owner"), header.index("note")
    return row.split(), row[start:end].strip()


def check_live_run_listing(where: list[str], child_args: list[str], gate: Path) -> None:
    """A child process drives a leased run; ``lovia runs ls`` names its host and pid, then nobody."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *child_args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding", child.stderr
        listing = lovia("runs", "ls", *where)
        assert listing.returncode == 0, listing.stderr
        cells, owner = owner_cell(listing.stdout, "held-run")
        host, pid, nonce = owner.split(":")
        assert (host, int(pid)) == (socket.gethostname(), child.pid) and nonce
        assert cells[:3] == ["held-run", "holder", "running"] and cells[-2:] == ["lease", "held"]
        gate.touch()
        assert child.wait(timeout=30) == 0, child.stderr.read() if child.stderr else ""
        after = lovia("runs", "ls", *where)
        cells, owner = owner_cell(after.stdout, "held-run")
        assert cells[2] == "completed" and owner == ""  # released: nobody drives it
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()


def test_runs_ls_shows_the_host_and_process_driving_a_live_run(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    check_live_run_listing(["--db", db], [db, str(tmp_path / "gate")], tmp_path / "gate")


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name, dropped after the test (whatever created it)."""
    name = new_schema("cli")
    yield name
    drop_schema(name)


@pytest.mark.postgres
@requires_pg
def test_runs_ls_on_postgres_shows_the_host_and_process_driving_a_live_run(tmp_path: Path, schema: str) -> None:
    gate = tmp_path / "gate"
    check_live_run_listing(["--db", DSN, "--db-schema", schema], [DSN, str(gate), schema], gate)


async def _seed(schema: str) -> None:
    """Runs of every kind in one schema, the way workers and a ``lovia web`` replica leave them."""
    from lovia.web.store import PostgresChatStore

    store = PostgresChatStore(DSN, schema=schema)
    cp = store.pg_checkpointer
    try:
        for run_id, agent in (("expired-run", "sleeper"), ("remote-run", "remote"), ("web-run", "chat")):
            await cp.append(run_id, [InputEntry("user", "go")], RunHead(agent_name=agent, status="running"))
        await cp.acquire_lease("expired-run", owner="worker-9:4242:dead", ttl=0.05)
        await cp.acquire_lease("remote-run", owner="other-host:777:n1", ttl=60)
        chat = await store.create(title="Quarterly report", session_id="chat-1")
        await store.record_run("web-run", chat.id, status="running")
        gone = f"{socket.gethostname()}:{dead_pid()}"  # the replica that started it has exited
        await store.execute("UPDATE {web_runs} SET owner = %s WHERE run_id = %s", (gone, "web-run"))
        await store.pg_session.append("chat-1", [InputEntry("user", "hello")], run_id="web-run")
    finally:
        await store.close()
    await asyncio.sleep(0.2)  # the short lease runs out


def dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.postgres
@requires_pg
def test_runs_ls_on_postgres_tells_expired_remote_and_gone_owners_apart(schema: str) -> None:
    asyncio.run(_seed(schema))
    listing = lovia("runs", "ls", env={"LOVIA_DB": DSN, "LOVIA_DB_SCHEMA": schema})
    assert listing.returncode == 0, listing.stderr
    cells, owner = owner_cell(listing.stdout, "expired-run")
    assert cells[2] == "interrupted" and cells[-2:] == ["lease", "expired"] and owner == ""
    cells, owner = owner_cell(listing.stdout, "remote-run")
    assert cells[2] == "running" and cells[-2:] == ["lease", "held"] and owner == "other-host:777:n1"
    cells, owner = owner_cell(listing.stdout, "web-run")
    assert cells[2] == "interrupted" and owner.startswith(socket.gethostname() + ":") and "is gone" in listing.stdout
    only = lovia("runs", "ls", "--db", DSN, "--db-schema", schema, "--status", "interrupted").stdout
    assert "expired-run" in only and "web-run" in only and "remote-run" not in only
    show = lovia("--db", DSN, "--db-schema", schema, "runs", "show", "remote-run")
    assert show.returncode == 0 and "remote" in show.stdout, show.stderr
    sessions = lovia("sessions", "ls", "--db", DSN, "--db-schema", schema)
    assert sessions.returncode == 0 and "Quarterly report" in sessions.stdout, sessions.stderr
    missing = lovia("runs", "show", "no-such-run", "--db", DSN, "--db-schema", schema)
    assert missing.returncode == 1 and f"(schema {schema})" in missing.stderr and "password" not in missing.stderr


def assert_clear_failure(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.startswith("lovia: error: "), out.stderr
    assert "\n  hint: " in out.stderr, out.stderr
    for word in words:
        assert word in out.stderr, out.stderr


def schema_exists(name: str) -> bool:
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone() is not None


@pytest.mark.postgres
@requires_pg
def test_a_missing_schema_is_reported_not_created(schema: str) -> None:
    async def make_one() -> None:
        from lovia.stores import PostgresCheckpointer

        async with PostgresCheckpointer(DSN, schema=schema) as cp:
            await cp.list_runs()

    out = lovia("runs", "ls", "--db", DSN, "--db-schema", schema)
    assert_clear_failure(out, 1, f"there is no schema {schema!r}", "--db-schema")
    assert not schema_exists(schema)  # looking created nothing
    asyncio.run(make_one())
    assert_clear_failure(lovia("sessions", "ls", "--db", DSN, "--db-schema", schema), 1, "no sessions", "checkpointer")
    other = lovia("runs", "ls", "--db", DSN, "--db-schema", schema + "_x")
    assert_clear_failure(other, 1, f"schemas with lovia tables here: {schema}")  # the nearest name first
    assert not schema_exists(schema + "_x")


@pytest.mark.postgres
@requires_pg
def test_an_unreachable_or_wrong_database_is_a_clear_error() -> None:
    wrong_db = DSN.rsplit("/", 1)[0] + "/no_such_database_lovia"
    assert_clear_failure(lovia("runs", "ls", "--db", wrong_db), 2, "cannot connect", "no_such_database_lovia")
    closed_port = "postgresql://postgres:secret@127.0.0.1:1/test"
    out = lovia("sessions", "ls", "--db", closed_port)
    assert_clear_failure(out, 2, "cannot connect", "127.0.0.1:1/test")
    assert "secret" not in out.stderr
    bad_name = lovia("runs", "ls", "--db", DSN, "--db-schema", "no-dashes")
    assert_clear_failure(bad_name, 2, "not a valid identifier")


def test_db_schema_with_an_sqlite_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db.touch()
    assert_clear_failure(lovia("runs", "ls", "--db", str(db), "--db-schema", "app"), 2, "PostgreSQL --db only")
    ok = lovia("runs", "ls", "--db", str(db), env={"LOVIA_DB_SCHEMA": "app"})  # the variable is for PostgreSQL
    assert ok.returncode == 0, ok.stderr
