"""``lovia.web.titles`` against a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lovia.exceptions import LoviaError
from lovia.providers import OpenAIChatProvider
from lovia.web.titles import TITLE_INSTRUCTIONS, generate_title, provisional_title
from tests.providers.servers import FakeServer, Reply, openai_text_stream


async def _title(server: FakeServer, user: str, reply: Any) -> str:
    provider = OpenAIChatProvider("titler", base_url=server.base_url)
    try:
        return await generate_title(user, reply, model=provider)
    finally:
        await provider.aclose()


def test_provisional_title_collapses_and_cuts() -> None:
    assert provisional_title("  hello\n\n  there ") == "hello there"
    long = "word " * 40
    title = provisional_title(long)
    assert len(title) == 60 and title.endswith("…")
    assert provisional_title("") == ""


def test_generate_title_asks_the_model_and_cleans_the_answer() -> None:
    with FakeServer() as server:
        server.enqueue(Reply.sse(openai_text_stream('  "Planning A\n Trip."  ')))
        title = asyncio.run(_title(server, "where should I go " * 300, {"a": 1}))
        assert title == "Planning A Trip"
        sent = server.posts()[0].json
    system = sent["messages"][0]
    assert system["role"] == "system" and TITLE_INSTRUCTIONS in str(system["content"])
    user = str(sent["messages"][-1]["content"])
    assert user.startswith("USER: where should I go") and "ASSISTANT: {'a': 1}" in user
    assert len(user) < 2100  # the user side is cut to 2000 characters


def test_a_blank_answer_falls_back_to_the_provisional_title() -> None:
    with FakeServer() as server:
        server.enqueue(Reply.sse(openai_text_stream(' "" ')))
        assert asyncio.run(_title(server, "hi  there", None)) == "hi there"


def test_a_failing_model_raises() -> None:
    with FakeServer() as server:
        server.enqueue(Reply.json(400, {"error": {"message": "bad request"}}))
        with pytest.raises(LoviaError):
            asyncio.run(_title(server, "hi", "hello"))
