"""Subagents: background children, their reports, steering, cancellation and parent crashes."""

from __future__ import annotations

import asyncio
import re

import pytest

from lovia import Agent, RunContext, Runner, Subagents, UserError, events, tool
from lovia.plugins.subagents import SubagentReport
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.testing.crash import Boundary, crash_test, ledger
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

FACTORY = "tests.plugins.subagent_scenarios:subagent_scenario"


def outputs(result, name=None) -> list[str]:
    calls = {e.call_id: e.name for e in result.entries if isinstance(e, ToolCallEntry)}
    return [
        e.output
        for e in result.entries
        if isinstance(e, ToolResultEntry) and (name is None or calls.get(e.call_id) == name)
    ]


def started_id(entries) -> str:
    for e in entries:
        if isinstance(e, ToolResultEntry) and e.output.startswith("Started subagent"):
            return re.match(r"Started subagent (\S+)", e.output).group(1)
    raise AssertionError("no spawn")


async def open_sqlite(path: str):
    return SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)


# ----------------------------------------------------------------------------- crashes


@pytest.mark.parametrize("crash_in", ["file_report", "dig"])
async def test_a_sigkilled_parent_resumes_with_its_childs_result_intact(tmp_path, crash_in) -> None:
    report = await crash_test(
        FACTORY,
        store=str(tmp_path / "crash.db"),
        reference_store=str(tmp_path / "reference.db"),
        run_id="lead-1",
        boundary=Boundary.IN_TOOL,
        tool=crash_in,
        workdir=tmp_path,
        open_stores=open_sqlite,
    )
    assert report.crashed.killed, report.crashed.stderr
    assert report.ok, report.problems
    assert report.resumed.result["output"] == "Done. found a coin at north field"
    digs = [row for row in ledger(tmp_path / "crash.ledger") if row["tool"] == "dig"]
    if crash_in == "file_report":
        assert len(digs) == 1  # the child had finished: its report was kept, it never ran again
    else:
        assert len(digs) == 2  # killed inside the child: the child resumed its dangling call once
    session, _ = await open_sqlite(str(tmp_path / "crash.db"))
    stored = await session.load("crash-session")
    assert sum("<subagent-report" in e.output for e in stored if isinstance(e, ToolResultEntry)) == 1


# ----------------------------------------------------------------------------- limits and failures


async def test_spawns_beyond_max_concurrent_are_declined_and_unknown_agents_refused() -> None:
    slow = Agent(name="slow", model=ScriptedProvider(lambda e, t: text("late", delay=0.2)))
    parent = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "a"}, call_id="s1"),
            call("spawn_subagent", {"prompt": "b"}, call_id="s2"),
            call("spawn_subagent", {"prompt": "c", "agent": "ghost"}, call_id="s3"),
            call("cancel_subagent", {"id": "nope"}, call_id="c1"),
            text("ok"),
        ]
    )
    agent = Agent(name="p", model=parent, plugins=[Subagents([slow], max_concurrent=1)])
    result = await Runner.run(agent, "go")
    first, second, ghost, cancel = outputs(result)
    assert first.startswith("Started subagent t1 ")
    assert second.startswith("Declined: 1 subagents are already running")
    assert ghost.startswith("Error: no subagent named 'ghost'; available: slow")
    assert cancel == "Error: subagent nope is not running."


async def test_a_failing_child_reports_its_error() -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    def child(entries, tools):
        return call("explode", {}) if len(entries) < 4 else text("never")

    broken = Agent(
        name="broken", model=ScriptedProvider(lambda e, t: (_ for _ in ()).throw(RuntimeError("model exploded")))
    )
    parent = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "x"}, call_id="s1"),
            call("wait_subagents", {"timeout_seconds": 5}, call_id="w"),
            text("ok"),
        ]
    )
    result = await Runner.run(Agent(name="p", model=parent, plugins=[Subagents([broken])]), "go")
    [waited] = outputs(result, "wait_subagents")
    assert 'status="failed"' in waited and "model exploded" in waited


# ----------------------------------------------------------------------------- reports


