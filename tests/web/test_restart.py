"""Server-owned runs survive the server: SIGKILL mid-tool and graceful shutdown, then resume on reconnect."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.stores import SQLiteCheckpointer

from .helpers import ProcessServer, sse, wait_for

APP = "tests.web.app_fixture:agent"


def kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [e["type"] if e["type"] != "input" else e["role"] for e in entries]


async def load_snapshot(db: str, run_id: str) -> Any:
    async with SQLiteCheckpointer(db, wal=True) as cp:
        return await cp.load(run_id)


def log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_interrupted_run_resumes_after_restart(tmp_path: Path, how: str) -> None:
    db, log = str(tmp_path / "chat.db"), tmp_path / "tools.log"
    env = {"LOVIA_FIXTURE_LOG": str(log), "LOVIA_FIXTURE_SLOW": "1.0"}
    args = ("--db", db, "--app", APP)
    first = ProcessServer(*args, env=env).start()
    try:
        s = sse(first.url, "/api/chat/stream", {"message": "make the report"}, until="tool_call")
        sid = s.of("session")[0]["session_id"]
        run_id = s.of("snapshot")[0]["run_id"]
        wait_for(lambda: "slow:start" in log_lines(log))
    finally:
        code = first.kill(signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
    assert code == (-signal.SIGKILL if how == "sigkill" else -signal.SIGTERM) or (how == "sigterm" and code == 0)
    assert log_lines(log) == ["quick", "slow:start"]  # killed mid-tool
    snap = asyncio.run(load_snapshot(db, run_id))
    assert snap is not None and [e.type for e in snap.entries] == ["input", "tool_call", "tool_result", "tool_call"]
    # a graceful stop cancels cooperatively and records it; SIGKILL leaves the last save ("running")
    assert snap.status == ("running" if how == "sigkill" else "interrupted")

    with ProcessServer(*args, env=env, port=first.port) as second:
        meta = httpx.get(f"{second.url}/api/sessions/{sid}").json()
        assert meta["active_run_id"] == run_id and meta["live"] is False
        # The interrupted run lives in its checkpoint; the chat shows its completed turns (the call in
        # flight, with no result yet, left out).
        assert kinds(meta["transcript"]) == ["user", "tool_call", "tool_result"]
        r = sse(second.url, f"/api/chat/reconnect?session_id={sid}")
        snap = r.of("snapshot")[0]
        assert snap["resumed"] is True and snap["run_id"] == run_id
        assert kinds(snap["transcript"]) == ["user", "tool_call", "tool_result", "tool_call"]
        assert r.names()[-1] == "done" and r.of("done")[0]["output"] == "All done: quick and slow both finished."
        after = httpx.get(f"{second.url}/api/sessions/{sid}").json()

    assert kinds(after["transcript"]) == [
        "user",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "assistant_text",
    ]
    assert [e["content"] for e in after["transcript"] if e["type"] == "input"] == ["make the report"]
    assert [e["call_id"] for e in after["transcript"] if e["type"] == "tool_result"] == ["call_quick", "call_slow"]
    assert after["active_run_id"] is None
    # the completed quick result was not re-run; the interrupted slow call ran again, once
    assert log_lines(log) == ["quick", "slow:start", "slow:start", "slow:done"]
