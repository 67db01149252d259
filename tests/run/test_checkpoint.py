"""Checkpoints in the loop: policies, replay, resume rules, idempotency keys, outcome-unknown."""

from __future__ import annotations

import asyncio
import logging

import pytest

from lovia import (
    Agent,
    CheckpointOptions,
    InMemoryCheckpointer,
    InMemorySession,
    MaxTurnsExceeded,
    RunContext,
    Runner,
    RunSnapshot,
    SQLiteCheckpointer,
    SQLiteSession,
    Usage,
    UserError,
    events,
    tool,
)
from lovia.checkpointer import RunHead
from lovia.exceptions import CorruptRecordError, LoviaError, StoreError
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.tools import RERUN
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def calc(provider) -> Agent:
    return Agent(name="calc", model=provider, tools=[add])


@pytest.fixture(params=["memory", "sqlite"])
def stores(request, tmp_path):
    if request.param == "memory":
        return InMemorySession(), InMemoryCheckpointer()
    db = str(tmp_path / "runs.db")
    return SQLiteSession(db, wal=True), SQLiteCheckpointer(db, wal=True)


async def test_completed_run_replays_without_the_model(stores):
    session, cp = stores
    first = ScriptedProvider([call("add", {"a": 2, "b": 3}), text("5")])
    result = await Runner.run(
        calc(first), "2+3", session=session, session_id="u", checkpoint=CheckpointOptions(cp, "r1")
    )
    snap = await cp.load("r1")
    assert snap.status == "completed" and snap.output == "5" and snap.entries == result.entries

    untouched = ScriptedProvider([])
    handle = Runner.stream(
        calc(untouched), "a different question", session=session, session_id="u", checkpoint=CheckpointOptions(cp, "r1")
    )
    kinds = [type(ev).__name__ async for ev in handle]
    replay = await handle
    assert kinds == ["RunStarted", "RunCompleted"]
    assert untouched.calls == []
    assert replay.output == "5" and replay.finish_reason is None and replay.replayed
    assert replay.entries == result.entries and replay.usage == result.usage
    assert len(await session.segments("u")) == 1, "the session append is idempotent"


async def test_replay_heals_a_missing_session_append(stores):
    session, cp = stores
    await Runner.run(calc(ScriptedProvider([text("hello")])), "hi", checkpoint=CheckpointOptions(cp, "r2"))
    assert await session.segments("u") == []
    replay = await Runner.run(
        calc(ScriptedProvider([])), "hi", session=session, session_id="u", checkpoint=CheckpointOptions(cp, "r2")
    )
    segs = await session.segments("u")
    assert replay.output == "hello" and len(segs) == 1 and segs[0].run_id == "r2"
    assert set(segs[0].meta["timing"]) == {"started_at", "finished_at"}


async def test_policies(stores):
    session, cp = stores
    await Runner.run(calc(ScriptedProvider([text("one")])), "q", checkpoint=CheckpointOptions(cp, "p"))
    with pytest.raises(UserError) as info:
        await Runner.run(
            calc(ScriptedProvider([text("x")])), "q", checkpoint=CheckpointOptions(cp, "p", if_run_exists="fail")
        )
    assert info.value.hint
    fresh = ScriptedProvider([text("two")])
    restarted = await Runner.run(calc(fresh), "q2", checkpoint=CheckpointOptions(cp, "p", if_run_exists="restart"))
    assert restarted.output == "two" and len(fresh.calls) == 1
    assert (await cp.load("p")).entries[0] == InputEntry(role="user", content="q2")
    with pytest.raises(UserError, match="no stored run"):
        await Runner.run(
            calc(ScriptedProvider([])), [], checkpoint=CheckpointOptions(cp, "missing", if_run_exists="resume_only")
        )
    replay = await Runner.run(
        calc(ScriptedProvider([])), [], checkpoint=CheckpointOptions(cp, "p", if_run_exists="resume_only")
    )
    assert replay.output == "two"