async def test_wait_returns_the_report_once_and_withdraws_the_mailbox_copy() -> None:
    child_model = ScriptedProvider([text("The answer is 42.")])
    parent = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "Compute the answer."}, call_id="s1"),
            call("wait_subagents", {"timeout_seconds": 10}, call_id="w1"),
            text("It is 42."),
        ]
    )
    child = Agent(name="calc", model=child_model)
    result = await Runner.run(Agent(name="p", model=parent, plugins=[Subagents([child])]), "What is the answer?")
    [waited] = outputs(result, "wait_subagents")
    assert "The answer is 42." in waited and 'agent="calc"' in waited
    everything = [str(getattr(e, "content", "")) + getattr(e, "output", "") for e in result.entries]
    assert sum("The answer is 42." in x for x in everything) == 1  # not also injected
    assert child_model.requests[0].entries[-1].content == "Compute the answer."  # the prompt alone
    assert len(child_model.requests[0].entries) == 1  # the prompt alone: nothing of the parent


async def test_a_report_arrives_as_a_user_message_at_a_turn_boundary() -> None:
    @tool
    async def think() -> str:
        """Take a moment."""
        await asyncio.sleep(0.3)
        return "thought"

    parent = ScriptedProvider(
        [call("spawn_subagent", {"prompt": "p"}, call_id="s1"), call("think", {}, call_id="t1"), text("merged")]
    )
    child = Agent(name="quick", model=ScriptedProvider([text("child says hi")]))
    handle = Runner.stream(Agent(name="p", model=parent, tools=[think], plugins=[Subagents([child])]), "go")
    injected = [ev.content async for ev in handle if isinstance(ev, events.UserMessageInjected)]
    result = await handle.result()
    assert len(injected) == 1 and "child says hi" in str(injected[0])
    assert any(isinstance(e, InputEntry) and "child says hi" in str(e.content) for e in result.entries)
    assert result.usage.input_tokens == 4  # 3 parent turns plus the child turn, 1 each


async def test_steer_and_cancel_a_running_child() -> None:
    seen: list[str] = []

    async def child_turn(entries, tools):
        seen.extend(str(e.content) for e in entries if isinstance(e, InputEntry) and e.role == "user")
        if len(seen) < 2:
            await asyncio.sleep(0.2)
            return call("noop", {}, call_id=f"n{len(entries)}")
        return text("steered: " + seen[-1])

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    steerable = Agent(name="s", model=ScriptedProvider(child_turn), tools=[noop])
    sleeper = Agent(name="z", model=ScriptedProvider(lambda e, t: text("never", delay=30)))

    async def parent_turn(entries, tools):
        done = [e for e in entries if isinstance(e, ToolResultEntry)]
        ids = [re.match(r"Started subagent (\S+)", e.output).group(1) for e in done if e.output.startswith("Started")]
        step = len(done)
        if step == 0:
            return call("spawn_subagent", {"prompt": "work", "agent": "s"}, call_id="a")
        if step == 1:
            return call("spawn_subagent", {"prompt": "sleep", "agent": "z"}, call_id="b")
        if step == 2:
            return call("send_to_subagent", {"id": ids[0], "message": "also check the attic"}, call_id="c")
        if step == 3:
            return call("cancel_subagent", {"id": ids[1]}, call_id="d")
        if step == 4:
            return call("wait_subagents", {"ids": ids, "timeout_seconds": 10}, call_id="e")
        return text("done")

    result = await Runner.run(
        Agent(name="p", model=ScriptedProvider(parent_turn), plugins=[Subagents([steerable, sleeper])]), "go"
    )
    waited = outputs(result, "wait_subagents")[0]
    assert "steered: also check the attic" in waited and ": cancelled" in waited
    assert "never" not in waited


async def test_children_never_outlive_a_bounded_run() -> None:
    cancelled = asyncio.Event()

    async def forever(entries, tools):
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return text("late")

    parent = ScriptedProvider([call("spawn_subagent", {"prompt": "x"}, call_id="s"), text("bye")])
    child = Agent(name="slow", model=ScriptedProvider(forever))
    await asyncio.wait_for(Runner.run(Agent(name="p", model=parent, plugins=[Subagents([child])]), "go"), 20)
    assert cancelled.is_set()


