"""The default agent's memory, tools, search backend and vision tool (``lovia.web.builder``)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from lovia import Runner
from lovia.plugins.memory import Memory
from lovia.providers.base import supports_vision
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.web.builder import (
    DEFAULT_MEMORY_DIR,
    build_default_agent,
    resolve_memory,
    resolve_tools,
    resolve_vision_tool,
)
from lovia.web.config.probe import build_provider
from lovia.web.config.schema import Connection, ModelProfile, Roles, SearchConfig, WebConfig
from lovia.workspace import Workspace
from tests.providers.servers import FakeServer, Reply


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.delenv("LOVIA_MEMORY_DIR", raising=False)


def test_resolve_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_memory(str(tmp_path), True) is None
    mem = resolve_memory(None, False)
    assert isinstance(mem, Memory) and str(mem.root) == DEFAULT_MEMORY_DIR
    assert str(resolve_memory(str(tmp_path / "m"), False).root) == str(tmp_path / "m")  # type: ignore[union-attr]
    monkeypatch.setenv("LOVIA_MEMORY_DIR", str(tmp_path / "env"))
    assert str(resolve_memory(None, False).root) == str(tmp_path / "env")  # type: ignore[union-attr]


def test_the_search_tool_follows_the_backend_and_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    # "auto" without a Tavily key falls back to DuckDuckGo, whose package comes with lovia[web]
    assert importlib.util.find_spec("ddgs") is not None
    assert [t.name for t in resolve_tools()] == ["clock", "web_search"]
    # a named backend that cannot work is left out, and "off" means off
    assert [t.name for t in resolve_tools(SearchConfig(backend="tavily"))] == ["clock"]
    assert [t.name for t in resolve_tools(SearchConfig(backend="off", tavily_api_key="k"))] == ["clock"]


async def test_tavily_search_over_a_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeServer(prefix="") as server:
        monkeypatch.setenv("LOVIA_TAVILY_BASE_URL", server.base_url)
        server.enqueue(
            Reply.json(200, {"results": [{"title": "Lovia", "url": "https://lovia.example", "content": "agents"}]})
        )
        tools = resolve_tools(SearchConfig(backend="auto", tavily_api_key="tv-key"))
        assert [t.name for t in tools] == ["clock", "web_search"]
        agent_model = ScriptedProvider([call("web_search", {"query": "lovia"}, call_id="s1"), text("ok")])
        from lovia import Agent

        result = await Runner.run(Agent(name="a", model=agent_model, tools=tools), "search")
        sent = server.posts()[0]
    out = next(e for e in result.entries if isinstance(e, ToolResultEntry))
    assert not out.is_error and "https://lovia.example" in out.output
    assert sent.path == "/search" and sent.json["query"] == "lovia"
    assert sent.headers.get("authorization") == "Bearer tv-key"


def _profile(server: FakeServer, vision: str) -> ModelProfile:
    return ModelProfile.model_validate(
        {"id": "p-" + vision, "model": "m", "base_url": server.base_url, "api_key": "k", "vision": vision}
    )


def _text_only(server: FakeServer) -> Any:
    provider = build_provider(Connection.from_profile(_profile(server, "off")), supports_vision=False)
    assert provider is not None and not supports_vision(provider)
    return provider


def _seeing(server: FakeServer) -> Any:
    return build_provider(Connection.from_profile(_profile(server, "on")), supports_vision=True)


def test_resolve_vision_tool(tmp_path: Path) -> None:
    ws = Workspace.local(str(tmp_path), mode="coding")
    with FakeServer() as server:
        text_only = _text_only(server)
        assert resolve_vision_tool(_seeing(server), ws, _profile(server, "on")) is None
        assert resolve_vision_tool(text_only, ws, None) is None
        assert resolve_vision_tool(text_only, None, _profile(server, "on")) is None
        describe = resolve_vision_tool(text_only, ws, _profile(server, "on"))
        assert describe is not None and describe.name == "describe_image"


def test_the_default_agent_uses_the_search_and_vision_settings(tmp_path: Path) -> None:
    with FakeServer() as server:
        chat = _profile(server, "off")
        seer = _profile(server, "on")
        config = WebConfig(
            models=[chat, seer], roles=Roles(chat=chat.id, vision=seer.id), search=SearchConfig(tavily_api_key="k")
        )
        args = argparse.Namespace(workspace=str(tmp_path), no_subagents=True)
        agent = build_default_agent(args, None, _text_only(server), config=config)
    names = [t.name for t in agent.tools]
    assert "web_search" in names and "describe_image" in names and "clock" in names
