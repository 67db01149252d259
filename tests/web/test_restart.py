"""Server-owned runs survive the server: SIGKILL mid-tool and graceful shutdown, then the next server resumes them."""

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
        # Nobody opens the chat: the new server resumes the run it finds interrupted by itself.
        wait_for(lambda: "slow:done" in log_lines(log), timeout=30)
        wait_for(lambda: httpx.get(f"{second.url}/api/sessions/{sid}").json()["active_run_id"] is None, timeout=30)
        after = httpx.get(f"{second.url}/api/sessions/{sid}").json()
        history = httpx.get(f"{second.url}/api/runs/history", params={"session_id": sid}).json()
        # a page that reconnects now finds the run over and re-reads the chat (run_not_found)
        late = httpx.post(f"{second.url}/api/chat/reconnect", params={"session_id": sid})
        assert late.status_code == 404 and late.json()["detail"]["code"] == "run_not_found"

    rows = history if isinstance(history, list) else history.get("runs", [])
    assert [r["status"] for r in rows if r["run_id"] == run_id] == ["completed"]
    assert [e["content"] for e in after["transcript"] if e["type"] == "assistant_text"] == [
        "All done: quick and slow both finished."
    ]
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
