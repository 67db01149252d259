"""Three ``lovia web`` replicas on one PostgreSQL database: follow, stop and take over runs across processes."""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .helpers import ProcessServer, Stream, iter_frames, wait_for

PG = "postgresql://postgres@127.0.0.1:5432/test"
APP = "tests.web.app_fixture:agent"


def _pg_up() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG, connect_timeout=2):
            return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _pg_up(), reason=f"PostgreSQL is not reachable at {PG}")


@pytest.fixture
def schema() -> Iterator[str]:
    import psycopg

    name = f"replicas_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def replicas(schema: str, env: dict[str, str], n: int = 3, ttl: float = 1.5) -> list[ProcessServer]:
    args = ("--db", PG, "--db-schema", schema, "--lease-ttl", str(ttl), "--app", APP, "--no-workspace")
    servers = [ProcessServer(*args, env=env) for _ in range(n)]
    servers[0].start()  # migrates the schema; the others start in parallel afterwards
    threads = [threading.Thread(target=s.start) for s in servers[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return servers


class Follower:
    """An SSE client attached to a chat on one replica, reading in a thread."""

    def __init__(self, base: str, session_id: str) -> None:
        self.stream = Stream()
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(base, session_id), daemon=True)
        self._thread.start()

    def _read(self, base: str, session_id: str) -> None:
        try:
            with (
                httpx.Client(timeout=30) as client,
                client.stream("POST", f"{base}/api/chat/reconnect?session_id={session_id}") as response,
            ):
                assert response.status_code == 200
                for frame in iter_frames(response):
                    self.stream.frames.append(frame)
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.done.set()

    def wait(self, timeout: float = 20) -> Stream:
        assert self.done.wait(timeout), f"stream did not end; got {self.stream.names()}"
        assert self.error is None, self.error
        return self.stream


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
    for s in servers:
        if s.proc is not None and s.proc.poll() is None:
            s.kill(signal.SIGKILL)


def test_follow_and_stop_a_run_owned_by_another_replica(tmp_path: Path, schema: str) -> None:
    log = tmp_path / "tools.log"
    servers = replicas(schema, {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "30"})
    a, b, c = servers
    try:
        sid, run_id = start_run(a.url, "make the report")
        wait_for(lambda: "slow:start" in log_lines(log))
        follower = Follower(b.url, sid)
        wait_for(lambda: "tool_call" in follower.stream.names())
        snap = follower.stream.of("snapshot")[0]
        assert snap["status"] == "running" and snap["run_id"] == run_id
        assert [e["type"] for e in snap["entries"]] == ["input", "tool_call", "tool_result"]  # quick finished
        # the sidebar is the same on every replica, and shows the run in flight
        lists = [httpx.get(f"{s.url}/api/sessions").json() for s in servers]
        ids = [[row["id"] for row in (li["sessions"] if isinstance(li, dict) else li)] for li in lists]
        assert ids[0] == ids[1] == ids[2] == [sid]
        # stop from B: the owner (A) executes it and B's client sees the end
        assert httpx.post(f"{b.url}/api/chat/cancel", params={"session_id": sid}, timeout=20).json() == {
            "stopped": True
        }
        stream = follower.wait()
        assert stream.of("done")[-1]["stopped"] is True
        meta = wait_for(lambda: (m := httpx.get(f"{c.url}/api/sessions/{sid}").json())["live"] is False and m)
        assert meta["active_run_id"] is None
        assert log_lines(log) == ["quick", "slow:start"]
    finally:
        stop_all(servers)


def test_sigkill_the_owner_mid_tool_and_the_run_completes_through_another(tmp_path: Path, schema: str) -> None:
    log = tmp_path / "tools.log"
    servers = replicas(schema, {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "1.5"})
    a, b, c = servers
    try:
        sid, run_id = start_run(a.url, "make the report")
        wait_for(lambda: "slow:start" in log_lines(log))
        follower = Follower(b.url, sid)
        wait_for(lambda: follower.stream.of("snapshot"))
        assert a.kill(signal.SIGKILL) == -signal.SIGKILL  # mid-tool
        stream = follower.wait(timeout=25)
        assert stream.of("done"), stream.names()
        assert "All done" in stream.text()
        lines = log_lines(log)
        assert lines.count("quick") == 1  # the finished tool is not run again
        assert lines.count("slow:done") == 1 and lines.count("slow:start") == 2
        meta = httpx.get(f"{c.url}/api/sessions/{sid}").json()
        assert meta["active_run_id"] is None
        assert [e["type"] for e in meta["entries"]][-1] == "assistant_text" or "All done" in str(meta["entries"][-1])
    finally:
        stop_all(servers)
