"""``describe_image``: a text-only chat model asks a local OpenAI-compatible vision server."""

from __future__ import annotations

import base64
import inspect
from pathlib import Path
from typing import Any

from lovia import Agent, Runner
from lovia.providers import OpenAIChatProvider
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.web.vision import DEFAULT_QUESTION, VISION_INSTRUCTIONS, make_describe_image_tool
from lovia.workspace import Workspace
from tests.providers.servers import FakeServer, Reply, openai_text_stream

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _results(result: Any) -> dict[str, ToolResultEntry]:
    return {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}


async def _run(tmp_path: Path, server: FakeServer, calls: list[Any]) -> dict[str, ToolResultEntry]:
    vision = OpenAIChatProvider("vision-model", base_url=server.base_url)
    chat = ScriptedProvider([*calls, text("done")])
    agent = Agent(
        name="a",
        model=chat,
        tools=[make_describe_image_tool(vision)],
        workspace=Workspace.local(str(tmp_path / "ws"), mode="coding"),
    )
    try:
        return _results(await Runner.run(agent, "what is in the picture?"))
    finally:
        await vision.aclose()


def test_the_tool_shape() -> None:
    t = make_describe_image_tool("openai:gpt-4o")
    assert t.name == "describe_image"
    assert t.parameters["required"] == ["path"]
    assert t.parameters["properties"]["question"]["default"] == DEFAULT_QUESTION
    assert list(inspect.signature(t).parameters) == ["ctx", "path", "question"]


async def test_an_upload_goes_to_the_vision_model_as_an_image_part(tmp_path: Path) -> None:
    (tmp_path / "ws" / "uploads").mkdir(parents=True)
    (tmp_path / "ws" / "uploads" / "dot.png").write_bytes(PNG)
    with FakeServer() as server:
        server.enqueue(Reply.sse(openai_text_stream("A single red pixel.")))
        results = await _run(
            tmp_path,
            server,
            [call("describe_image", {"path": "uploads/dot.png", "question": "What colour?"}, call_id="c1")],
        )
        sent = server.posts()[0].json
    assert results["c1"].is_error is False
    assert results["c1"].output == "A single red pixel."
    assert sent["model"] == "vision-model"
    assert VISION_INSTRUCTIONS in str(sent["messages"][0]["content"])
    parts = sent["messages"][-1]["content"]
    assert {"type": "text", "text": "What colour?"} in parts
    image = next(p for p in parts if p["type"] == "image_url")
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


async def test_outside_paths_and_non_images_are_refused_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("hello")
    (tmp_path / "secret.png").write_bytes(PNG)
    with FakeServer() as server:
        results = await _run(
            tmp_path,
            server,
            [
                call("describe_image", {"path": "../secret.png"}, call_id="out"),
                call("describe_image", {"path": str(tmp_path / "secret.png")}, call_id="abs"),
                call("describe_image", {"path": "notes.txt"}, call_id="txt"),
                call("describe_image", {"path": "missing.png"}, call_id="gone"),
            ],
        )
        assert server.posts() == []  # nothing reached the vision model
    for call_id in ("out", "abs"):
        assert results[call_id].is_error and "outside the workspace" in results[call_id].output
    assert results["txt"].is_error and ".png" in results["txt"].output
    assert results["gone"].is_error
