"""Who drives which run: ``live_leases()`` on every bundled checkpointer and ``lovia runs ls``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lovia.stores import InMemoryCheckpointer, SQLiteCheckpointer
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

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
    from lovia.stores import SQLiteCheckpointer
    from lovia.testing import ScriptedProvider, call, text

    db, gate = sys.argv[1], sys.argv[2]

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
        async with SQLiteCheckpointer(db, wal=True) as cp:
            await Runner.run(agent, "go", checkpoint=CheckpointOptions(cp, "held-run", lease_ttl=30))

    asyncio.run(main())
    """
)


def test_runs_ls_shows_the_host_and_process_driving_a_live_run(tmp_path: Path) -> None:
    db, gate = str(tmp_path / "runs.db"), tmp_path / "gate"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, db, str(gate)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding", child.stderr
        listing = subprocess.run(
            [sys.executable, "-m", "lovia.cli", "runs", "ls", "--db", db], cwd=ROOT, capture_output=True, text=True
        )
        header, _, row = listing.stdout.splitlines()[:3]
        columns = header.split()
        assert columns[-2:] == ["owner", "note"]
        start = header.index("owner")  # the table is aligned: the owner sits under its header
        owner = row[start:].split()[0]
        host, pid, _nonce = owner.split(":")
        assert (host, int(pid)) == (socket.gethostname(), child.pid)
        assert row.split()[:3] == ["held-run", "holder", "running"]
        gate.touch()
        assert child.wait(timeout=30) == 0, child.stderr.read() if child.stderr else ""
        after = subprocess.run(
            [sys.executable, "-m", "lovia.cli", "runs", "ls", "--db", db], cwd=ROOT, capture_output=True, text=True
        ).stdout.splitlines()[2]
        assert after.split()[2] == "completed" and owner not in after  # released: nobody drives it
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
