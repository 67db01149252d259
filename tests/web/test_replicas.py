"""Three ``lovia web`` replicas on one PostgreSQL database: follow, stop and take over runs across processes."""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .app_fixture import ANSWER
from .helpers import Stream, iter_frames, wait_for
from .replica_helpers import PG, drop_schema, log_lines, pg_up, replicas, start_run, stop_all

pytestmark = pytest.mark.skipif(not pg_up(), reason=f"PostgreSQL is not reachable at {PG}")


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"replicas_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(name)


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
        assert [e["type"] for e in snap["transcript"]] == ["input", "tool_call", "tool_result"]  # quick finished
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
        assert [e["type"] for e in meta["transcript"]][-1] == "assistant_text" or "All done" in str(
            meta["transcript"][-1]
        )
    finally:
        stop_all(servers)


def test_sigterm_the_owner_mid_tool_and_another_replica_takes_the_released_run(tmp_path: Path, schema: str) -> None:
    log = tmp_path / "tools.log"
    servers = replicas(schema, {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "3"})
    a, b, c = servers
    try:
        sid, run_id = start_run(a.url, "make the report")
        wait_for(lambda: "slow:start" in log_lines(log))
        follower = Follower(b.url, sid)
        wait_for(lambda: follower.stream.of("snapshot"))
        assert a.kill(signal.SIGTERM) in (0, -signal.SIGTERM)  # graceful: lease released, run interrupted
        stream = follower.wait(timeout=25)
        assert [e.get("resumable") for e in stream.of("error")] == [True]  # A said so, and the run went on
        assert stream.of("done") and "All done" in stream.text(), stream.names()
        lines = log_lines(log)
        assert lines.count("quick") == 1 and lines.count("slow:start") == 2 and lines.count("slow:done") == 1
        rows = httpx.get(f"{c.url}/api/runs/history", timeout=10).json()["runs"]
        assert [r["status"] for r in rows if r["run_id"] == run_id] == ["completed"]
        assert httpx.get(f"{c.url}/api/sessions/{sid}", timeout=10).json()["active_run_id"] is None
    finally:
        stop_all(servers)


def test_a_takeover_mid_answer_voids_the_partial_text_followers_already_have(tmp_path: Path, schema: str) -> None:
    log = tmp_path / "tools.log"
    env = {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_TEXT_DELAY": "0.05"}
    servers = replicas(schema, env)
    a, b, _c = servers
    try:
        sid, _run_id = start_run(a.url, "make the report")
        follower = Follower(b.url, sid)
        wait_for(lambda: len(follower.stream.text()) >= 3)
        assert a.kill(signal.SIGKILL) == -signal.SIGKILL  # mid-answer: both tools have finished
        stream = follower.wait(timeout=25)
        assert stream.of("done"), stream.names()
        names = stream.names()
        assert "output_discarded" in names, f"the partial text of the dead owner stays: {stream.text()!r}"
        cut = len(names) - 1 - names[::-1].index("output_discarded")
        before = "".join(f.data["delta"] for f in stream.frames[:cut] if f.event == "text_delta")
        after = "".join(f.data["delta"] for f in stream.frames[cut:] if f.event == "text_delta")
        assert before and ANSWER.startswith(before) and before != ANSWER  # what the dead owner streamed
        assert after == ANSWER  # the new owner's turn, from its start: the follower shows it once
        assert log_lines(log) == ["quick", "slow:start", "slow:done"]
    finally:
        stop_all(servers)


def test_a_released_lease_is_taken_over_only_after_a_shutdown_never_while_the_run_ends(schema: str) -> None:
    """A stop releases the lease before the owner writes the stopped run down: no replica may resume it then."""
    import asyncio

    from lovia.web.api import RouterDeps
    from lovia.web.replicas import ReplicaSupervisor
    from lovia.web.store import PostgresChatStore

    from .app_fixture import agent

    async def claimed(store: PostgresChatStore, run_id: str) -> bool:
        rows = await store.fetch("SELECT claimed_until FROM {web_runs} WHERE run_id = %s", (run_id,))
        return rows[0][0] is not None

    async def go() -> None:
        store = PostgresChatStore(PG, schema=schema, lease_ttl=0.3)
        sup = RouterDeps(agents={"fixture": agent}, store=store).supervisor
        assert isinstance(sup, ReplicaSupervisor)
        cp = store.pg_checkpointer
        try:
            sid = (await store.create(title="t")).id
            await store.record_run("run_ending", sid, status="running")
            await store.set_active_run(sid, "run_ending")
            lease = await cp.acquire_lease("run_ending", owner="other-replica", ttl=30)
            assert await sup.resume(sid, "run_ending") is None and not await claimed(store, "run_ending")  # live
            await cp.release_lease(lease)  # the owner's run ends (a stop): it is still writing it down
            assert await sup.resume(sid, "run_ending") is None and not await claimed(store, "run_ending")
            await store.record_run("run_ending", sid, status="interrupted")  # the owner shut down instead
            await sup.resume(sid, "run_ending")
            assert await claimed(store, "run_ending")

            sid2 = (await store.create(title="t2")).id
            await store.record_run("run_killed", sid2, status="running")
            await store.set_active_run(sid2, "run_killed")
            await cp.acquire_lease("run_killed", owner="killed-replica", ttl=0.3)
            await sup.resume(sid2, "run_killed")
            assert not await claimed(store, "run_killed")  # still live
            deadline = asyncio.get_running_loop().time() + 10
            while any(le.run_id == "run_killed" for le in await cp.live_leases()):  # killed: never renewed
                assert asyncio.get_running_loop().time() < deadline, "the lease did not expire"
                await asyncio.sleep(0.05)
            await sup.resume(sid2, "run_killed")
            assert await claimed(store, "run_killed")
        finally:
            await store.close()

    asyncio.run(go())
