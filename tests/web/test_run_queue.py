"""Chats past the live-run cap wait in line (``run_waiting``), over real HTTP and SSE (uvicorn in a thread)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, tool
from lovia.exceptions import ProviderError, UserError
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.transcript import TranscriptEntry
from lovia.web import create_app
from lovia.web.run_queue import RunQueue

from .helpers import ROOT, Frame, ProcessServer, ThreadServer, last_user, sse, wait_for


class Held:
    """The ``hold`` tool parks until the test releases it; ``entered`` says a run is parked."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


def held_agent(held: Held) -> Agent[Any]:
    """``hold ...`` parks in a tool, then answers (``hold fail ...``: the model fails instead);
    anything else is answered at once."""

    @tool
    async def hold() -> str:
        """Wait until released."""
        held.entered.set()
        while not held.release.is_set():
            await asyncio.sleep(0.02)
        return "released"

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said, results = last_user(entries)
        if said.startswith("hold") and results == 0:
            return call("hold", {}, call_id=f"call_hold_{len(entries)}")
        if said.startswith("hold fail"):
            return fail(ProviderError("the model endpoint is down", status_code=503, retryable=False))
        if said.startswith("hold"):
            return text(f"Held, then answered: {said}")
        return text(f"You said: {said}")

    return Agent(name="queued", model=ScriptedProvider(script), tools=[hold])


class Streaming:
    """A chat stream (``POST /api/chat/stream`` by default) read in a thread: the frames so far."""

    def __init__(self, base: str, body: dict[str, Any] | None, path: str = "/api/chat/stream") -> None:
        self.frames: list[Frame] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._read, args=(base, path, body), daemon=True)
        self.thread.start()

    def _read(self, base: str, path: str, body: dict[str, Any] | None) -> None:
        try:
            sse(base, path, body, timeout=60, on_frame=self.frames.append)
        except BaseException as exc:  # surfaced by the test through .ended()
            self.error = exc

    def of(self, event: str) -> list[dict[str, Any]]:
        return [f.data for f in list(self.frames) if f.event == event]

    def names(self) -> list[str]:
        return [f.event for f in list(self.frames)]

    def wait(self, event: str, count: int = 1) -> list[dict[str, Any]]:
        return wait_for(lambda: len(self.of(event)) >= count and self.of(event), timeout=30)

    def ended(self) -> list[str]:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the stream never ended"
        assert self.error is None, self.error
        return self.names()

    @property
    def session_id(self) -> str:
        return str(self.wait("session")[0]["session_id"])

    def text(self) -> str:
        return "".join(d["delta"] for d in self.of("text_delta"))


@pytest.fixture
def held() -> Iterator[Held]:
    h = Held()
    yield h
    h.release.set()


@pytest.fixture
def server(tmp_path: Path, held: Held) -> Iterator[ThreadServer]:
    app = create_app(held_agent(held), db_path=str(tmp_path / "q.db"), max_background_runs=1, max_queued_runs=1)
    with ThreadServer(app) as srv:
        yield srv


def busy_with(srv: ThreadServer, held: Held, message: str = "hold on") -> Streaming:
    """A chat that takes the only slot and parks in its tool."""
    first = Streaming(srv.url, {"message": message})
    assert held.entered.wait(30), "the first run never reached its tool"
    return first


def user_texts(srv: ThreadServer, sid: str) -> list[str]:
    detail = httpx.get(f"{srv.url}/api/sessions/{sid}").json()
    return [str(e["content"]) for e in detail["transcript"] if e["type"] == "input" and e["role"] == "user"]


# --------------------------------------------------------------------------- refused


