"""Agent(workspace=...): tool bundle, generated prompt section, approval of ``ask``, ctx.workspace."""

from __future__ import annotations

import os

import pytest

from lovia import Agent, RunContext, Runner, tool
from lovia.exceptions import UserError
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import InputEntry, ToolResultEntry
from lovia.workspace import CommandRule, Workspace


def _results(result) -> dict[str, ToolResultEntry]:
    return {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}


def _tool_names(model: ScriptedProvider) -> set[str]:
    return {t.name for t in model.requests[0].tools} - {"recall_tool_result"}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("readonly", {"read_file", "view_image", "list_files", "grep_files"}),
        (
            "coding",
            {
                "read_file",
                "view_image",
                "list_files",
                "grep_files",
                "write_file",
                "edit_file",
                "shell",
                "read_process_output",
                "kill_process",
            },
        ),
    ],
)
async def test_the_bundle_follows_the_policy(tmp_path, mode, expected):
    model = ScriptedProvider([text("ok")])
    agent = Agent(name="a", model=model, workspace=Workspace.local(str(tmp_path), mode=mode))
    await Runner.run(agent, "hi")
    assert _tool_names(model) == expected


async def test_the_system_prompt_gets_a_workspace_section_that_matches_the_policy(tmp_path):
    model = ScriptedProvider([text("ok")])
    ws = Workspace.local(str(tmp_path), mode="readonly", denied_paths=(".env*",))
    await Runner.run(Agent(name="a", instructions="Be brief.", model=model, workspace=ws), "hi")
    system = model.requests[0].entries[0]
    assert isinstance(system, InputEntry) and system.role == "system"
    assert "Be brief." in system.text and "## Workspace" in system.text
    assert "Writing files inside it: not allowed" in system.text and "Shell commands: not available" in system.text
    assert "`.env*`" in system.text


async def test_ask_without_an_approver_is_denied_and_the_model_adapts(tmp_path):
    model = ScriptedProvider([call("shell", {"command": "touch made.txt"}, call_id="c1"), text("could not")])
    agent = Agent(name="a", model=model, workspace=Workspace.local(str(tmp_path), mode="coding"))
    result = await Runner.run(agent, "make a file")
    assert result.output == "could not"
    assert "not approved" in _results(result)["c1"].output
    assert not (tmp_path / "made.txt").exists()


async def test_ask_approved_by_the_handler_runs(tmp_path):
    seen = []

    def approve(call, ctx):
        seen.append(call.name)
        return True

    model = ScriptedProvider([call("shell", {"command": "touch made.txt"}, call_id="c1"), text("done")])
    agent = Agent(name="a", model=model, workspace=Workspace.local(str(tmp_path)), approval_handler=approve)
    await Runner.run(agent, "make a file")
    assert seen == ["shell"] and (tmp_path / "made.txt").exists()


async def test_allowed_commands_and_inside_writes_need_no_approval(tmp_path):
    model = ScriptedProvider(
        [
            call("write_file", {"path": "x.txt", "content": "1"}, call_id="w"),
            call("shell", {"command": "cat x.txt"}, call_id="s"),
            text("done"),
        ]
    )
    ws = Workspace.local(str(tmp_path), command_rules=(CommandRule("cat", "allow"),))
    result = await Runner.run(Agent(name="a", model=model, workspace=ws), "go")
    assert "exit code 0" in _results(result)["s"].output and "1" in _results(result)["s"].output


async def test_stream_consumer_approves_an_outside_read(tmp_path):
    from lovia import events

    outside = tmp_path / "outside.txt"
    outside.write_text("far away\n")
    root = tmp_path / "root"
    root.mkdir()
    model = ScriptedProvider([call("read_file", {"path": str(outside)}, call_id="r"), text("read it")])
    handle = Runner.stream(Agent(name="a", model=model, workspace=Workspace.local(str(root))), "read")
    async for event in handle:
        if isinstance(event, events.ApprovalRequired):
            event.approve()
    result = await handle.result()
    assert "far away" in _results(result)["r"].output


async def test_denials_reach_the_model_as_tool_errors(tmp_path):
    model = ScriptedProvider([call("read_file", {"path": ".env"}, call_id="r"), text("fine")])
    (tmp_path / ".env").write_text("KEY=secret-value\n")
    ws = Workspace.local(str(tmp_path), denied_paths=(".env*",))
    result = await Runner.run(Agent(name="a", model=model, workspace=ws), "read")
    out = _results(result)["r"]
    assert out.is_error and "denied" in out.output and "secret-value" not in out.output


async def test_custom_tools_reach_the_session_as_ctx_workspace(tmp_path):
    (tmp_path / "data.txt").write_text("42\n")

    @tool
    async def answer(ctx: RunContext) -> str:
        """Read the answer."""
        assert ctx.workspace.decide_path("data.txt") == "allow"
        return (await ctx.workspace.read_text("data.txt")).content.strip()

    model = ScriptedProvider([call("answer", {}, call_id="a"), text("ok")])
    result = await Runner.run(
        Agent(name="a", model=model, tools=[answer], workspace=Workspace.local(str(tmp_path))), "x"
    )
    assert _results(result)["a"].output == "42"


