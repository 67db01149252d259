"""The run loop: turns, tools, events, errors, terminal-event guarantee."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from lovia import (
    Agent,
    AgentHooks,
    CancelToken,
    Mailbox,
    MaxTurnsExceeded,
    ProviderError,
    RetryPolicy,
    RunBudget,
    RunCancelled,
    RunContext,
    Runner,
    ToolError,
    UserError,
    events,
    tool,
)
from lovia.exceptions import BudgetExceeded
from lovia.testing import ScriptedProvider, batch, call, fail, text
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agent_with(provider: ScriptedProvider, *tools, **kw) -> Agent:
    return Agent(name="main", instructions="Be brief.", model=provider, tools=list(tools), **kw)


async def test_tool_round_trip_records_own_entries_only():
    provider = ScriptedProvider([call("add", {"a": 2, "b": 3}), text("5")])
    result = await Runner.run(agent_with(provider, add), "what is 2+3?")
    assert result.output == "5"
    assert result.turns == 2
    assert [e.type for e in result.entries] == ["input", "tool_call", "tool_result", "assistant_text"]
    assert result.entries[2] == ToolResultEntry(call_id="call_add", output="5", raw=5)
    # The second prompt carries the system head, the call and its result.
    second = provider.calls[1]
    assert second[0].role == "system" and second[0].content == "Be brief."
    assert second[-1].role == "tool" and second[-1].tool_call_id == "call_add" and second[-1].content == "5"
    assert result.messages[-1].text == "5"
    assert result.usage.total_tokens > 0


async def test_last_input_tokens_is_the_last_calls_prompt_and_survives_a_replay():
    from lovia import CheckpointOptions, InMemoryCheckpointer, Usage

    script = [call("add", {"a": 2, "b": 3}, usage=Usage(input_tokens=300)), text("5", usage=Usage(input_tokens=420))]
    checkpointer = InMemoryCheckpointer()
    agent = agent_with(ScriptedProvider(script), add)
    result = await Runner.run(agent, "2+3?", checkpoint=CheckpointOptions(checkpointer, "r-last"))
    assert result.usage.input_tokens == 720 and result.last_input_tokens == 420
    untouched = agent_with(ScriptedProvider([]), add)
    replay = await Runner.run(untouched, "2+3?", checkpoint=CheckpointOptions(checkpointer, "r-last"))
    assert replay.replayed and replay.last_input_tokens == 420  # kept in the checkpoint's head
    silent = await Runner.run(agent_with(ScriptedProvider([text("no usage", usage=Usage())])), "hi")
    assert silent.last_input_tokens is None


async def test_stream_event_order_and_single_terminal():
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), text("two")])
    handle = Runner.stream(agent_with(provider, add), "1+1")
    kinds = [type(ev).__name__ async for ev in handle]
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunCompleted"
    assert kinds.count("RunCompleted") + kinds.count("RunFailed") == 1
    first_turn = kinds[: kinds.index("TurnEnded") + 1]
    assert first_turn == [
        "RunStarted",
        "TurnStarted",
        "MessageCompleted",
        "ToolCallStarted",
        "ToolCallCompleted",
        "TurnEnded",
    ]
    assert kinds.count("TextDelta") == 3
    result = await handle
    assert result.output == "two"
    with pytest.raises(RuntimeError):
        handle.__aiter__()


async def test_provider_explosion_gives_one_run_failed_and_result_raises():
    provider = ScriptedProvider([fail(RuntimeError("boom"), after=text("partial"), after_deltas=3)])
    handle = Runner.stream(agent_with(provider, retry=None), "hi")
    seen = [ev async for ev in handle]
    terminal = [ev for ev in seen if isinstance(ev, (events.RunCompleted, events.RunFailed))]
    assert len(terminal) == 1 and isinstance(terminal[0], events.RunFailed)
    assert seen[-1] is terminal[0]
    with pytest.raises(RuntimeError, match="boom"):
        await handle.result()


async def test_hook_and_tool_explosions_do_not_break_the_stream():
    hooks = AgentHooks()

    @hooks.on(events.TurnStarted)
    def broken_hook(event, ctx):
        raise ValueError("hook bug")

    @tool
    def explode() -> str:
        """Always fails."""
        raise KeyError("nope")

    provider = ScriptedProvider([call("explode"), text("recovered")])
    handle = Runner.stream(agent_with(provider, explode, hooks=hooks), "go")
    seen = [ev async for ev in handle]
    completed = [ev for ev in seen if isinstance(ev, events.ToolCallCompleted)]
    assert completed[0].is_error and completed[0].output.startswith("Tool error: KeyError")
    assert any(isinstance(ev, events.ToolCallFailed) for ev in seen)
    assert isinstance(seen[-1], events.RunCompleted)
    assert (await handle).output == "recovered"


async def test_tool_error_hint_reaches_the_model():
    @tool
    def lookup(key: str) -> str:
        """Look something up."""
        raise ToolError(f"no entry {key!r}", hint="try 'alpha'")

    provider = ScriptedProvider([call("lookup", {"key": "zeta"}), text("ok")])
    result = await Runner.run(agent_with(provider, lookup), "go")
    res = result.entries[2]
    assert isinstance(res, ToolResultEntry) and res.is_error
    assert res.output == "Tool error: no entry 'zeta' (hint: try 'alpha')"


async def test_slow_tools_overlap_and_barrier_runs_alone():
    spans: dict[str, tuple[float, float]] = {}

    @tool
    async def slow_a() -> str:
        """Slow A."""
        t0 = time.perf_counter()
        await asyncio.sleep(0.2)
        spans["a"] = (t0, time.perf_counter())
        return "a"

    @tool
    def slow_b() -> str:
        """Slow B (sync: runs on a worker thread)."""
        assert threading.current_thread() is not threading.main_thread()
        t0 = time.perf_counter()
        time.sleep(0.2)
        spans["b"] = (t0, time.perf_counter())
        return "b"

    @tool(parallel=False)
    async def lonely() -> str:
        """A barrier."""
        t0 = time.perf_counter()
        await asyncio.sleep(0.1)
        spans["c"] = (t0, time.perf_counter())
        return "c"

    provider = ScriptedProvider([batch(("slow_a", {}), ("slow_b", {}), ("lonely", {})), text("done")])
    result = await Runner.run(agent_with(provider, slow_a, slow_b, lonely), "go")
    assert result.output == "done"
    a, b, c = spans["a"], spans["b"], spans["c"]
    assert a[0] < b[1] and b[0] < a[1], "the two parallel tools overlap"
    assert c[0] >= max(a[1], b[1]), "the barrier starts after the others finish"
    # Results are paired by call id whatever the completion order.
    calls = {e.call_id: e.name for e in result.entries if isinstance(e, ToolCallEntry)}
    outputs = {e.call_id: e.output for e in result.entries if isinstance(e, ToolResultEntry)}
    assert {calls[cid]: out for cid, out in outputs.items()} == {"slow_a": "a", "slow_b": "b", "lonely": "c"}


async def test_invalid_arguments_become_a_result_and_the_run_continues():
    provider = ScriptedProvider([call("add", {"a": "x", "b": 1}), call("add", '{"a": 1,'), text("gave up")])
    handle = Runner.stream(agent_with(provider, add), "go")
    seen = [ev async for ev in handle]
    results = [ev for ev in seen if isinstance(ev, events.ToolCallCompleted)]
    assert all(r.is_error for r in results)
    assert "Invalid arguments for tool 'add'" in results[0].output and "a:" in results[0].output
    assert "not valid JSON" in results[1].output
    assert not any(isinstance(ev, events.ToolCallStarted) for ev in seen), "rejected calls never start"
    result = await handle
    assert result.output == "gave up"
    bad_call = result.entries[3]
    assert isinstance(bad_call, ToolCallEntry) and bad_call.arguments == '{"_raw": "{\\"a\\": 1,"}'


async def test_unknown_tool_is_an_error_result():
    provider = ScriptedProvider([call("nope", {}), text("ok")])
    result = await Runner.run(agent_with(provider, add), "go")
    assert "unknown tool 'nope'" in result.entries[2].output


async def test_run_context_injection_and_deps():
    seen = {}

    @tool
    def whoami(ctx: RunContext, suffix: str = "!") -> str:
        """Report context."""
        seen["turn"] = ctx.turn
        seen["call_id"] = ctx.call_id
        seen["key"] = ctx.idempotency_key
        return ctx.deps["name"] + suffix

    assert "ctx" not in whoami.parameters["properties"]
    provider = ScriptedProvider([call("whoami", {}), text("ok")])
    result = await Runner.run(agent_with(provider, whoami), "go", deps={"name": "ada"})
    assert result.entries[2].output == "ada!"
    assert seen["turn"] == 1 and seen["call_id"] == "call_whoami" and len(seen["key"]) == 32


async def test_output_cap_and_renderers():
    @tool(max_output_chars=100)
    def big() -> str:
        """Big output."""
        return "x" * 1000

    @tool(result_renderer=lambda raw, ctx: f"<{raw['v']}>")
    def rendered() -> dict:
        """Custom rendering."""
        return {"v": 7}

    @tool
    def structured() -> dict:
        """Default rendering."""
        return {"v": [1, 2]}

    provider = ScriptedProvider([batch(("big", {}), ("rendered", {}), ("structured", {})), text("ok")])
    result = await Runner.run(agent_with(provider, big, rendered, structured), "go")
    outs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    assert len(outs["call_big_0"].output) <= 100 and "truncated" in outs["call_big_0"].output
    assert outs["call_big_0"].raw is None
    assert outs["call_rendered_1"].output == "<7>"
    assert outs["call_structured_2"].output == '{"v": [1, 2]}'


async def test_tool_retries_and_timeout():
    attempts = []

    @tool(retries=2)
    def flaky() -> str:
        """Fails twice."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("flaky")
        return "finally"

    @tool(timeout=0.05)
    async def sleepy() -> str:
        """Too slow."""
        await asyncio.sleep(5)
        return "never"

    provider = ScriptedProvider([batch(("flaky", {}), ("sleepy", {})), text("ok")])
    result = await Runner.run(agent_with(provider, flaky, sleepy), "go")
    outs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    assert outs["call_flaky_0"].output == "finally" and len(attempts) == 3
    assert outs["call_sleepy_1"].is_error and "timed out" in outs["call_sleepy_1"].output


