"""Run keywords: ``deps=`` (``context=`` is its deprecated spelling), defaults resolved once."""

from __future__ import annotations

import pytest

from lovia import Agent, RunContext, Runner, UserError, tool
from lovia.testing import ScriptedProvider, call, text


@tool
def whoami(ctx: RunContext) -> str:
    """The deps' name."""
    return str(ctx.deps)


def agent() -> Agent:
    return Agent("a", model=ScriptedProvider([call("whoami"), text("done")]), tools=[whoami])


async def test_context_keyword_warns_and_still_reaches_the_tools():
    with pytest.warns(DeprecationWarning, match="deps="):
        result = await Runner.run(agent(), "go", context="Ada")
    assert result.entries[2].output == "Ada"


async def test_context_and_deps_together_are_refused_before_anything_runs():
    provider = ScriptedProvider([text("never")])
    with pytest.warns(DeprecationWarning), pytest.raises(UserError) as info:
        await Runner.run(Agent("a", model=provider), "go", deps=1, context=2)
    assert info.value.hint and provider.requests == []


async def test_agent_shortcuts_take_the_same_keywords():
    result = await agent().run("go", deps="Bo", max_turns=3)
    assert result.entries[2].output == "Bo"
    handle = agent().stream("go", deps="Cy")
    assert (await handle).entries[2].output == "Cy"
    with pytest.raises(TypeError):
        await agent().run("go", no_such_keyword=1)  # type: ignore[call-arg]


def test_run_sync_takes_deps():
    assert agent().run_sync("go", deps="Di").entries[2].output == "Di"


async def test_a_bad_keyword_value_fails_at_the_call_not_at_the_first_event():
    with pytest.raises(UserError):
        Runner.stream(agent(), "go", max_turns=0)
