"""A chat's background processes over real HTTP: started by a scripted agent's real shell tool.

The page's views are passive: what the output route shows, the model's ``read_process_output``
still gets; a kill from the page leaves the final output to the model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.web import create_app

from .helpers import ThreadServer, wait_for
from .processes_helpers import process_agent


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[ThreadServer]:
    root = tmp_path / "proj"
    root.mkdir()
    with ThreadServer(create_app({"procs": process_agent(root)}, db_path=str(tmp_path / "web.db"))) as s:
        yield s


def _chat(srv: ThreadServer, message: str, session_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    r = httpx.post(srv.url + "/api/chat", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _get(srv: ThreadServer, path: str) -> httpx.Response:
    return httpx.get(srv.url + path, timeout=30)


def _refused(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert detail["code"] == code and detail["message"] and detail["hint"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def _group(leader: int) -> list[int]:
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.getpgid(int(p)) == leader:
                    found.append(int(p))
            except OSError:
                pass
    return found


def test_list_peek_without_consuming_then_the_model_reads_it(srv: ThreadServer) -> None:
    first = _chat(srv, "start echo alpha; echo beta; exit 5")
    sid = first["session_id"]
    assert "bg-1" in first["output"]
    listed = _get(srv, f"/api/sessions/{sid}/processes").json()
    assert [(p["process_id"], p["command"]) for p in listed] == [("bg-1", "echo alpha; echo beta; exit 5")]

    def exited() -> dict[str, Any] | None:
        out = _get(srv, f"/api/sessions/{sid}/processes/bg-1/output").json()
        return out if out["status"] == "exited" else None

    out = wait_for(exited, timeout=30)
    assert out["output"].split() == ["alpha", "beta"] and out["exit_code"] == 5 and out["truncated"] is False
    again = _get(srv, f"/api/sessions/{sid}/processes/bg-1/output").json()
    assert again["output"] == out["output"]
    status = _get(srv, f"/api/sessions/{sid}/processes").json()[0]
    assert status == {
        "process_id": "bg-1",
        "command": "echo alpha; echo beta; exit 5",
        "status": "exited",
        "exit_code": 5,
    }
    # The model's own read still gets everything the page already showed.
    read = _chat(srv, "read bg-1", sid)["output"]
    assert "alpha" in read and "beta" in read and "exited" in read
    # ...and the page still shows the tail after the model drained its buffer.
    assert _get(srv, f"/api/sessions/{sid}/processes/bg-1/output").json()["output"].split() == ["alpha", "beta"]


def test_kill_from_the_page_leaves_the_output_to_the_model(srv: ThreadServer) -> None:
    sid = _chat(srv, "start echo ready; sleep 120 & wait")["session_id"]
    wait_for(lambda: "ready" in _get(srv, f"/api/sessions/{sid}/processes/bg-1/output").json()["output"], timeout=30)
    # The process group leader is the shell; find it through its children.
    leader = _our_sleeper()
    group = _group(os.getpgid(leader))
    killed = httpx.post(srv.url + f"/api/sessions/{sid}/processes/bg-1/kill", timeout=30)
    assert killed.status_code == 200, killed.text
    assert killed.json() == {
        "process_id": "bg-1",
        "command": "echo ready; sleep 120 & wait",
        "status": "killed",
        "exit_code": killed.json()["exit_code"],
    }
    wait_for(lambda: not any(_alive(p) for p in group), timeout=30)
    assert _get(srv, f"/api/sessions/{sid}/processes").json()[0]["status"] == "killed"
    read = _chat(srv, "read bg-1", sid)["output"]
    assert "ready" in read and "killed" in read
    again = httpx.post(srv.url + f"/api/sessions/{sid}/processes/bg-1/kill", timeout=30)  # idempotent
    assert again.status_code == 200 and again.json()["status"] == "killed"


def _parent(pid: int) -> int:
    try:  # the field after the parenthesised command name (which may itself hold spaces)
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this test process (other suites on the machine run sleepers too)."""
    me = os.getpid()
    for _ in range(64):
        pid = _parent(pid)
        if pid == me:
            return True
        if pid <= 1:
            return False
    return False