async def test_max_turns():
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}, call_id=f"c{i}") for i in range(5)])
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(agent_with(provider, add), "loop", max_turns=2)
    assert len(provider.calls) == 2


async def test_budget_stops_between_turns():
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}, call_id=f"c{i}") for i in range(5)])
    with pytest.raises(BudgetExceeded):
        await Runner.run(agent_with(provider, add), "loop", budget=RunBudget(max_tool_calls=2))
    assert len(provider.calls) == 3


async def test_cancel_mid_tool_raises_run_cancelled():
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never ends."""
        started.set()
        await asyncio.sleep(60)
        return "no"

    token = CancelToken()
    provider = ScriptedProvider([call("wait_forever")])
    task = asyncio.ensure_future(Runner.run(agent_with(provider, wait_forever), "go", cancel_token=token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel("user stop")
    with pytest.raises(RunCancelled, match="user stop"):
        await asyncio.wait_for(task, 5)


async def test_handle_cancel_ends_with_run_failed():
    provider = ScriptedProvider([text("a long answer " * 20, delay=0.01)])
    handle = Runner.stream(agent_with(provider), "go")
    seen = []
    async for ev in handle:
        seen.append(ev)
        if isinstance(ev, events.TextDelta) and len(seen) > 5:
            handle.cancel("enough")
    assert isinstance(seen[-1], events.RunFailed) and isinstance(seen[-1].error, RunCancelled)
    with pytest.raises(RunCancelled):
        await handle


async def test_abandoned_stream_makes_result_raise():
    provider = ScriptedProvider([text("abcdefgh", delay=0.01)])
    handle = Runner.stream(agent_with(provider), "go")
    async for ev in handle:
        if isinstance(ev, events.TextDelta):
            break
    with pytest.raises(RuntimeError, match="abandoned"):
        await handle.result()


async def test_mailbox_items_drain_at_turn_start():
    mailbox = Mailbox()
    hooks = AgentHooks()

    @hooks.on(events.TurnStarted)
    def push_on_first(event, ctx):
        if event.turn == 1:
            ctx.mailbox.push("also, be polite")

    provider = ScriptedProvider([text("hello")])
    token = mailbox.push("steer me")
    assert mailbox and mailbox.remove(token) and not mailbox
    handle = Runner.stream(agent_with(provider, hooks=hooks), "hi", mailbox=mailbox)
    seen = [ev async for ev in handle]
    injected = [ev for ev in seen if isinstance(ev, events.UserMessageInjected)]
    assert [(ev.content, ev.turn) for ev in injected] == [("also, be polite", 1)]
    result = await handle
    assert result.entries[1] == InputEntry(role="user", content="also, be polite")
    assert provider.calls[0][-1].content == "also, be polite"


async def test_retry_restarts_partial_stream_with_output_discarded():
    dropped = ProviderError("stream dropped", retryable=True)
    provider = ScriptedProvider([fail(dropped, after=text("hel"), after_deltas=2), text("hello")])
    retry = RetryPolicy(backoff_base=0.001)
    handle = Runner.stream(agent_with(provider, retry=retry), "hi")
    seen = [ev async for ev in handle]
    kinds = [type(ev).__name__ for ev in seen]
    assert kinds.count("OutputDiscarded") == 1
    assert kinds.index("OutputDiscarded") < kinds.index("MessageCompleted")
    result = await handle
    assert result.output == "hello" and result.turns == 1
    assert [e.type for e in result.entries] == ["input", "assistant_text"]


async def test_non_retryable_provider_error_fails_fast():
    provider = ScriptedProvider([fail(ProviderError("bad request", status_code=400)), text("never")])
    with pytest.raises(ProviderError, match="bad request"):
        await Runner.run(agent_with(provider, retry=RetryPolicy(backoff_base=0.001)), "hi")
    assert provider.remaining == 1


async def test_hooks_receive_the_same_objects_as_the_stream():
    hooks = AgentHooks()
    hooked: list = []
    hooks.on_any(lambda ev, ctx: hooked.append(ev))
    family: list = []

    @hooks.on(events.ToolEvent)
    async def tools_only(ev, ctx):
        family.append(type(ev).__name__)

    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), text("3")])
    handle = Runner.stream(agent_with(provider, add, hooks=hooks), "go")
    streamed = [ev async for ev in handle]
    assert len(hooked) == len(streamed) and all(a is b for a, b in zip(hooked, streamed, strict=True))
    assert family == ["ToolCallStarted", "ToolCallCompleted"]


async def test_empty_reply_ends_with_empty_output():
    provider = ScriptedProvider([text("")])
    result = await Runner.run(agent_with(provider), "hi")
    assert result.output == "" and [e.type for e in result.entries] == ["input"]


async def test_run_sync_and_misuse_errors():
    provider = ScriptedProvider([text("x")])
    with pytest.raises(UserError) as info:
        Runner.run_sync(agent_with(provider), "hi")
    assert info.value.hint
    with pytest.raises(UserError):
        await Runner.run(Agent(name="nomodel"), "hi")
    with pytest.raises(UserError):
        await Runner.run(agent_with(provider), "hi", max_turns=0)


def test_run_sync_outside_a_loop():
    provider = ScriptedProvider([text("sync ok")])
    assert Runner.run_sync(agent_with(provider), "hi").output == "sync ok"


async def test_finish_reason_and_entries_text():
    provider = ScriptedProvider([text("fine")])
    result = await Runner.run(agent_with(provider), "hi")
    assert result.finish_reason == "stop"
    assert result.entries[-1] == AssistantTextEntry(content="fine")


async def test_store_failure_while_saving_a_tool_result_fails_the_run_once():
    from lovia import CheckpointOptions, InMemoryCheckpointer, StoreError
    from lovia.transcript import ToolResultEntry as Result

    class Flaky(InMemoryCheckpointer):
        async def append(self, run_id, entries, head):
            if any(isinstance(e, Result) for e in entries):
                raise StoreError("disk full", hint="free some space")
            await super().append(run_id, entries, head)

    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), text("never")])
    handle = Runner.stream(agent_with(provider, add), "go", checkpoint=CheckpointOptions(Flaky(), "r"))
    seen = [ev async for ev in handle]
    failed = [ev for ev in seen if isinstance(ev, events.RunFailed)]
    assert len(failed) == 1 and seen[-1] is failed[0] and not any(isinstance(ev, events.RunCompleted) for ev in seen)
    with pytest.raises(StoreError, match="disk full"):
        await handle.result()


async def test_tool_that_exhausts_the_budget_ends_the_run():
    @tool
    def spend(ctx: RunContext) -> str:
        """Spends the run's budget."""
        raise BudgetExceeded("tool says the budget is gone")

    provider = ScriptedProvider([call("spend"), text("never")])
    handle = Runner.stream(agent_with(provider, spend), "go")
    seen = [ev async for ev in handle]
    assert isinstance(seen[-1], events.RunFailed) and isinstance(seen[-1].error, BudgetExceeded)
    assert sum(isinstance(ev, (events.RunFailed, events.RunCompleted)) for ev in seen) == 1
    with pytest.raises(BudgetExceeded):
        await handle