async def test_interrupted_run_resumes_and_ignores_new_input(stores):
    session, cp = stores
    provider = ScriptedProvider(
        [call("add", {"a": 1, "b": 2}, call_id="c1"), call("add", {"a": 3, "b": 4}, call_id="c2")]
    )
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(
            calc(provider),
            "sum things",
            session=session,
            session_id="u",
            max_turns=2,
            checkpoint=CheckpointOptions(cp, "r"),
        )
    snap = await cp.load("r")
    assert snap.status == "interrupted" and snap.turns == 2 and snap.error["type"] == "MaxTurnsExceeded"
    assert await session.segments("u") == [], "interrupted runs are not appended"

    resumed_provider = ScriptedProvider([text("all done")])
    result = await Runner.run(
        calc(resumed_provider), "IGNORED", session=session, session_id="u", checkpoint=CheckpointOptions(cp, "r")
    )
    assert result.output == "all done" and result.turns == 3
    assert result.entries[0] == InputEntry(role="user", content="sum things")
    assert not any(m.text == "IGNORED" for m in resumed_provider.calls[0])
    seg = (await session.segments("u"))[0]
    assert seg.entries == result.entries
    assert seg.meta["timing"]["started_at"] == snap.started_at, "a resumed run keeps its first start"


async def test_dangling_call_reexecutes_under_same_turn_and_input_guardrails_skip():
    cp = InMemoryCheckpointer()
    head = RunHead(agent_name="calc", turns=1)
    entries = [
        InputEntry(role="user", content="2+2"),
        ToolCallEntry(call_id="c9", name="add", arguments='{"a": 2, "b": 2}'),
    ]
    await cp.append("d", entries, head)
    tripped = []
    agent = calc(ScriptedProvider([text("4")])).clone(input_guardrails=[lambda msgs, ctx: tripped.append(1) or "nope"])
    handle = Runner.stream(agent, "x", checkpoint=CheckpointOptions(cp, "d"))
    seen = [ev async for ev in handle]
    result = await handle
    assert not tripped, "input guardrails are skipped on resume"
    starts = [ev for ev in seen if isinstance(ev, events.TurnStarted)]
    assert [ev.turn for ev in starts] == [1, 2]
    assert result.entries[2] == ToolResultEntry(call_id="c9", output="4", raw=4)
    assert result.turns == 2


async def test_idempotency_key_is_stable_across_reexecution():
    keys = []

    @tool
    def charge(ctx: RunContext, amount: int) -> str:
        """Charge a card."""
        keys.append(ctx.idempotency_key)
        return "charged"

    call_entry = ToolCallEntry(call_id="pay-1", name="charge", arguments='{"amount": 5}')
    for _ in range(2):  # the same dangling call, re-executed by two separate resumes
        cp = InMemoryCheckpointer()
        await cp.append("k", [InputEntry(role="user", content="pay"), call_entry], RunHead(agent_name="shop", turns=1))
        shop = Agent(name="shop", model=ScriptedProvider([text("paid")]), tools=[charge])
        await Runner.run(shop, "pay", checkpoint=CheckpointOptions(cp, "k"))
    other = Agent(
        name="shop",
        model=ScriptedProvider([call("charge", {"amount": 5}, call_id="pay-1"), text("paid")]),
        tools=[charge],
    )
    await Runner.run(other, "pay", checkpoint=CheckpointOptions(InMemoryCheckpointer(), "another-run"))
    assert len(keys) == 3 and keys[0] == keys[1] and len(keys[0]) == 32
    assert keys[2] != keys[0], "the key is scoped by run id"


