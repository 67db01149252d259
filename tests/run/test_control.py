"""Handoffs, structured output, guardrails, approvals, agent-as-tool, instructions."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Literal

import pytest
from pydantic import BaseModel

from lovia import (
    Agent,
    GuardrailTripped,
    Handoff,
    OutputValidationError,
    RunContext,
    Runner,
    events,
    tool,
)
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import InputEntry, ToolResultEntry


class Weather(BaseModel):
    city: str
    celsius: float


async def test_handoff_swaps_system_head_and_keeps_body():
    billing_provider = ScriptedProvider([text("Billing here: refunded.")])
    billing = Agent(name="Billing", instructions="You handle billing.", model=billing_provider)
    triage_provider = ScriptedProvider([call("transfer_to_billing", {"reason": "refund"})])
    triage = Agent(name="Triage", instructions="You route requests.", model=triage_provider, handoffs=[billing])
    handle = Runner.stream(triage, "I want a refund")
    seen = [ev async for ev in handle]
    result = await handle
    assert result.output == "Billing here: refunded." and result.final_agent is billing
    handoff = [ev for ev in seen if isinstance(ev, events.HandoffOccurred)]
    assert len(handoff) == 1 and handoff[0].from_agent is triage and handoff[0].to_agent is billing
    tool_names = [t.name for t in triage_provider.requests[0].tools]
    assert "transfer_to_billing" in tool_names
    before, after = triage_provider.calls[0], billing_provider.calls[0]
    assert before[0].content == "You route requests." and after[0].content == "You handle billing."
    assert [m.role for m in after[1:]] == ["user", "assistant", "tool"]
    assert after[1] == before[1]
    assert [e.type for e in result.entries] == ["input", "tool_call", "tool_result", "assistant_text"]


async def test_first_handoff_in_a_turn_wins():
    a = Agent(name="A", model=ScriptedProvider([text("from A")]))
    b = Agent(name="B", model=ScriptedProvider([text("from B")]))
    fired = []
    entry = Agent(
        name="Entry",
        model=ScriptedProvider([batch(("transfer_to_a", {}), ("transfer_to_b", {}))]),
        handoffs=[
            Handoff(a, on_handoff=lambda args, ctx: fired.append("a")),
            Handoff(b, on_handoff=lambda args, ctx: fired.append("b")),
        ],
    )
    result = await Runner.run(entry, "go")
    assert result.output == "from A" and fired == ["a"]
    rejected = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.is_error]
    assert len(rejected) == 1 and "only one handoff" in rejected[0].output


async def test_structured_output_is_repaired_once():
    provider = ScriptedProvider([text("It is sunny in Oslo."), text('Sure: {"city": "Oslo", "celsius": 21.5}')])
    agent = Agent(name="w", model=provider, output_type=Weather)
    result = await Runner.run(agent, "weather?")
    assert result.output == Weather(city="Oslo", celsius=21.5)
    assert "Output format" in provider.calls[0][0].content
    repair = result.entries[2]
    assert isinstance(repair, InputEntry) and repair.role == "user" and "could not be used" in repair.text
    assert result.turns == 2


async def test_structured_output_fails_after_second_invalid_answer():
    provider = ScriptedProvider([text("nope"), text("still nope")])
    with pytest.raises(OutputValidationError) as info:
        await Runner.run(Agent(name="w", model=provider, output_type=Weather), "weather?")
    assert info.value.raw == "still nope" and info.value.output_type_name == "Weather"


async def test_output_repair_false_fails_fast_and_native_schema_is_sent():
    provider = ScriptedProvider([text("nope")], supports_json_schema=True)
    with pytest.raises(OutputValidationError):
        await Runner.run(Agent(name="w", model=provider, output_type=Weather, output_repair=False), "weather?")
    assert provider.requests[0].response_format["schema"]["properties"]["city"]["type"] == "string"
    assert provider.calls[0][0].content in (None, "") or "Output format" not in provider.calls[0][0].content


@pytest.mark.parametrize(
    ("output_type", "raw", "expected"),
    [
        (list[int], "Here you go:\n```json\n[1, 2, 3]\n```", [1, 2, 3]),
        (Literal["yes", "no"], "yes", "yes"),
        (int, "42", 42),
    ],
)
async def test_structured_output_kinds(output_type, raw, expected):
    result = await Runner.run(Agent(name="s", model=ScriptedProvider([text(raw)]), output_type=output_type), "q")
    assert result.output == expected


async def test_dataclass_output_and_run_wide_override():
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    result = await Runner.run(
        Agent(name="p", model=ScriptedProvider([text('{"x": 1, "y": 2}')])), "q", output_type=Point
    )
    assert result.output == Point(1, 2)


async def test_input_guardrail_trips_before_the_model_is_called():
    provider = ScriptedProvider([text("never")])

    def no_secrets(messages, ctx):
        return "mentions a password" if "password" in messages[-1].text else None

    with pytest.raises(GuardrailTripped, match="mentions a password"):
        await Runner.run(Agent(name="g", model=provider, input_guardrails=[no_secrets]), "my password is hunter2")
    assert provider.calls == []


async def test_output_guardrail_trips_after_validation():
    async def no_shouting(output, ctx):
        return output.isupper()

    with pytest.raises(GuardrailTripped):
        await Runner.run(
            Agent(name="g", model=ScriptedProvider([text("HELLO")]), output_guardrails=[no_shouting]), "hi"
        )


@tool(needs_approval=True)
def delete_everything() -> str:
    """Dangerous."""
    return "deleted"


async def test_approval_fails_closed_without_a_handler():
    provider = ScriptedProvider([call("delete_everything"), text("ok")])
    result = await Runner.run(Agent(name="a", model=provider, tools=[delete_everything]), "go")
    res = result.entries[2]
    assert res.is_error and "not approved" in res.output


async def test_approval_handler_and_stream_consumer_decide():
    provider = ScriptedProvider([call("delete_everything"), text("ok")])
    agent = Agent(name="a", model=provider, tools=[delete_everything], approval_handler=lambda c, ctx: "allow")
    result = await Runner.run(agent, "go")
    assert result.entries[2].output == "deleted"

    provider = ScriptedProvider([call("delete_everything"), text("ok")])
    handle = Runner.stream(Agent(name="a", model=provider, tools=[delete_everything]), "go")
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            ev.approve()
    assert (await handle).entries[2].output == "deleted"


async def test_approval_through_the_channel_later():
    provider = ScriptedProvider([call("delete_everything"), text("ok")])
    handle = Runner.stream(Agent(name="a", model=provider, tools=[delete_everything]), "go")
    channel = handle.approvals
    async for ev in handle:
        if isinstance(ev, events.ApprovalRequired):
            assert channel.is_pending(ev.call.id)
            asyncio.get_running_loop().call_later(0.05, channel.reject, ev.call.id)
    result = await handle
    assert result.entries[2].is_error


async def test_agent_as_tool_folds_usage_and_isolates_prompt():
    child_provider = ScriptedProvider([text("42")])
    child = Agent(name="Oracle", instructions="Answer numerically.", model=child_provider)
    parent_provider = ScriptedProvider([call("ask_oracle", {"input": "meaning of life?"}), text("It says 42.")])
    parent = Agent(name="Parent", model=parent_provider, tools=[child.as_tool()])
    result = await Runner.run(parent, "ask the oracle")
    assert result.entries[2].output == "42"
    assert [m.role for m in child_provider.calls[0]] == ["system", "user"]
    assert child_provider.calls[0][1].content == "meaning of life?"
    assert result.usage.input_tokens == 3  # parent 2 calls + child 1 call, 1 each


async def test_dynamic_instructions_and_clone():
    agent = Agent(name="i", instructions=lambda ctx: f"User is {ctx.deps}.", model=ScriptedProvider([text("a")]))

    @agent.instruction
    async def extra(ctx: RunContext) -> str:
        return "Answer in French."

    other = agent.with_instructions("Be terse.")
    result = await Runner.run(agent, "hi", deps="Ada", extra_instructions="Per-run note.")
    provider = agent.model
    assert provider.calls[0][0].content == "User is Ada.\n\nAnswer in French.\n\nPer-run note."
    assert result.output == "a"
    clone = other.clone(model=ScriptedProvider([text("b")]))
    await Runner.run(clone, "hi", deps="Bo")
    assert clone.model.calls[0][0].content == "User is Bo.\n\nAnswer in French.\n\nBe terse."


async def test_duplicate_tool_names_rejected_at_run_start():
    @tool(name="transfer_to_b")
    def clash() -> str:
        """Clash."""
        return ""

    b = Agent(name="B", model=ScriptedProvider([]))
    agent = Agent(name="A", model=ScriptedProvider([text("x")]), tools=[clash], handoffs=[b])
    with pytest.raises(Exception, match="defined twice"):
        await Runner.run(agent, "hi")


async def test_plugins_contribute_tools_prompt_view_hooks_and_close():
    from lovia.plugins import PluginInstance

    log: list[str] = []

    @tool
    def plugin_tool() -> str:
        """From a plugin."""
        return "plugged"

    class Notes:
        name = "notes"

        async def setup(self) -> PluginInstance:
            log.append("setup")
            hooks = __import__("lovia").AgentHooks()
            hooks.on(events.RunCompleted)(lambda ev, ctx: log.append("completed"))

            async def close() -> None:
                log.append("closed")

            return PluginInstance(
                tools=[plugin_tool],
                instructions="Notes plugin is on.",
                view_injectors=[lambda ctx: [InputEntry(role="user", content=f"(reminder, turn {ctx.turn})")]],
                hooks=hooks,
                aclose=close,
            )

    provider = ScriptedProvider([call("plugin_tool"), text("ok")])
    result = await Runner.run(Agent(name="p", instructions="Base.", model=provider, plugins=[Notes()]), "go")
    assert result.entries[2].output == "plugged"
    assert provider.calls[0][0].content == "Base.\n\nNotes plugin is on."
    assert provider.calls[1][-1].content == "(reminder, turn 2)"
    assert not any(isinstance(e, InputEntry) and "reminder" in e.text for e in result.entries), (
        "injected entries are not persisted"
    )
    assert log == ["setup", "completed", "closed"]


async def test_a_workspace_that_is_not_a_workspace_is_refused_clearly():
    from lovia import UserError

    with pytest.raises(UserError, match="workspace"):
        await Runner.run(Agent(name="w", model=ScriptedProvider([text("x")]), workspace=object()), "go")
