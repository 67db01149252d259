"""`lovia web` end to end on an OpenAI-compatible endpoint configured only through the environment."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.providers.servers import FakeServer, Reply, openai_text_stream, openai_tool_stream

from .helpers import ProcessServer, sse


def test_env_configured_openai_compatible_model(tmp_path: Path) -> None:
    with FakeServer() as fake:
        fake.enqueue(
            Reply.sse(openai_tool_stream([("call_1", "clock", "{}")])),
            Reply.sse(openai_text_stream("It is **tea time**.")),
        )
        env = {"LOVIA_MODEL": "openai:fake-model", "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}
        with ProcessServer("--db", str(tmp_path / "w.db"), env=env) as srv:
            info = httpx.get(f"{srv.url}/api/info").json()
            assert info["configured"] is True and info["demo"] is False
            assert httpx.get(f"{srv.url}/api/agents").json()[0]["model"] == "openai:fake-model"
            s = sse(srv.url, "/api/chat/stream", {"message": "what time is it?"})
        posts = fake.posts()
    assert s.of("tool_call")[0]["name"] == "clock"
    assert s.text() == "It is **tea time**."
    assert s.names()[-1] == "done"
    assert [p.path for p in posts] == ["/v1/chat/completions"] * 2
    first, second = posts[0].json, posts[1].json
    assert first["model"] == "fake-model" and first["stream"] is True
    assert first["messages"][-1] == {"role": "user", "content": "what time is it?"}
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_1" for m in second["messages"])
    assert (
        posts[0].headers.get("authorization") == "Bearer sk-test"
        or posts[0].headers.get("Authorization") == "Bearer sk-test"
    )
    assert json.dumps(first).count("clock") >= 1  # the tool was advertised
