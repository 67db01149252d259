"""A ``Tool`` made with ``@tool`` stays callable as the plain function it wraps."""

from __future__ import annotations

import asyncio
import inspect
from typing import Annotated

import pytest

from lovia import Agent
from lovia.exceptions import UserError
from lovia.tools import Tool, tool
from lovia.web.charts import show_chart
from lovia.web.html import show_html
from lovia.web.tables import show_table


@tool
def add(a: int, b: Annotated[int, "the second term"] = 2) -> int:
    """Add two numbers."""
    return a + b


@tool(name="shout")
async def loud(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def test_sync_tool_calls_the_function_directly() -> None:
    assert add(1) == 3
    assert add(1, b=5) == 6
    assert add(a=4, b=4) == 8


def test_async_tool_returns_a_coroutine() -> None:
    coro = loud("hey")
    assert inspect.iscoroutine(coro)
    assert asyncio.run(coro) == "HEY"


def test_signature_is_the_function_signature() -> None:
    sig = inspect.signature(add)
    assert list(sig.parameters) == ["a", "b"]
    assert sig.parameters["b"].default == 2
    assert inspect.signature(loud).return_annotation in (str, "str")
    assert inspect.unwrap(add) is add.function
    # The class itself keeps the dataclass constructor signature.
    assert "name" in inspect.signature(Tool).parameters


def test_tool_behaviour_is_unchanged() -> None:
    assert isinstance(add, Tool) and add.name == "add"
    assert add.openai_schema()["function"]["name"] == "add"
    assert hash(add) == hash(add) and add == add and add != loud
    assert len({add, add, loud}) == 2
    assert "function=" not in repr(add)


def test_a_hand_built_tool_is_not_callable_as_a_function() -> None:
    async def invoke(args: dict, ctx: object) -> str:
        return "x"

    bare = Tool(name="bare", description="", parameters={"type": "object"}, invoke=invoke)
    with pytest.raises(UserError) as err:
        bare()
    assert err.value.hint


def test_web_component_tools_are_callable_and_still_tools() -> None:
    assert "option" in inspect.signature(show_chart).parameters
    assert list(inspect.signature(show_table).parameters) == ["columns", "rows", "title"]
    assert "html" in inspect.signature(show_html).parameters
    out = show_table(["a"], [[1]])
    assert isinstance(out, str) and "lovia_ui" in out
    agent = Agent(name="a", model="test", tools=[show_chart, show_table, show_html])
    assert [t.name for t in agent.tools] == ["show_chart", "show_table", "show_html"]
