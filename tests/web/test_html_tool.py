"""show_html: the short envelope the model sees, and the tool errors it can act on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia import Agent, Runner, events
from lovia.exceptions import ToolError
from lovia.testing import ScriptedProvider, call, text
from lovia.web import show_html
from lovia.web.agents import default_agents
from lovia.web.components import ENVELOPE_KEY
from lovia.web.html import MAX_HTML_BYTES, validate_html


async def outputs(args: dict[str, Any]) -> list[events.ToolCallCompleted]:
    agent = Agent(name="a", model=ScriptedProvider([call("show_html", args), text("ok")]), tools=[show_html])
    handle = Runner.stream(agent, "go")
    done = [ev async for ev in handle if isinstance(ev, events.ToolCallCompleted)]
    await handle.result()
    return done


async def test_a_page_is_answered_with_an_envelope_that_points_at_the_arguments() -> None:
    (done,) = await outputs({"html": "<p>hi</p>", "title": "Hi"})
    assert not done.is_error
    assert json.loads(done.output) == {ENVELOPE_KEY: {"kind": "html", "from_args": True}}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"html": "x" * (MAX_HTML_BYTES + 1)}, "over the 131072-byte limit"),
        ({"html": "   "}, "empty"),
        ({"html": 42}, "html"),
        ({"html": "<p>ok</p>", "title": ["not", "text"]}, "title"),
    ],
)
async def test_bad_pages_come_back_as_tool_errors(args: dict[str, Any], needle: str) -> None:
    (done,) = await outputs(args)
    assert done.is_error and needle in done.output


def test_validate_html_limits_count_bytes_not_characters() -> None:
    validate_html("é" * (MAX_HTML_BYTES // 2))
    with pytest.raises(ToolError) as info:
        validate_html("é" * (MAX_HTML_BYTES // 2 + 1))
    assert info.value.hint and "smaller" in info.value.hint
    with pytest.raises(ToolError):
        validate_html(b"<p>bytes</p>")


def test_the_default_agent_with_a_model_has_show_html(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_MODEL", "openai:gpt-4.1-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agents = default_agents()
    names = [t.name for t in agents.agents[agents.default].tools]
    assert "show_html" in names
