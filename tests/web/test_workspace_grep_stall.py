"""A scripted model greps a hostile pattern in the default coding mode: the server keeps answering."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app
from lovia.workspace import Workspace, WorkspaceLimits

from .helpers import ThreadServer, sse


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[ThreadServer]:
    root = tmp_path / "proj"
    root.mkdir()
    # 27 characters: about a minute of backtracking for Python's re (the old code froze the loop that long).
    (root / "crafted.txt").write_text("a" * 27 + "!\n")
    model = ScriptedProvider([call("grep_files", {"pattern": "(a|a)+$"}, call_id="c1"), text("done")])
    workspace = Workspace.local(str(root), limits=WorkspaceLimits(max_grep_seconds=3.0))
    agents: dict[str, Agent[Any]] = {"coder": Agent(name="coder", model=model, workspace=workspace)}
    with ThreadServer(create_app(agents, db_path=str(tmp_path / "web.db"))) as s:
        yield s


def test_healthz_stays_fast_while_a_hostile_grep_runs(srv: ThreadServer) -> None:
    latencies: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                began = time.monotonic()
                assert client.get(f"{srv.url}/healthz").status_code == 200
                latencies.append(time.monotonic() - began)
                time.sleep(0.05)

    prober = threading.Thread(target=probe)
    began = time.monotonic()
    prober.start()
    try:
        stream = sse(srv.url, "/api/chat/stream", {"message": "grep it"}, timeout=30)
    finally:
        stop.set()
        prober.join()
    took = time.monotonic() - began
    body = str(stream.frames)
    assert "did not finish within 3s" in body
    assert took < 15
    assert len(latencies) > 10
    # Nine in ten answers under 100 ms (the machine is shared: a few may wait for a core), and none
    # stalls: the old code held the event loop for the whole backtracking, about a minute.
    ordered = sorted(latencies)
    assert ordered[int(len(ordered) * 0.9)] < 0.1 and ordered[-1] < 1.0, f"slowest answers: {ordered[-5:]}"
