"""Providers built from model strings belong to the run (closed at its end); objects passed in do not."""

from __future__ import annotations

import pytest

from lovia import Agent, Runner
from lovia.providers import register_provider
from lovia.testing import ScriptedProvider, fail, text


class ClosingScripted(ScriptedProvider):
    instances: list[ClosingScripted] = []

    def __init__(self, turns) -> None:
        super().__init__(turns)
        self.closed = 0
        ClosingScripted.instances.append(self)

    async def aclose(self) -> None:
        self.closed += 1


@pytest.fixture(autouse=True)
def _registered():
    ClosingScripted.instances.clear()
    register_provider("ownedtest", lambda model, **kw: ClosingScripted([text(f"hi from {model}")]))
    register_provider("ownedfail", lambda model, **kw: ClosingScripted([fail(RuntimeError("boom"))]))


async def test_string_built_provider_is_created_per_run_and_closed():
    agent = Agent(name="a", model="ownedtest:m1")
    first = await Runner.run(agent, "hello")
    second = await Runner.run(agent, "hello")
    assert first.output == second.output == "hi from m1"
    assert len(ClosingScripted.instances) == 2, "each run builds its own provider"
    assert [p.closed for p in ClosingScripted.instances] == [1, 1]


async def test_string_built_provider_is_closed_when_the_run_fails():
    with pytest.raises(RuntimeError):
        await Runner.run(Agent(name="a", model="ownedfail:m", retry=None), "hello")
    assert [p.closed for p in ClosingScripted.instances] == [1]


async def test_provider_objects_stay_open():
    mine = ClosingScripted([text("ok")])
    await Runner.run(Agent(name="a", model=mine), "hello")
    assert mine.closed == 0