class _NameAndStreamOnly:
    """A hand-written provider with only what 0.9.119 code relies on: a name and stream()."""

    name = "bare"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def stream(self, entries, *, tools=None, response_format=None, settings=None):
        from lovia.transcript import FinishDelta, TextDelta

        yield TextDelta(self.answer)
        yield FinishDelta("stop")


async def test_a_provider_with_only_a_name_and_stream_runs_with_defaults():
    duck = _NameAndStreamOnly('{"city": "Oslo"}')
    # No model / supports_json_schema attributes: read as None and False (prompt contract used).
    agent = Agent(name="duck", model=duck, output_type=dict)
    assert agent.resolve_provider() is duck
    result = await Runner.run(agent, "hi")
    assert result.output == {"city": "Oslo"}


async def test_a_list_of_models_is_refused_when_the_provider_is_resolved():
    agent = Agent(name="two", model=[_NameAndStreamOnly("a"), _NameAndStreamOnly("b")])  # constructs
    with pytest.raises(UserError) as info:
        agent.resolve_provider()
    assert "one model" in str(info.value) and "gateway" in (info.value.hint or "")
    with pytest.raises(UserError, match="one model"):
        await Runner.run(agent, "hi")


@pytest.mark.parametrize("where", ["predicate", "handler"])
async def test_an_approval_check_that_raises_is_a_denial(where):
    def gate(args, ctx):
        raise RuntimeError("approval service down")

    def handler(call, ctx):
        raise RuntimeError("approval service down")

    ran: list[int] = []

    @tool(needs_approval=gate if where == "predicate" else True)
    def pay(cents: int) -> str:
        """Pay."""
        ran.append(cents)
        return "paid"

    provider = ScriptedProvider([call("pay", {"cents": 5}, call_id="p"), text("could not pay")])
    agent = agent_with(provider, pay, approval_handler=handler if where == "handler" else None)
    handle = Runner.stream(agent, "pay")
    failed = [e async for e in handle if isinstance(e, events.ToolCallFailed)]
    result = await handle.result()
    assert result.output == "could not pay" and ran == []
    [answer] = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert answer.call_id == "p" and answer.is_error and "not approved" in answer.output
    assert [str(e.error) for e in failed] == ["approval service down"]


