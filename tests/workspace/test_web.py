"""`lovia web` workspace flags and the per-chat workspace sessions."""

from __future__ import annotations

import os

import pytest

from lovia import Agent, Runner
from lovia.cli import build_parser
from lovia.exceptions import UserError
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.web.workspaces import WorkspaceSessions, resolve_workspace, served_with_workspace
from lovia.workspace import LocalWorkspace, Workspace


def _args(*argv: str):
    return build_parser().parse_args(["web", *argv])


def test_flags_resolve_to_a_workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    default = resolve_workspace(None, None, False)
    assert isinstance(default, LocalWorkspace) and default.root == str(tmp_path)
    assert default.policy.shell_default == "ask" and default.policy.read_outside == "ask"  # coding
    ro = resolve_workspace(str(tmp_path), "readonly", False)
    assert ro is not None and not ro.policy.allow_shell
    tr = resolve_workspace(str(tmp_path), "trusted", False)
    assert tr is not None and tr.policy.shell_default == "allow"
    assert resolve_workspace(None, None, True) is None
    with pytest.raises(UserError, match="not a directory"):
        resolve_workspace(str(tmp_path / "missing"), None, False)
    with pytest.raises(UserError, match="cannot be combined"):
        resolve_workspace(None, "trusted", True)


def test_the_cli_parses_the_flags(tmp_path):
    args = _args("--workspace", str(tmp_path), "--trusted")
    assert (args.workspace, args.workspace_mode, args.no_workspace) == (str(tmp_path), "trusted", False)
    assert _args("--no-workspace").no_workspace
    with pytest.raises(SystemExit):
        _args("--readonly", "--trusted")
    with pytest.raises(SystemExit):
        _args("--workspace", str(tmp_path), "--no-workspace")


def test_the_default_agent_gets_a_coding_workspace_on_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOVIA_MODEL", "openai:gpt-4o-mini")
    served = served_with_workspace(None, _args())
    (agent,) = served.values()
    assert isinstance(agent.workspace, LocalWorkspace) and agent.workspace.root == str(tmp_path)
    assert served_with_workspace(None, _args("--no-workspace")) is None
    monkeypatch.delenv("LOVIA_MODEL")
    assert served_with_workspace(None, _args()) is None  # the offline demo is served as it is


def test_app_agents_get_a_workspace_only_when_asked(tmp_path):
    mine = Agent(name="mine", model="openai:gpt-4o-mini")
    assert served_with_workspace(mine, _args()) is mine
    served = served_with_workspace(mine, _args("--workspace", str(tmp_path), "--readonly"))
    assert not served["mine"].workspace.policy.allow_shell
    own = Workspace.local(str(tmp_path), mode="trusted")
    keeps = served_with_workspace(Agent(name="own", model="openai:gpt-4o-mini", workspace=own), _args("--readonly"))
    assert keeps["own"].workspace is own


async def test_one_workspace_session_per_chat(tmp_path):
    sessions = WorkspaceSessions()
    ws = Workspace.local(str(tmp_path), mode="trusted")

    def agent(model):
        return Agent(name="coder", model=model, workspace=ws)

    start = ScriptedProvider([call("shell", {"command": "sleep 60", "background": True}), text("started")])
    await Runner.run(sessions.bind_now("chat-1", agent(start)), "start a server")
    live = sessions.get("chat-1")
    assert live is not None and live.background_processes()[0].status == "running"
    check = ScriptedProvider([call("read_process_output", {"process_id": "bg-1"}, call_id="r"), text("up")])
    result = await Runner.run(await sessions.bind("chat-1", agent(check)), "still up?")
    out = next(e for e in result.entries if isinstance(e, ToolResultEntry))
    assert "bg-1: running" in out.output
    other = ScriptedProvider([call("read_process_output", {"process_id": "bg-1"}, call_id="r"), text("no")])
    result = await Runner.run(sessions.bind_now("chat-2", agent(other)), "yours?")
    assert "no background process" in next(e for e in result.entries if isinstance(e, ToolResultEntry)).output
    pid = live.background_processes() and live._procs["bg-1"].proc.pid  # type: ignore[attr-defined]
    await sessions.close("chat-1")
    assert sessions.get("chat-1") is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    await sessions.aclose()


# ---------------------------------------------------------------------- through the served app


def _coder(root) -> Agent:
    from lovia.transcript import InputEntry

    def script(entries, tools):
        entries = [e for e in entries if not (isinstance(e, InputEntry) and "<system-reminder>" in e.text)]
        last_user = [e for e in entries if isinstance(e, InputEntry) and e.role == "user"][-1].text
        answered = isinstance(entries[-1], ToolResultEntry)
        if answered:
            return text("done: " + entries[-1].output.splitlines()[0])
        if last_user.startswith("make"):
            return call("shell", {"command": "touch made.txt"}, call_id=f"c{len(entries)}")
        if last_user.startswith("serve"):
            return call("shell", {"command": "sleep 60", "background": True}, call_id=f"c{len(entries)}")
        return call("read_process_output", {"process_id": "bg-1"}, call_id=f"c{len(entries)}")

    return Agent(name="coder", model=ScriptedProvider(script), workspace=Workspace.local(str(root), mode="coding"))


def test_web_approve_and_deny_decide_workspace_asks(tmp_path):
    import httpx

    from lovia.web import create_app
    from tests.web.helpers import ThreadServer, sse, wait_for

    root = tmp_path / "ws"
    root.mkdir()
    app = create_app(_coder(root), db_path=str(tmp_path / "web.db"))
    with ThreadServer(app) as server:
        for decision, made in (("deny", False), ("approve", True)):
            s = sse(server.url, "/api/chat/stream", {"message": "make a file"}, until="approval_required")
            asked, sid = s.of("approval_required")[0], s.of("session")[0]["session_id"]
            assert asked["name"] == "shell"
            r = httpx.post(
                f"{server.url}/api/chat/approve", json={"session_id": sid, "call_id": asked["id"], "decision": decision}
            )
            assert r.status_code == 200
            wait_for(lambda sid=sid: not httpx.get(f"{server.url}/api/sessions/{sid}").json()["live"])
            assert (root / "made.txt").exists() is made


def test_web_keeps_a_chat_s_background_process_between_messages(tmp_path):
    import httpx

    from lovia.web import create_app
    from tests.web.helpers import ThreadServer, sse, wait_for

    root = tmp_path / "ws"
    root.mkdir()
    app = create_app(_coder(root), db_path=str(tmp_path / "web.db"))
    with ThreadServer(app) as server:
        s = sse(server.url, "/api/chat/stream", {"message": "serve it"}, until="approval_required")
        asked, sid = s.of("approval_required")[0], s.of("session")[0]["session_id"]
        httpx.post(
            f"{server.url}/api/chat/approve", json={"session_id": sid, "call_id": asked["id"], "decision": "approve"}
        )
        wait_for(lambda: not httpx.get(f"{server.url}/api/sessions/{sid}").json()["live"])
        second = sse(server.url, "/api/chat/stream", {"message": "is it up?", "session_id": sid})
        assert "done: bg-1: running" in second.text()
        live = app.state.lovia.supervisor.workspaces.get(sid)
        pids = [p.proc.pid for p in live._procs.values()]  # type: ignore[attr-defined]
        assert len(pids) == 1
        assert httpx.delete(f"{server.url}/api/sessions/{sid}").status_code == 200
        for pid in pids:
            wait_for(lambda pid=pid: not os.path.exists(f"/proc/{pid}") or _zombie(pid))


def _zombie(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    except OSError:
        return True
