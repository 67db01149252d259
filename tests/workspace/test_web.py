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
    check = ScriptedProvider([call("read_process_output", {"process_id": "p1"}, call_id="r"), text("up")])
    result = await Runner.run(await sessions.bind("chat-1", agent(check)), "still up?")
    out = next(e for e in result.entries if isinstance(e, ToolResultEntry))
    assert "p1: running" in out.output
    other = ScriptedProvider([call("read_process_output", {"process_id": "p1"}, call_id="r"), text("no")])
    result = await Runner.run(sessions.bind_now("chat-2", agent(other)), "yours?")
    assert "no background process" in next(e for e in result.entries if isinstance(e, ToolResultEntry)).output
    pid = live.background_processes() and live._procs["p1"].proc.pid  # type: ignore[attr-defined]
    await sessions.close("chat-1")
    assert sessions.get("chat-1") is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    await sessions.aclose()
