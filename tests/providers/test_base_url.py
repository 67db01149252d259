"""Base URLs: a bare host gets /v1 (Anthropic SDK style), an explicit path is used as given."""

from __future__ import annotations

import pytest

from lovia import Agent, Runner

from .servers import FakeServer, Reply, anthropic_stream, anthropic_text_stream, openai_text_stream


@pytest.mark.parametrize("suffix", ["", "/"])
async def test_bare_anthropic_host_posts_to_v1_messages(server: FakeServer, monkeypatch, suffix):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.port}{suffix}")
    server.enqueue(Reply.sse(anthropic_stream(anthropic_text_stream("hello"))))
    result = await Runner.run(Agent(name="a", model="anthropic:claude-test"), "hi")
    assert result.output == "hello"
    assert [r.path for r in server.posts()] == ["/v1/messages"]


async def test_bare_openai_host_posts_to_v1_chat_completions(server: FakeServer, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.port}")
    server.enqueue(Reply.sse(openai_text_stream("hello")))
    result = await Runner.run(Agent(name="a", model="openai:gpt-test"), "hi")
    assert result.output == "hello"
    assert [r.path for r in server.posts()] == ["/v1/chat/completions"]


async def test_explicit_path_is_kept(monkeypatch):
    with FakeServer(prefix="/proxy/openai") as proxied:
        monkeypatch.setenv("OPENAI_BASE_URL", proxied.base_url + "/")
        proxied.enqueue(Reply.sse(openai_text_stream("via proxy")))
        result = await Runner.run(Agent(name="a", model="openai:gpt-test"), "hi")
    assert result.output == "via proxy"
    assert [r.path for r in proxied.posts()] == ["/proxy/openai/chat/completions"]