async def test_mutators_are_barriers_and_shell_is_not_idempotent(tmp_path):
    tools = {t.name: t for t in Workspace.local(str(tmp_path)).tools()}
    assert not tools["write_file"].parallel and not tools["edit_file"].parallel and not tools["shell"].parallel
    assert not tools["kill_process"].parallel
    assert tools["read_file"].parallel and tools["grep_files"].parallel and tools["list_files"].parallel
    assert tools["write_file"].idempotent and tools["edit_file"].idempotent and not tools["shell"].idempotent


async def test_a_clashing_tool_name_is_a_user_error(tmp_path):
    @tool
    async def read_file(path: str) -> str:
        """Mine."""
        return ""

    agent = Agent(
        name="a", model=ScriptedProvider([text("x")]), tools=[read_file], workspace=Workspace.local(str(tmp_path))
    )
    with pytest.raises(UserError, match="read_file"):
        await Runner.run(agent, "x")


async def test_background_processes_are_reminded_each_turn_and_die_with_the_run(tmp_path):
    model = ScriptedProvider(
        [
            call("shell", {"command": "sleep 60", "background": True}, call_id="bg"),
            call("list_files", {}, call_id="ls"),
            text("done"),
        ]
    )
    ws = Workspace.local(str(tmp_path), mode="trusted")
    result = await Runner.run(Agent(name="a", model=model, workspace=ws), "serve")
    reminders = [e for e in model.requests[1].entries if isinstance(e, InputEntry) and "Background processes" in e.text]
    assert len(reminders) == 1 and "bg-1: running `sleep 60`" in reminders[0].text
    assert not any(isinstance(e, InputEntry) and "Background processes" in e.text for e in result.entries)
    pid = _results(result)["bg"].raw.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_bound_session_survives_across_runs(tmp_path):
    ws = Workspace.local(str(tmp_path), mode="trusted")
    async with ws.session() as bound:
        first = ScriptedProvider([call("shell", {"command": "sleep 60", "background": True}), text("started")])
        await Runner.run(Agent(name="a", model=first, workspace=bound), "start")
        second = ScriptedProvider([call("read_process_output", {"process_id": "bg-1"}, call_id="r"), text("checked")])
        result = await Runner.run(Agent(name="a", model=second, workspace=bound), "check")
        assert "bg-1: running" in _results(result)["r"].output
    live = await bound.open()
    assert live.closed  # type: ignore[attr-defined]


async def test_a_run_without_workspace_has_none(tmp_path):
    @tool
    async def probe(ctx: RunContext) -> str:
        """Probe."""
        return repr(ctx.workspace)

    model = ScriptedProvider([batch(("probe", {})), text("ok")])
    result = await Runner.run(Agent(name="a", model=model, tools=[probe]), "x")
    assert list(_results(result).values())[0].output == "None"


async def test_failed_edits_and_refused_creates_are_tool_errors(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    model = ScriptedProvider(
        [
            batch(
                ("edit_file", {"path": "a.txt", "old": "zzz", "new": "y"}, "e"),
                ("write_file", {"path": "a.txt", "content": "new", "create_only": True}, "w"),
            ),
            text("ok"),
        ]
    )
    result = await Runner.run(Agent(name="a", model=model, workspace=Workspace.local(str(tmp_path))), "x")
    out = _results(result)
    assert out["e"].is_error and "not found" in out["e"].output
    assert out["w"].is_error and "already exists" in out["w"].output
    assert (tmp_path / "a.txt").read_text() == "one\n"


async def test_with_workspace_extends_a_frozen_activation(tmp_path):
    """The hook for a loop whose activation is an immutable value (fields agent, tools, plugins)."""
    from dataclasses import dataclass

    from lovia.run_context import RunContext
    from lovia.workspace._attach import with_workspace

    @dataclass(frozen=True)
    class Active:
        agent: Agent
        tools: dict
        plugins: tuple

    agent = Agent(name="a", model=ScriptedProvider([]), workspace=Workspace.local(str(tmp_path)))
    ctx = RunContext(context=None, agent=agent, run_id="r1")
    closers: list = []
    first = await with_workspace(Active(agent, {}, ()), ctx, closers)
    assert {"read_file", "shell"} <= set(first.tools) and "## Workspace" in first.plugins[-1].instructions
    assert ctx.workspace is not None and len(closers) == 1
    again = await with_workspace(Active(agent, {}, ()), ctx, closers)  # a handoff back: same session
    assert len(closers) == 1 and again.tools.keys() == first.tools.keys()
    plain = Agent(name="b", model=ScriptedProvider([]))
    untouched = Active(plain, {}, ())
    assert await with_workspace(untouched, ctx, closers) is untouched and ctx.workspace is None
    await closers[0]()