def _our_sleeper() -> int:
    """The ``sleep 120`` this test's background process started (not another test run's)."""
    found = [int(p) for p in os.listdir("/proc") if p.isdigit() and _cmdline(int(p)) == "sleep 120" and _ours(int(p))]
    assert len(found) == 1, found
    return found[0]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_unknown_chat_unknown_process_and_a_chat_without_processes(srv: ThreadServer) -> None:
    unknown = _get(srv, "/api/sessions/nope/processes")  # an unknown chat runs nothing: an empty list
    assert unknown.status_code == 200 and unknown.json() == []
    _refused(_get(srv, "/api/sessions/nope/processes/bg-1/output"), 404, "session_not_found")
    _refused(httpx.post(srv.url + "/api/sessions/nope/processes/bg-1/kill"), 404, "session_not_found")
    quiet = _chat(srv, "hello")["session_id"]  # a chat whose agent never started anything
    empty = _get(srv, f"/api/sessions/{quiet}/processes")
    assert empty.status_code == 200 and empty.json() == []
    _refused(_get(srv, f"/api/sessions/{quiet}/processes/bg-1/output"), 404, "process_not_found")
    _refused(httpx.post(srv.url + f"/api/sessions/{quiet}/processes/bg-1/kill"), 404, "process_not_found")
    created = httpx.post(srv.url + "/api/sessions", json={}).json()["id"]  # no run yet: no workspace session
    assert _get(srv, f"/api/sessions/{created}/processes").json() == []
    sid = _chat(srv, "start sleep 60")["session_id"]
    missing = _get(srv, f"/api/sessions/{sid}/processes/p9/output")
    _refused(missing, 404, "process_not_found")
    assert "bg-1" in missing.json()["detail"]["message"]
    # Another chat's process is not this chat's.
    _refused(_get(srv, f"/api/sessions/{quiet}/processes/bg-1/output"), 404, "process_not_found")


def test_deleting_the_chat_reaps_its_processes(srv: ThreadServer) -> None:
    sid = _chat(srv, "start echo up; sleep 120 & wait")["session_id"]
    wait_for(lambda: "up" in _get(srv, f"/api/sessions/{sid}/processes/bg-1/output").json()["output"], timeout=30)
    sleeper = _our_sleeper()
    assert httpx.delete(srv.url + f"/api/sessions/{sid}", timeout=30).status_code == 200
    wait_for(lambda: not _alive(sleeper), timeout=30)
    assert _get(srv, f"/api/sessions/{sid}/processes").json() == []  # the deleted chat lists nothing


def test_the_token_and_the_origin_check_guard_the_kill(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    app = create_app({"procs": process_agent(root)}, db_path=str(tmp_path / "t.db"), token="pr0c-token")
    auth = {"Authorization": "Bearer pr0c-token"}
    with ThreadServer(app) as s:
        r = httpx.post(s.url + "/api/chat", json={"message": "start sleep 120"}, headers=auth, timeout=60)
        sid = r.json()["session_id"]
        kill = f"{s.url}/api/sessions/{sid}/processes/bg-1/kill"
        _refused(httpx.get(f"{s.url}/api/sessions/{sid}/processes"), 401, "server_token")
        _refused(httpx.post(kill), 401, "server_token")
        _refused(httpx.post(kill, headers={**auth, "Origin": "http://evil.example"}), 403, "cross_origin")
        listed = httpx.get(f"{s.url}/api/sessions/{sid}/processes", headers=auth).json()
        assert listed[0]["status"] == "running"  # the refused kills did nothing
        assert httpx.post(kill, headers={**auth, "Origin": s.url}, timeout=30).json()["status"] == "killed"