async def test_non_idempotent_dangling_call_gets_outcome_unknown():
    ran = []

    @tool(idempotent=False)
    def send_mail(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return "sent"

    cp = InMemoryCheckpointer()
    head = RunHead(agent_name="mailer", turns=1, started_calls=["m1", "m2"])
    entries = [
        InputEntry(role="user", content="mail bob"),
        ToolCallEntry(call_id="m1", name="send_mail", arguments='{"to": "bob"}'),
        ToolCallEntry(call_id="m3", name="send_mail", arguments='{"to": "eve"}'),
    ]
    await cp.append("m", entries, head)
    agent = Agent(name="mailer", model=ScriptedProvider([text("ok")]), tools=[send_mail])
    result = await Runner.run(agent, "x", checkpoint=CheckpointOptions(cp, "m"))
    outs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    assert outs["m1"].is_error and "outcome unknown" in outs["m1"].output
    assert outs["m3"].output == "sent", "a call that never started runs normally"
    assert ran == ["eve"]


async def test_reconcile_hook_decides_dangling_calls():
    ran = []

    @tool(idempotent=False)
    def transfer(amount: int) -> str:
        """Move money."""
        ran.append(amount)
        return "moved"

    @transfer.reconciler
    def check_ledger(args, ctx):
        return "already moved" if args["amount"] == 1 else RERUN

    cp = InMemoryCheckpointer()
    entries = [
        InputEntry(role="user", content="move"),
        ToolCallEntry(call_id="t1", name="transfer", arguments='{"amount": 1}'),
        ToolCallEntry(call_id="t2", name="transfer", arguments='{"amount": 2}'),
    ]
    await cp.append("t", entries, RunHead(agent_name="bank", turns=1, started_calls=["t1", "t2"]))
    result = await Runner.run(
        Agent(name="bank", model=ScriptedProvider([text("ok")]), tools=[transfer]),
        "x",
        checkpoint=CheckpointOptions(cp, "t"),
    )
    outs = {e.call_id: e.output for e in result.entries if isinstance(e, ToolResultEntry)}
    assert outs == {"t1": "already moved", "t2": "moved"} and ran == [2]


async def test_non_idempotent_start_is_persisted_before_it_runs():
    seen_heads = []

    class Spy(InMemoryCheckpointer):
        async def append(self, run_id, entries, head):
            seen_heads.append(list(head.started_calls))
            await super().append(run_id, entries, head)

    @tool(idempotent=False)
    def send() -> str:
        """Send."""
        return "ok"

    agent = Agent(name="a", model=ScriptedProvider([call("send", call_id="s1"), text("done")]), tools=[send])
    await Runner.run(agent, "go", checkpoint=CheckpointOptions(Spy(), "s"))
    assert ["s1"] in seen_heads and seen_heads[-1] == []


async def test_handoff_resume_and_agent_resolution(caplog):
    cp = InMemoryCheckpointer()
    billing = Agent(name="billing", model=ScriptedProvider([text("refunded")]))
    triage = Agent(name="triage", model=ScriptedProvider([]), handoffs=[billing])
    head = RunHead(agent_name="triage", turns=1, pending_handoff="billing")
    entries = [
        InputEntry(role="user", content="refund"),
        ToolCallEntry(call_id="h", name="transfer_to_billing", arguments="{}"),
        ToolResultEntry(call_id="h", output="Transferred to billing."),
    ]
    await cp.append("h", entries, head)
    handle = Runner.stream(triage, "x", checkpoint=CheckpointOptions(cp, "h"))
    seen = [ev async for ev in handle]
    result = await handle
    assert result.output == "refunded" and result.final_agent is billing
    assert any(isinstance(ev, events.HandoffOccurred) for ev in seen)

    # A renamed agent breaks an in-flight run (hard error naming agent and run)...
    await cp.append("gone", entries[:1], RunHead(agent_name="old-name", turns=0))
    with pytest.raises(UserError) as info:
        await Runner.run(triage, "x", checkpoint=CheckpointOptions(cp, "gone"))
    assert "old-name" in str(info.value) and "gone" in str(info.value) and "old-name" in info.value.hint
    # ...but a completed replay degrades to the entry agent with a warning.
    await cp.append("done", entries[:1], RunHead(agent_name="old-name", turns=1, status="completed", output="fine"))
    with caplog.at_level(logging.WARNING, logger="lovia"):
        replay = await Runner.run(triage, "x", checkpoint=CheckpointOptions(cp, "done"))
    assert replay.output == "fine" and replay.final_agent is triage
    assert "old-name" in caplog.text


async def test_duplicate_agent_names_are_a_hard_error_on_resume():
    cp = InMemoryCheckpointer()
    twin_a = Agent(name="twin", model=ScriptedProvider([]))
    twin_b = Agent(name="twin", model=ScriptedProvider([]))
    entry = Agent(name="entry", model=ScriptedProvider([]), handoffs=[twin_a, twin_b])
    await cp.append("dup", [InputEntry(role="user", content="x")], RunHead(agent_name="twin", turns=0))
    with pytest.raises(UserError, match="two different agents"):
        await Runner.run(entry, "x", checkpoint=CheckpointOptions(cp, "dup"))


async def test_delete_on_success_and_resume_from(stores):
    session, cp = stores
    await Runner.run(
        calc(ScriptedProvider([text("bye")])),
        "hi",
        session=session,
        session_id="u",
        checkpoint=CheckpointOptions(cp, "del", delete_on_success=True),
    )
    assert await cp.load("del") is None and len(await session.segments("u")) == 1

    snap = RunSnapshot(run_id="ext", entries=[InputEntry(role="user", content="hello")], agent_name="calc", turns=0)
    result = await Runner.run(
        calc(ScriptedProvider([text("from snapshot")])), [], checkpoint=CheckpointOptions(resume_from=snap)
    )
    assert result.output == "from snapshot" and result.entries[0].content == "hello"


async def test_failed_run_is_classified_and_resumable(stores):
    session, cp = stores
    broken = ScriptedProvider([fail(ValueError("model exploded"))])
    with pytest.raises(ValueError):
        await Runner.run(calc(broken), "hi", checkpoint=CheckpointOptions(cp, "f"))
    snap = await cp.load("f")
    assert snap.status == "failed" and snap.error == {"type": "ValueError", "message": "model exploded"}
    assert snap.turns == 0, "a turn that added nothing is not counted"
    result = await Runner.run(calc(ScriptedProvider([text("better")])), "hi", checkpoint=CheckpointOptions(cp, "f"))
    assert result.output == "better"


async def test_cancellation_saves_an_interrupted_checkpoint():
    cp = InMemoryCheckpointer()
    gate = asyncio.Event()

    @tool
    async def block() -> str:
        """Blocks."""
        gate.set()
        await asyncio.sleep(30)
        return "never"

    agent = Agent(name="b", model=ScriptedProvider([call("block")]), tools=[block])
    task = asyncio.ensure_future(Runner.run(agent, "go", checkpoint=CheckpointOptions(cp, "c")))
    await asyncio.wait_for(gate.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snap = await cp.load("c")
    assert snap.status == "interrupted" and [e.type for e in snap.entries] == ["input", "tool_call"]


async def test_invalid_options_fail_at_construction():
    cp = InMemoryCheckpointer()
    with pytest.raises(UserError):
        CheckpointOptions(cp, "r", if_run_exists="sometimes")
    with pytest.raises(UserError):
        CheckpointOptions(cp, "")
    with pytest.raises(UserError):
        CheckpointOptions(None, "r")
    with pytest.raises(UserError):
        CheckpointOptions(object(), "r")
    snap = RunSnapshot(run_id="a", entries=[], agent_name="x")
    with pytest.raises(UserError):
        CheckpointOptions(cp, "b", resume_from=snap)
    with pytest.raises(UserError):
        CheckpointOptions(resume_from=snap, delete_on_success=True)


async def test_corrupt_head_gives_a_clear_error(tmp_path):
    import sqlite3

    db = tmp_path / "c.db"
    cp = SQLiteCheckpointer(str(db))
    await Runner.run(calc(ScriptedProvider([text("x")])), "hi", checkpoint=CheckpointOptions(cp, "bad"))
    con = sqlite3.connect(db)
    con.execute("UPDATE snapshot_heads SET head_json = '{not json' WHERE run_id = 'bad'")
    con.commit()
    con.close()
    with pytest.raises(CorruptRecordError) as info:
        await Runner.run(calc(ScriptedProvider([])), "hi", checkpoint=CheckpointOptions(cp, "bad"))
    assert "bad" in str(info.value) and info.value.hint
    assert isinstance(info.value, StoreError)


async def test_snapshot_json_round_trip():
    snap = RunSnapshot(
        run_id="j",
        entries=[InputEntry(role="user", content="hi"), ToolCallEntry(call_id="c", name="t", arguments="{}")],
        agent_name="a",
        turns=3,
        status="interrupted",
        context_state={"k": [1, 2]},
        pending_handoff="b",
    )
    again = RunSnapshot.from_json(snap.to_json())
    assert again == snap and again.head.pending_handoff == "b"


async def test_repair_attempts_survive_a_resume():
    from pydantic import BaseModel

    from lovia import OutputValidationError

    class Answer(BaseModel):
        value: int

    cp = InMemoryCheckpointer()
    first = ScriptedProvider([text("not json"), text("still not json")])
    agent = Agent(name="json", model=first, output_type=Answer)

    class StopAfterRepairPrompt(InMemoryCheckpointer):
        async def append(self, run_id, entries, head):
            await cp.append(run_id, entries, head)
            if head.repair_attempts == 1:
                raise RuntimeError("simulated crash after the repair prompt was saved")

        async def load(self, run_id):
            return await cp.load(run_id)

    with pytest.raises(RuntimeError, match="simulated crash"):
        await Runner.run(agent, "give me json", checkpoint=CheckpointOptions(StopAfterRepairPrompt(), "rep"))
    snap = await cp.load("rep")
    assert snap.repair_attempts == 1 and isinstance(snap.entries[-1], InputEntry)

    resumed_model = ScriptedProvider([text("nope again"), text('{"value": 1}')])
    with pytest.raises(OutputValidationError):
        await Runner.run(agent.clone(model=resumed_model), [], checkpoint=CheckpointOptions(cp, "rep"))
    assert len(resumed_model.calls) == 1, "the resumed run had no repair turn left"


async def test_resume_finds_a_dangling_call_whose_id_an_earlier_turn_used():
    cp = InMemoryCheckpointer()
    entries = [
        InputEntry(role="user", content="add twice"),
        ToolCallEntry(call_id="call_add", name="add", arguments='{"a": 1, "b": 1}'),
        ToolResultEntry(call_id="call_add", output="2", raw=2),
        ToolCallEntry(call_id="call_add", name="add", arguments='{"a": 2, "b": 2}'),
    ]
    await cp.append("reuse", entries, RunHead(agent_name="calc", turns=2))
    result = await Runner.run(calc(ScriptedProvider([text("2 and 4")])), [], checkpoint=CheckpointOptions(cp, "reuse"))
    assert [e.output for e in result.entries if isinstance(e, ToolResultEntry)] == ["2", "4"]


async def test_a_healing_replay_times_its_segment_from_the_snapshot():
    cp, session = InMemoryCheckpointer(), InMemorySession()
    await Runner.run(calc(ScriptedProvider([text("done")])), "hi", checkpoint=CheckpointOptions(cp, "heal"))
    snap = await cp.load("heal")
    await Runner.run(
        calc(ScriptedProvider([])), "hi", session=session, session_id="u", checkpoint=CheckpointOptions(cp, "heal")
    )
    timing = (await session.segments("u"))[0].meta["timing"]
    # The run's first start to its terminal save, as 0.9.119 heals: not the time of the heal.
    assert timing == {"started_at": snap.started_at, "finished_at": snap.updated_at}
    assert snap.started_at < snap.updated_at


async def test_a_healing_replay_of_a_snapshot_without_started_at_writes_no_timing(tmp_path):
    import json
    import sqlite3

    path = tmp_path / "runs.db"
    async with SQLiteCheckpointer(path) as cp:
        await cp.append("old", [InputEntry(role="user", content="hi")], RunHead(agent_name="calc", turns=1))
    head = {"agent_name": "calc", "turns": 1, "status": "completed", "output": "fine", "updated_at": 50.0}
    with sqlite3.connect(path) as conn:  # a head written before heads carried started_at
        conn.execute("UPDATE snapshot_heads SET head_json = ? WHERE run_id = 'old'", (json.dumps(head),))
    session = InMemorySession()
    async with SQLiteCheckpointer(path) as cp:
        result = await Runner.run(
            calc(ScriptedProvider([])), "hi", session=session, session_id="u", checkpoint=CheckpointOptions(cp, "old")
        )
    assert result.replayed and result.output == "fine"
    (segment,) = await session.segments("u")
    assert segment.entries == [InputEntry(role="user", content="hi")]
    assert "timing" not in (segment.meta or {})


async def test_usage_per_model_survives_a_resume_and_reaches_the_session():
    @tool
    def look() -> str:
        """Look."""
        return "seen"

    cp, session = InMemoryCheckpointer(), InMemorySession()
    first = Agent(
        name="a", model=ScriptedProvider([call("look"), fail(RuntimeError("crash"))], model="m1"), tools=[look]
    )
    with pytest.raises(RuntimeError):
        await Runner.run(first, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r"))
    snap = await cp.load("r")
    assert snap is not None and snap.head.model_usage == {"scripted:m1": snap.head.usage}
    second = first.clone(model=ScriptedProvider([text("done", usage=Usage(7, 3))], model="m2"))
    result = await Runner.run(second, "go", session=session, session_id="s", checkpoint=CheckpointOptions(cp, "r"))
    assert result.output == "done"
    [segment] = await session.segments("s")
    models = segment.meta["usage"]["models"]
    assert set(models) == {"scripted:m1", "scripted:m2"}  # nothing left unattributed ("?")
    assert Usage.from_dict(models["scripted:m2"]) == Usage(7, 3)


# ---------------------------------------------------------------------- 0.9.119 behaviours


async def test_a_failed_handoff_activation_keeps_the_handoff_pending_and_a_resume_completes_it():
    from lovia import AgentHooks, events

    broken = {"on": True}

    def billing_rules(ctx):
        if broken["on"]:
            raise RuntimeError("billing instructions are unavailable")
        return "You handle billing."

    billing = Agent(name="billing", instructions=billing_rules, model=ScriptedProvider([text("Refund issued.")]))
    failed_as: list[str] = []
    hooks = AgentHooks()

    @hooks.on(events.RunFailed)
    def remember(event, ctx):
        failed_as.append(ctx.agent.name)

    def triage() -> Agent:
        return Agent(
            name="triage",
            model=ScriptedProvider([call("transfer_to_billing", {})]),
            handoffs=[billing],
            hooks=hooks,
        )

    cp = InMemoryCheckpointer()
    with pytest.raises(Exception, match="billing instructions are unavailable"):
        await Runner.run(triage(), "refund please", checkpoint=CheckpointOptions(cp, "h1"))
    snap = await cp.load("h1")
    assert snap is not None and snap.head.agent_name == "triage" and snap.head.pending_handoff == "billing"
    assert failed_as == ["triage"]
    broken["on"] = False
    result = await Runner.run(triage(), "refund please", checkpoint=CheckpointOptions(cp, "h1"))
    assert result.output == "Refund issued." and result.final_agent.name == "billing"


async def test_plugins_are_set_up_once_per_agent_per_run():
    from lovia.plugins import PluginInstance

    setups: list[str] = []

    class Counted:
        name = "counted"

        def __init__(self, label: str) -> None:
            self.label = label

        async def setup(self, ctx):
            setups.append(self.label)
            return PluginInstance()

    a = Agent(name="a", plugins=[Counted("a")])
    b = Agent(name="b", plugins=[Counted("b")], handoffs=[a])
    a.handoffs.append(b)
    a.model = ScriptedProvider([call("transfer_to_b", {}, call_id="1"), text("back in a")])
    b.model = ScriptedProvider([call("transfer_to_a", {}, call_id="2")])
    result = await Runner.run(a, "go")
    assert result.output == "back in a" and result.final_agent is a
    assert setups == ["a", "b"]  # A -> B -> A: A is not set up again


async def test_replaying_a_run_whose_output_was_not_json_safe_raises_after_settling_the_store():
    cp, session = InMemoryCheckpointer(), InMemorySession()
    await cp.append(
        "ns",
        [InputEntry(role="user", content="hi"), AssistantTextEntry(content="done")],
        RunHead(
            agent_name="calc",
            status="completed",
            turns=1,
            error={"type": "OutputNotSerializable", "message": "Opaque is not JSON-serializable"},
        ),
    )
    options = CheckpointOptions(cp, "ns", delete_on_success=True)
    with pytest.raises(LoviaError, match="not JSON-safe") as info:
        await Runner.run(calc(ScriptedProvider([])), "hi", session=session, session_id="u", checkpoint=options)
    assert info.value.hint
    assert [e.type for e in await session.load("u")] == ["input", "assistant_text"]  # the segment was written
    assert await cp.load("ns") is None  # and delete_on_success applied


async def test_replaying_with_an_output_type_the_output_does_not_fit_keeps_the_snapshot():
    import pydantic

    class Point(pydantic.BaseModel):
        x: int

    cp = InMemoryCheckpointer()
    first = await Runner.run(
        calc(ScriptedProvider([text('{"x": 1}')])), "p", output_type=Point, checkpoint=CheckpointOptions(cp, "pt")
    )
    assert first.output == Point(x=1)

    class Other(pydantic.BaseModel):
        name: str

    options = CheckpointOptions(cp, "pt", delete_on_success=True)
    with pytest.raises(pydantic.ValidationError):
        await Runner.run(calc(ScriptedProvider([])), "p", output_type=Other, checkpoint=options)
    assert await cp.load("pt") is not None
    again = await Runner.run(calc(ScriptedProvider([])), "p", output_type=Point, checkpoint=options)
    assert again.replayed and again.output == Point(x=1)
