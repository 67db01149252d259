"""Shared by the replica tests: ``lovia web`` replicas as child processes on one PostgreSQL schema."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx

from .helpers import ProcessServer, iter_frames

PG = "postgresql://postgres@127.0.0.1:5432/test"
APP = "tests.web.app_fixture:agent"


def pg_up() -> bool:
    """Whether the test PostgreSQL server answers."""
    try:
        import psycopg

        with psycopg.connect(PG, connect_timeout=2):
            return True
    except Exception:
        return False


def drop_schema(name: str) -> None:
    """Drop a test's schema and everything in it."""
    import psycopg

    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def log_lines(path: Path) -> list[str]:
    """The fixture tools' execution log (one line per start / finish)."""
    return path.read_text().splitlines() if path.exists() else []


def replicas(schema: str, env: dict[str, str], n: int = 3, ttl: float = 1.5) -> list[ProcessServer]:
    """Start ``n`` replicas on one schema: the first migrates it, the others start in parallel.

    A replica that does not come up fails the test (the others are killed).
    """
    args = ("--db", PG, "--db-schema", schema, "--lease-ttl", str(ttl), "--app", APP, "--no-workspace")
    servers = [ProcessServer(*args, env=env) for _ in range(n)]
    errors: list[BaseException] = []

    def start(server: ProcessServer) -> None:
        try:
            server.start()
        except BaseException as exc:
            errors.append(exc)

    start(servers[0])
    threads = [threading.Thread(target=start, args=(s,)) for s in servers[1:]] if not errors else []
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        stop_all(servers)
        raise AssertionError(f"a replica did not start: {errors[0]}") from errors[0]
    return servers


def start_run(base: str, message: str) -> tuple[str, str]:
    """Start a run on one replica and disconnect after its first tool call (the run goes on)."""
    with (
        httpx.Client(timeout=20) as client,
        client.stream("POST", base + "/api/chat/stream", json={"message": message}) as r,
    ):
        sid = run_id = ""
        for frame in iter_frames(r):
            if frame.event == "session":
                sid = frame.data["session_id"]
            if frame.event == "snapshot":
                run_id = frame.data["run_id"]
            if frame.event == "tool_call":
                break
    return sid, run_id


def stop_all(servers: list[ProcessServer]) -> None:
    """SIGKILL every replica still running."""
    for s in servers:
        if s.proc is not None and s.proc.poll() is None:
            s.kill(signal.SIGKILL)
