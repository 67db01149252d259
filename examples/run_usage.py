"""What a run cost, and how full its context window was at the end (offline, scripted model).

Run it: ``python examples/run_usage.py``.

The model calls one tool and then answers: two model calls. ``result.usage`` adds up both
(``input_tokens`` counts each call's whole prompt), while ``result.last_input_tokens`` is the
prompt of the last call alone, the figure to hold against the model's context window. A replay
of the finished run from its checkpoint reports the same numbers without calling the model.
"""

from __future__ import annotations

import asyncio

from lovia import Agent, CheckpointOptions, InMemoryCheckpointer, Runner, Usage, tool
from lovia.testing import ScriptedProvider, call, text

CONTEXT_WINDOW = 128_000


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 18C, light rain"


def agent(model: ScriptedProvider) -> Agent:
    return Agent(name="weather", instructions="Answer briefly.", model=model, tools=[lookup])


async def main() -> None:
    script = [
        call("lookup", {"city": "Paris"}, usage=Usage(input_tokens=1_200, output_tokens=20)),
        text("Light rain, 18C.", usage=Usage(input_tokens=1_260, output_tokens=9)),
    ]
    checkpoint = CheckpointOptions(InMemoryCheckpointer(), "weather-run")
    result = await Runner.run(agent(ScriptedProvider(script)), "Weather in Paris?", checkpoint=checkpoint)
    print(f"answer: {result.output}")
    print(f"model calls: {result.turns}, input tokens in all: {result.usage.input_tokens}")
    share = (result.last_input_tokens or 0) / CONTEXT_WINDOW
    print(f"last prompt: {result.last_input_tokens} tokens = {share:.1%} of a {CONTEXT_WINDOW:,}-token window")

    replay = await Runner.run(agent(ScriptedProvider([])), "Weather in Paris?", checkpoint=checkpoint)
    print(f"replayed: {replay.replayed}, last prompt still {replay.last_input_tokens} tokens")


if __name__ == "__main__":
    asyncio.run(main())