async def test_detached_mode_delivers_through_the_callback_after_the_run() -> None:
    reports: list[SubagentReport] = []
    got = asyncio.Event()

    async def deliver(report: SubagentReport) -> None:
        reports.append(report)
        got.set()

    parent = ScriptedProvider([call("spawn_subagent", {"prompt": "x"}, call_id="s"), text("bye")])
    child = Agent(name="later", model=ScriptedProvider([text("after the parent", delay=0.2)]))
    result = await Runner.run(Agent(name="p", model=parent, plugins=[Subagents([child], deliver=deliver)]), "go")
    assert result.output == "bye" and not reports
    await asyncio.wait_for(got.wait(), 10)
    assert reports[0].text == "after the parent" and reports[0].agent == "later" and reports[0].error is None


async def test_without_a_catalog_the_child_is_a_clone_without_plugins() -> None:
    def turn(entries, tools):
        names = {t.name for t in tools}
        if "spawn_subagent" not in names:
            return text("child tools: " + ",".join(sorted(names - {"recall_tool_result"})))
        done = [e for e in entries if isinstance(e, ToolResultEntry)]
        if not done:
            return call("spawn_subagent", {"prompt": "who are you"}, call_id="s")
        if len(done) == 1:
            return call("wait_subagents", {}, call_id="w")
        return text(done[-1].output)

    @tool
    def lookup() -> str:
        """Look up."""
        return "x"

    agent = Agent(name="solo", model=ScriptedProvider(turn), tools=[lookup], plugins=[Subagents()])
    result = await Runner.run(agent, "go")
    assert "child tools: lookup" in result.output


async def test_lost_children_are_reported_after_a_resume_without_a_checkpointer() -> None:
    from lovia.plugins.subagents import _Run

    plugin = Subagents([Agent(name="c", model=ScriptedProvider([text("x")]))])
    ctx = RunContext(context=None, agent=Agent(name="p"), run_id="r")
    run = _Run(plugin, ctx, plugin._catalog(ctx))
    entries = [
        ToolCallEntry(call_id="s", name="spawn_subagent", arguments='{"prompt": "x", "agent": "c"}'),
        ToolResultEntry(call_id="s", output="Started subagent t1 (c). Its report will arrive as a message."),
    ]
    [reminder] = run.status(RunContext(context=None, agent=Agent(name="p"), run_id="r", entries=entries))
    assert "t1: lost when this run was interrupted" in str(reminder.content)


async def test_cancelling_the_parent_cancels_its_children() -> None:
    from lovia import CancelToken, RunCancelled

    child_stopped = asyncio.Event()
    token = CancelToken()

    async def forever(entries, tools):
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            child_stopped.set()
            raise
        return text("late")

    async def parent_turn(entries, tools):
        if not any(isinstance(e, ToolResultEntry) for e in entries):
            return call("spawn_subagent", {"prompt": "x"}, call_id="s")
        token.cancel("user pressed stop")
        return call("wait_subagents", {"timeout_seconds": 30}, call_id="w")

    child = Agent(name="slow", model=ScriptedProvider(forever))
    agent = Agent(name="p", model=ScriptedProvider(parent_turn), plugins=[Subagents([child])])
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(Runner.run(agent, "go", cancel_token=token), 30)
    assert child_stopped.is_set()


async def test_a_child_budget_is_fresh_per_spawn_and_enforced() -> None:
    from lovia import RunBudget

    def chatty(entries, tools):
        return call("noop", {}, call_id=f"n{len(entries)}")

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    child = Agent(name="chatty", model=ScriptedProvider(chatty), tools=[noop])
    parent = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "a"}, call_id="s1"),
            call("spawn_subagent", {"prompt": "b"}, call_id="s2"),
            call("wait_subagents", {"timeout_seconds": 20}, call_id="w"),
            text("ok"),
        ]
    )
    plugin = Subagents([child], budget=RunBudget(max_tool_calls=2))
    result = await Runner.run(Agent(name="p", model=parent, plugins=[plugin]), "go")
    [waited] = outputs(result, "wait_subagents")
    assert waited.count('status="failed"') == 2 and waited.count("BudgetExceeded") == 2
    assert plugin.budget is not None and plugin.budget.tool_calls == 0  # each child got its own copy