async def test_an_unknown_tool_with_non_object_json_arguments_is_stored_as_raw():
    provider = ScriptedProvider([call("ghost", "[1, 2]", call_id="g"), text("ok")])
    result = await Runner.run(agent_with(provider, add), "go")
    [stored] = [e for e in result.entries if isinstance(e, ToolCallEntry)]
    assert stored.arguments == '{"_raw": "[1, 2]"}'
    resent = provider.requests[1].entries
    assert any(isinstance(e, ToolCallEntry) and e.arguments == '{"_raw": "[1, 2]"}' for e in resent)


async def test_generated_tool_names_stay_within_64_characters_and_distinct():
    long_a = "research-" + "a" * 80 + "-one"
    long_b = "research-" + "a" * 80 + "-two"
    first, second = Agent(name=long_a, model="openai:x"), Agent(name=long_b, model="openai:x")
    parent = Agent(name="p", handoffs=[first, second], tools=[first.as_tool(), second.as_tool()])
    names = [h.tool_name for h in parent.handoff_list] + [t.name for t in parent.tools]
    assert all(len(n) <= 64 for n in names) and len(set(names)) == 4
    assert names[0].startswith("transfer_to_research_aaa") and names[2].startswith("ask_research_aaa")
    again = Agent(name="p2", handoffs=[Agent(name=long_a, model="openai:x")])
    assert again.handoff_list[0].tool_name == names[0]  # stable: the same agent name, the same tool
    assert Agent(name="short", model="openai:x").as_tool().name == "ask_short"


