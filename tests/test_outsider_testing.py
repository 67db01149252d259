"""The offline-testing page of the reference, checked from the outside.

Each test restates one behaviour the reference's testing page (and the ``lovia.testing`` listing
of its API page) promises for ``ScriptedProvider`` and the script builders ``text``, ``call`` and
``batch``, and checks it against lovia using public names only. No network: the only model is a
scripted one, and every tool runs for real.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from lovia import Agent, Runner, events, tool
from lovia.messages import AssistantTurn, ToolCall, Usage
from lovia.providers import Provider
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolResultEntry

# ------------------------------------------------------------------ the page's first example


def _adder(seen: list[tuple[int, int]]) -> Any:
    @tool
    def add(a: int, b: int) -> int:
        """Sum of two integers."""
        seen.append((a, b))
        return a + b

    return add


def _calculator(seen: list[tuple[int, int]]) -> Agent[Any]:
    return Agent(
        name="calc",
        model=ScriptedProvider([call("add", {"a": 2, "b": 3}, call_id="c1"), text("The answer is 5.")]),
        tools=[_adder(seen)],
    )


async def test_scripted_calculator_runs_the_real_tool_and_answers() -> None:
    seen: list[tuple[int, int]] = []
    result = await _calculator(seen).run("What is 2 + 3?")
    assert result.output == "The answer is 5."
    assert result.turns == 2
    assert seen == [(2, 3)]  # the tool really ran, with the scripted arguments
    [tool_result] = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert tool_result.call_id == "c1" and tool_result.output == "5" and not tool_result.is_error


async def test_each_script_entry_answers_one_model_call_in_order() -> None:
    provider = ScriptedProvider([call("add", {"a": 4, "b": 4}), call("add", {"a": 8, "b": 1}), text("9")])
    seen: list[tuple[int, int]] = []
    result = await Agent(name="calc", model=provider, tools=[_adder(seen)]).run("go")
    assert seen == [(4, 4), (8, 1)]
    assert result.output == "9" and result.turns == 3
    assert len(provider.calls) == 3


# ------------------------------------------------------------------ building scripts


async def _stream(agent: Agent[Any], prompt: str = "hi") -> list[events.Event]:
    handle = Runner.stream(agent, prompt)
    seen = [ev async for ev in handle]
    await handle.result()
    return seen


async def test_text_turn_streams_one_character_per_delta() -> None:
    seen = await _stream(Agent(name="bot", model=ScriptedProvider([text("Done.")])))
    deltas = [ev.delta for ev in seen if isinstance(ev, events.TextDelta)]
    assert deltas == list("Done.")
    assert isinstance(seen[-1], events.RunCompleted) and seen[-1].result.output == "Done."


async def test_text_with_reasoning_streams_reasoning_before_the_text() -> None:
    seen = await _stream(Agent(name="bot", model=ScriptedProvider([text("Done.", reasoning="hmm...")])))
    kinds = [type(ev).__name__ for ev in seen if isinstance(ev, (events.ReasoningDelta, events.TextDelta))]
    assert kinds == ["ReasoningDelta"] * len("hmm...") + ["TextDelta"] * len("Done.")
    assert "".join(ev.delta for ev in seen if isinstance(ev, events.ReasoningDelta)) == "hmm..."


async def test_call_id_defaults_to_call_underscore_name() -> None:
    @tool
    def search(q: str) -> str:
        """Look something up."""
        return f"high tide for {q}"

    provider = ScriptedProvider(
        [call("search", {"q": "tides"}), call("search", {"q": "moon"}, call_id="x9"), text("ok")]
    )
    seen = await _stream(Agent(name="s", model=provider, tools=[search]))
    started = [ev.call for ev in seen if isinstance(ev, events.ToolCallStarted)]
    assert [(c.id, c.name) for c in started] == [("call_search", "search"), ("x9", "search")]
    assert [c.arguments for c in started] and '"tides"' in started[0].arguments


async def test_batch_requests_several_calls_in_one_turn_and_they_overlap() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    @tool
    async def first(n: int) -> str:
        """First of a pair."""
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 5)  # only finishes if ``second`` runs at the same time
        return f"first {n}"

    @tool
    async def second(n: int) -> str:
        """Second of a pair."""
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 5)
        return f"second {n}"

    provider = ScriptedProvider([batch(("first", {"n": 1}), ("second", {"n": 2})), text("both done")])
    result = await Agent(name="pair", model=provider, tools=[first, second]).run("go")
    assert result.output == "both done" and result.turns == 2
    outputs = sorted(e.output for e in result.entries if isinstance(e, ToolResultEntry))
    assert outputs == ["first 1", "second 2"]
    # both calls were answered together: the second model call saw both results
    assert [m.role for m in provider.calls[1]].count("tool") == 2


async def test_a_script_that_runs_dry_raises_assertion_error() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1})])  # no turn left for the answer
    with pytest.raises(AssertionError, match="ScriptedProvider ran out of canned responses"):
        await Agent(name="calc", model=provider, tools=[_adder([])]).run("1+1?")


async def test_a_scripted_provider_is_single_use() -> None:
    provider = ScriptedProvider([text("once")])
    agent = Agent(name="bot", model=provider)
    assert (await agent.run("a")).output == "once"
    with pytest.raises(AssertionError, match="ran out of canned responses"):
        await agent.run("b")


async def test_script_entries_may_be_assistant_turns() -> None:
    # The API page types a script as a list of AssistantTurn values; a hand-made one works too.
    turns = [
        AssistantTurn(content=None, tool_calls=[ToolCall(id="t1", name="add", arguments='{"a": 20, "b": 22}')]),
        AssistantTurn(content="42", usage=Usage(input_tokens=30, output_tokens=2), finish_reason="stop"),
    ]
    seen: list[tuple[int, int]] = []
    result = await Agent(name="calc", model=ScriptedProvider(turns), tools=[_adder(seen)]).run("20+22?")
    assert seen == [(20, 22)]
    assert result.output == "42" and result.turns == 2 and result.finish_reason == "stop"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 2)


def test_builders_describe_the_turn_they_make() -> None:
    answer = text("Done.")
    assert answer.content == "Done." and answer.tool_calls == []
    request = call("search", {"q": "tides"})
    assert request.content is None
    [one] = request.tool_calls
    assert (one.id, one.name) == ("call_search", "search")
    several = batch(("a", {"x": 1}), ("b", {"y": 2}))
    assert [c.name for c in several.tool_calls] == ["a", "b"]
    assert len({c.id for c in several.tool_calls}) == 2


# ------------------------------------------------------------------ asserting on what the agent saw


async def test_provider_records_each_prompt_as_chat_messages() -> None:
    provider = ScriptedProvider([text("ok")])
    agent = Agent(name="bot", model=provider, instructions="Be terse.")
    await agent.run("hello")
    [first_prompt] = provider.calls
    assert first_prompt[0].role == "system"
    assert "Be terse." in first_prompt[0].content
    assert first_prompt[-1].role == "user" and first_prompt[-1].content == "hello"


async def test_the_second_prompt_carries_the_tool_result() -> None:
    seen: list[tuple[int, int]] = []
    agent = _calculator(seen)
    provider = agent.model
    assert isinstance(provider, ScriptedProvider)
    await agent.run("What is 2 + 3?")
    second = provider.calls[1]
    assistant = next(m for m in second if m.role == "assistant")
    assert [c.name for c in assistant.tool_calls] == ["add"]
    tool_msg = next(m for m in second if m.role == "tool")
    assert tool_msg.tool_call_id == "c1" and tool_msg.content == "5"


async def test_dynamic_instructions_are_visible_in_the_recorded_prompt() -> None:
    def instructions(ctx: Any) -> str:
        return f"Address {ctx.deps['name']} by name."

    provider = ScriptedProvider([text("Hi Ada")])
    await Runner.run(Agent(name="bot", model=provider, instructions=instructions), "hi", deps={"name": "Ada"})
    assert "Address Ada by name." in provider.calls[0][0].content


# ------------------------------------------------------------------ the real loop runs


async def test_schema_validation_runs_for_scripted_calls() -> None:
    seen: list[tuple[int, int]] = []
    provider = ScriptedProvider([call("add", {"a": "not a number", "b": 1}), text("sorry")])
    result = await Agent(name="calc", model=provider, tools=[_adder(seen)]).run("go")
    assert seen == []  # the tool never ran
    [bad] = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert bad.is_error
    assert next(m for m in provider.calls[1] if m.role == "tool").content == bad.output


async def test_handoff_target_consumes_its_own_script() -> None:
    specialist_model = ScriptedProvider([text("Specialist here: refund issued.")])
    specialist = Agent(name="billing", model=specialist_model)
    triage_model = ScriptedProvider([call("transfer_to_billing", {})])
    triage = Agent(name="triage", model=triage_model, handoffs=[specialist])
    result = await triage.run("I want a refund")
    assert result.output == "Specialist here: refund issued."
    assert result.final_agent is specialist
    assert (len(triage_model.calls), len(specialist_model.calls)) == (1, 1)


async def test_agent_as_tool_sub_run_consumes_its_own_script() -> None:
    helper_model = ScriptedProvider([text("five bullets")])
    helper = Agent(name="summarizer", model=helper_model)
    lead_model = ScriptedProvider([call("ask_summarizer", {"input": "summarize this"}), text("done: five bullets")])
    lead = Agent(name="lead", model=lead_model, tools=[helper.as_tool(description="Summarize.")])
    result = await lead.run("please summarize")
    assert result.output == "done: five bullets"
    assert len(helper_model.calls) == 1 and helper_model.calls[0][-1].content == "summarize this"
    assert next(m for m in lead_model.calls[1] if m.role == "tool").content == "five bullets"


# ------------------------------------------------------------------ sharp edges


class Brief(BaseModel):
    title: str


async def test_structured_output_takes_the_prompt_path() -> None:
    provider = ScriptedProvider([text('{"title": "Tides"}')])
    assert provider.supports_json_schema is False
    result = await Agent(name="w", model=provider, output_type=Brief).run("title please")
    assert isinstance(result.output, Brief) and result.output.title == "Tides"
    system_prompt = provider.calls[0][0]
    assert system_prompt.role == "system" and "title" in system_prompt.content


def test_run_sync_works_without_a_running_loop() -> None:
    result = Runner.run_sync(Agent(name="bot", model=ScriptedProvider([text("sync ok")])), "hi")
    assert result.output == "sync ok" and result.turns == 1


def test_scripted_provider_doubles_as_a_provider() -> None:
    provider = ScriptedProvider([text("x")])
    assert isinstance(provider.name, str) and provider.name
    assert isinstance(provider, Provider)
    provider.model = "tiny-1"  # the API page lists ``model`` as a plain field
    assert provider.model == "tiny-1"


async def test_builders_return_assistant_turns_of_one_token_each_that_can_be_edited() -> None:

    turns = [text("hi"), call("add", {"a": 1, "b": 2}), batch(("add", {"a": 1, "b": 1}))]
    for turn in turns:
        assert isinstance(turn, AssistantTurn) and turn.usage == Usage(input_tokens=1, output_tokens=1)
    answer = text("done")
    answer.usage = Usage(input_tokens=50, output_tokens=7)
    answer.finish_reason = "length"
    provider = ScriptedProvider([call("add", {"a": 1, "b": 2}), answer])
    assert provider.name == "scripted" and provider.model is None
    result = await Runner.run(Agent(name="calc", model=provider, tools=[_adder([])]), "1+2?")
    assert result.usage == Usage(input_tokens=51, output_tokens=8)
    assert result.last_input_tokens == 50 and result.finish_reason == "length"