# ----------------------------------------------------------------------------- 0.9.119 behaviours


async def test_ids_count_t1_t2_per_parent_run_and_the_tools_take_them() -> None:
    sleeper = Agent(name="z", model=ScriptedProvider(lambda e, t: text("never", delay=30)))
    quick = Agent(name="q", model=ScriptedProvider(lambda e, t: text("quick answer")))

    def parent_script() -> ScriptedProvider:
        return ScriptedProvider(
            [
                call("spawn_subagent", {"prompt": "sleep", "agent": "z"}, call_id="a"),
                call("spawn_subagent", {"prompt": "answer", "agent": "q"}, call_id="b"),
                call("send_to_subagent", {"id": "t1", "message": "hurry"}, call_id="c"),
                call("cancel_subagent", {"id": "t1"}, call_id="d"),
                call("wait_subagents", {"ids": ["t1", "t2"], "timeout_seconds": 10}, call_id="e"),
                text("done"),
            ]
        )

    for _ in range(2):  # a second parent run numbers its children from t1 again
        agent = Agent(name="p", model=parent_script(), plugins=[Subagents([sleeper, quick])])
        result = await Runner.run(agent, "go")
        started, second, sent, cancelled, waited = outputs(result)
        assert started.startswith("Started subagent t1 (z)") and second.startswith("Started subagent t2 (q)")
        assert sent == "Sent to t1." and cancelled == "Cancelled t1."
        assert "t1: cancelled" in waited
        everything = [str(getattr(e, "content", "")) + getattr(e, "output", "") for e in result.entries]
        assert any('<subagent-report id="t2"' in x and "quick answer" in x for x in everything)


async def test_two_child_agents_with_one_name_are_refused() -> None:
    twins = [Agent(name="twin", model=ScriptedProvider([text("a")])), Agent(name="twin", model="openai:x")]
    with pytest.raises(UserError) as info:
        Subagents(twins)  # refused when the plugin is built, before any run
    assert "twin" in str(info.value) and info.value.hint


async def test_a_self_clone_child_is_named_after_its_parent() -> None:
    names: list[str] = []

    def turn(entries, tools):
        if "spawn_subagent" not in {t.name for t in tools}:
            return text("child")
        done = [e for e in entries if isinstance(e, ToolResultEntry)]
        if not done:
            return call("spawn_subagent", {"prompt": "help"}, call_id="s")
        if len(done) == 1:
            return call("wait_subagents", {}, call_id="w")
        names.extend(re.findall(r'agent="([^"]+)"', done[-1].output))
        return text("ok")

    await Runner.run(Agent(name="solo", model=ScriptedProvider(turn), plugins=[Subagents()]), "go")
    assert names == ["solo-sub"]


async def test_a_child_run_that_ends_cancelled_delivers_no_report() -> None:
    from lovia import RunCancelled

    async def cancelled_elsewhere(spec):
        raise RunCancelled("stopped in its own chat")

    parent = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "x"}, call_id="s"),
            call("wait_subagents", {"timeout_seconds": 5}, call_id="w"),
            text("ok"),
        ]
    )
    child = Agent(name="c", model=ScriptedProvider([text("never")]))
    plugin = Subagents([child], run_child=cancelled_elsewhere)
    result = await Runner.run(Agent(name="p", model=parent, plugins=[plugin]), "go")
    [waited] = outputs(result, "wait_subagents")
    assert waited == "t1: cancelled"
    assert not any("subagent-report" in str(getattr(e, "content", "")) for e in result.entries)


async def test_a_blank_prompt_spawns_nothing() -> None:
    child_model = ScriptedProvider([text("never")])
    parent = ScriptedProvider([call("spawn_subagent", {"prompt": "   "}, call_id="s"), text("ok")])
    agent = Agent(name="p", model=parent, plugins=[Subagents([Agent(name="c", model=child_model)])])
    result = await Runner.run(agent, "go")
    [spawned] = outputs(result, "spawn_subagent")
    assert spawned.startswith("Error:") and "empty" in spawned and child_model.requests == []