async def test_a_session_id_without_a_session_is_accepted():
    seen: list[str | None] = []

    @tool
    def whoami(ctx: RunContext) -> str:
        """Say the session."""
        seen.append(ctx.session_id)
        return "ok"

    provider = ScriptedProvider([call("whoami", {}), text("done")])
    result = await Runner.run(agent_with(provider, whoami), "hi", session_id="s1")
    assert result.output == "done" and seen == ["s1"]


async def test_the_context_policy_works_on_a_copy_of_the_transcript():
    from lovia.context import ContextResult

    class Vandal:
        async def compact(self, req):
            req.entries.clear()  # mutating its copy changes nothing
            req.entries.append(InputEntry(role="user", content="forged"))
            return ContextResult(entries=req.entries, changed=False)

    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), text("3")])
    result = await Runner.run(agent_with(provider, add, context_policy=Vandal()), "1+2?")
    assert result.output == "3"
    assert [e.type for e in result.entries] == ["input", "tool_call", "tool_result", "assistant_text"]
    second = provider.requests[1].entries
    assert [e.type for e in second] == ["input", "input", "tool_call", "tool_result"]  # the live transcript
    assert all(getattr(e, "content", "") != "forged" for e in second)


async def test_tokens_a_policy_spends_count_against_the_budget_before_the_call():
    from lovia import Usage
    from lovia.context import ContextResult

    class Summarizing:
        async def compact(self, req):
            req.usage.add(Usage(input_tokens=900, output_tokens=100))  # its own summary call
            return ContextResult(entries=req.entries)

    provider = ScriptedProvider([text("never")])
    agent = agent_with(provider, context_policy=Summarizing())
    with pytest.raises(BudgetExceeded):
        await Runner.run(agent, "hi", budget=RunBudget(max_total_tokens=500))
    assert provider.requests == []