def test_with_the_line_full_a_chat_is_refused_429_and_leaves_no_chat(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    second = Streaming(server.url, {"message": "second"})
    second.wait("run_waiting")

    refused = httpx.post(f"{server.url}/api/chat/stream", json={"message": "third"}, timeout=30)
    assert refused.status_code == 429 and refused.json()["detail"]["code"] == "too_many_runs"
    assert "1 waiting places are taken" in refused.json()["detail"]["message"]
    assert "--max-runs" in refused.json()["detail"]["hint"] and refused.headers["retry-after"]
    blocking = httpx.post(f"{server.url}/api/chat", json={"message": "blocking"}, timeout=30)
    assert blocking.status_code == 429  # a blocking turn never waits in line
    sids = {s["id"] for s in httpx.get(f"{server.url}/api/sessions").json()}
    assert sids == {first.session_id, second.session_id}

    held.release.set()
    assert first.ended()[-1] == "done" and second.ended()[-1] == "done"


def test_a_queue_of_zero_refuses_at_the_cap(tmp_path: Path, held: Held) -> None:
    app = create_app(held_agent(held), db_path=str(tmp_path / "z.db"), max_background_runs=1, max_queued_runs=0)
    with ThreadServer(app) as srv:
        first = busy_with(srv, held)
        refused = httpx.post(f"{srv.url}/api/chat/stream", json={"message": "no room"}, timeout=30)
        assert refused.status_code == 429 and refused.json()["detail"]["code"] == "too_many_runs"
        held.release.set()
        assert first.ended()[-1] == "done"


def test_a_negative_queue_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        create_app(held_agent(Held()), db_path=str(tmp_path / "n.db"), max_queued_runs=-1)
    assert "max_queued_runs" in err.value.message and err.value.hint


# --------------------------------------------------------------------------- waiting, then running


def test_a_chat_past_the_cap_waits_then_runs_when_the_slot_frees(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    second = Streaming(server.url, {"message": "second question"})
    (waiting,) = second.wait("run_waiting")
    assert waiting["position"] == 1 and waiting["session_id"] == second.session_id
    assert second.of("text_delta") == []  # nothing ran yet

    runs = {r["session_id"]: r["status"] for r in httpx.get(f"{server.url}/api/runs").json()}
    assert runs == {first.session_id: "running", second.session_id: "waiting"}
    time.sleep(0.3)
    assert second.of("text_delta") == [] and second.names().count("run_waiting") == 1

    held.release.set()
    assert first.ended()[-1] == "done"
    names = second.ended()
    assert names[-1] == "done" and second.text() == "You said: second question"
    assert names.index("run_waiting") < names.index("text_delta")
    assert user_texts(server, second.session_id) == ["second question"]
    wait_for(lambda: httpx.get(f"{server.url}/api/runs").json() == [], timeout=30)


def test_a_page_opening_a_waiting_chat_sees_it_waiting(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    second = Streaming(server.url, {"message": "second"})
    second.wait("run_waiting")
    joined = Streaming(server.url, None, f"/api/chat/reconnect?session_id={second.session_id}")
    (snapshot,) = joined.wait("snapshot")
    assert snapshot["status"] == "running"
    assert joined.wait("run_waiting")[0]["position"] == 1
    held.release.set()
    assert first.ended()[-1] == "done"
    assert joined.ended()[-1] == "done" and joined.text() == "You said: second"


def test_a_waiting_chat_runs_when_the_run_before_it_fails(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held, "hold fail please")
    second = Streaming(server.url, {"message": "after the failure"})
    second.wait("run_waiting")
    held.release.set()
    assert first.ended()[-1] == "error"
    assert "the model endpoint is down" in first.of("error")[-1]["message"]
    assert second.ended()[-1] == "done" and second.text() == "You said: after the failure"


def test_places_move_up_as_the_line_moves(tmp_path: Path, held: Held) -> None:
    app = create_app(held_agent(held), db_path=str(tmp_path / "p.db"), max_background_runs=1, max_queued_runs=2)
    with ThreadServer(app) as srv:
        first = busy_with(srv, held)
        second = Streaming(srv.url, {"message": "second"})
        second.wait("run_waiting")
        third = Streaming(srv.url, {"message": "third"})
        assert third.wait("run_waiting")[0]["position"] == 2
        stopped = httpx.post(f"{srv.url}/api/chat/cancel", params={"session_id": second.session_id}, timeout=30)
        assert stopped.json() == {"stopped": True}
        assert [d["position"] for d in third.wait("run_waiting", 2)] == [2, 1]
        held.release.set()
        assert first.ended()[-1] == "done"
        assert third.ended()[-1] == "done" and third.text() == "You said: third"


def test_a_message_for_a_waiting_chat_joins_its_first_turn(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    second = Streaming(server.url, {"message": "second"})
    second.wait("run_waiting")
    joined = httpx.post(
        f"{server.url}/api/chat/inject", json={"session_id": second.session_id, "message": "and this"}, timeout=30
    )
    assert joined.json()["accepted"] is True
    held.release.set()
    assert first.ended()[-1] == "done"
    assert second.ended()[-1] == "done" and second.text() == "You said: and this"
    assert user_texts(server, second.session_id) == ["second", "and this"]


# --------------------------------------------------------------------------- stopped while waiting


def test_stopping_a_waiting_chat_frees_its_place_and_keeps_its_message(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    second = Streaming(server.url, {"message": "never mind"})
    second.wait("run_waiting")
    sid = second.session_id

    stopped = httpx.post(f"{server.url}/api/chat/cancel", params={"session_id": sid}, timeout=30)
    assert stopped.json() == {"stopped": True}
    names = second.ended()
    assert names[-1] == "done" and second.of("done")[0]["stopped"] is True
    assert "text_delta" not in names
    detail = httpx.get(f"{server.url}/api/sessions/{sid}").json()
    assert user_texts(server, sid) == ["never mind"] and detail["runs"][-1]["stopped"] is True
    assert [r["session_id"] for r in httpx.get(f"{server.url}/api/runs").json()] == [first.session_id]

    third = Streaming(server.url, {"message": "my turn"})  # the freed place is there to take
    third.wait("run_waiting")
    held.release.set()
    assert first.ended()[-1] == "done"
    assert third.ended()[-1] == "done" and third.text() == "You said: my turn"
    assert user_texts(server, sid) == ["never mind"]  # the stopped one never ran


def test_deleting_a_waiting_chat_takes_it_out_of_the_line(server: ThreadServer, held: Held) -> None:
    first = busy_with(server, held)
    second = Streaming(server.url, {"message": "delete me"})
    second.wait("run_waiting")
    assert httpx.delete(f"{server.url}/api/sessions/{second.session_id}", timeout=30).status_code in (200, 204)
    assert second.ended()[-1] == "done"
    assert [r["session_id"] for r in httpx.get(f"{server.url}/api/runs").json()] == [first.session_id]
    held.release.set()
    assert first.ended()[-1] == "done"
    assert [s["id"] for s in httpx.get(f"{server.url}/api/sessions").json()] == [first.session_id]


def test_a_shutdown_ends_waiting_chats_with_a_clear_error(tmp_path: Path, held: Held) -> None:
    app = create_app(held_agent(held), db_path=str(tmp_path / "s.db"), max_background_runs=1, max_queued_runs=1)
    srv = ThreadServer(app).__enter__()
    try:
        first = busy_with(srv, held)
        second = Streaming(srv.url, {"message": "too late"})
        second.wait("run_waiting")
    finally:
        srv.__exit__(None, None, None)
    assert second.ended()[-1] == "error"
    (error,) = second.of("error")
    assert error["type"] == "ServerShutdown" and error["resumable"] is False and error["hint"]
    assert first.ended()[-1] == "error" and first.of("error")[-1]["resumable"] is True


# --------------------------------------------------------------------------- lovia web flags


def test_lovia_web_takes_the_cap_from_its_flag_before_the_environment(tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    env = {"LOVIA_MAX_RUNS": "5", "LOVIA_RUN_QUEUE": "1", "LOVIA_FIXTURE_SLOW": "60", "LOVIA_FIXTURE_LOG": str(log)}
    args = ("--db", str(tmp_path / "cli.db"), "--app", "tests.web.app_fixture:agent", "--no-workspace")
    with ProcessServer(*args, "--max-runs", "1", env=env) as srv:
        sse(srv.url, "/api/chat/stream", {"message": "first"}, until="tool_call")  # it runs on, detached
        wait_for(lambda: log.exists() and "slow:start" in log.read_text(), timeout=30)
        waiting = sse(srv.url, "/api/chat/stream", {"message": "second"}, until="run_waiting")
        assert waiting.of("run_waiting")[0]["position"] == 1  # the environment's line of 1
        refused = httpx.post(f"{srv.url}/api/chat/stream", json={"message": "third"}, timeout=30)
        assert refused.status_code == 429
        assert "limit of 1 concurrent runs and its 1 waiting places" in refused.json()["detail"]["message"]


@pytest.mark.parametrize(
    ("flags", "env", "needle", "hint"),
    [
        (("--max-runs", "0"), {}, "--max-runs 0 must be at least 1", "hint: e.g. --max-runs 8"),
        (("--max-runs", "lots"), {}, "--max-runs 'lots' is not a whole number", "hint: e.g. --max-runs 8"),
        ((), {"LOVIA_MAX_RUNS": "-2"}, "LOVIA_MAX_RUNS=-2 must be at least 1", "hint: e.g. --max-runs 8"),
        ((), {"LOVIA_RUN_QUEUE": "few"}, "LOVIA_RUN_QUEUE='few' is not a whole number", "hint: e.g. --run-queue"),
        (("--run-queue", "-1"), {}, "--run-queue -1 must be at least 0", "hint: e.g. --run-queue"),
    ],
)
def test_lovia_web_refuses_a_bad_cap_with_a_hint(
    tmp_path: Path, flags: tuple[str, ...], env: dict[str, str], needle: str, hint: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lovia.web", "--db", str(tmp_path / "x.db"), *flags],
        cwd=ROOT,
        env={**os.environ, **env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stderr and hint in done.stderr
    assert not (tmp_path / "x.db").exists()  # refused before anything was opened


# --------------------------------------------------------------------------- the line itself


def test_the_line_is_first_in_first_out_and_bounded() -> None:
    line: RunQueue[str] = RunQueue()
    a, b, c = "a", "b", "c"
    assert line.push(a, limit=2) == 1 and line.push(b, limit=2) == 2
    assert line.push(c, limit=2) is None and not line.has_room(2)
    assert line.position(b) == 2 and line.position(c) is None
    assert line.remove(a) and not line.remove(a) and line.position(b) == 1
    assert line.push(c, limit=2) == 2
    assert line.pop() == b and list(line) == [c]
    assert line.clear() == [c] and len(line) == 0 and line.pop() is None
