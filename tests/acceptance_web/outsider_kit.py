"""Shared pieces of the outsider tests: what someone who only read the published pages would
write to test the web API the usual FastAPI way (``TestClient``, a scripted model, SQLite files
in a temporary directory).

Nothing here reaches into lovia's internals: agents are built from the public ``lovia`` surface,
and the server is only talked to over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app

Frame = tuple[str, Any]

__all__ = [
    "Frame",
    "Hold",
    "app_client",
    "collect",
    "events_of",
    "first",
    "frames_of",
    "hold_agent",
    "parse_sse",
    "read_until",
    "rest_of",
    "scripted",
    "wait_until",
]


def parse_sse(lines: Iterator[str]) -> Iterator[Frame]:
    """``(event, data)`` pairs of an SSE body given line by line; ``:`` comments are skipped."""
    event, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        yield event, json.loads("\n".join(data))


def collect(client: TestClient, path: str, body: Any = None, **kwargs: Any) -> list[Frame]:
    """POST ``path`` and read its whole SSE answer (the stream must end on its own)."""
    with client.stream("POST", path, json=body, **kwargs) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(parse_sse(response.iter_lines()))


def frames_of(response: Any) -> Iterator[Frame]:
    """The frames of an open SSE response; calling it again continues where the last call stopped."""
    frames = getattr(response, "_outsider_frames", None)
    if frames is None:
        frames = parse_sse(response.iter_lines())
        response._outsider_frames = frames
    return frames


def read_until(response: Any, stop: Callable[[str, Any], bool]) -> list[Frame]:
    """Frames of an open SSE response up to and including the first one ``stop`` accepts."""
    out: list[Frame] = []
    for ev, data in frames_of(response):
        out.append((ev, data))
        if stop(ev, data):
            break
    return out


def rest_of(response: Any) -> list[Frame]:
    """The remaining frames of an open SSE response, until the server ends it."""
    return list(frames_of(response))


def events_of(frames: list[Frame]) -> list[str]:
    """The event names, in order."""
    return [ev for ev, _ in frames]


def first(frames: list[Frame], event: str) -> Any:
    """The data of the first ``event`` frame."""
    for ev, data in frames:
        if ev == event:
            return data
    raise AssertionError(f"no {event!r} frame in {events_of(frames)}")


def wait_until(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``check`` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


def scripted(*turns: Any, name: str = "bot", tools: list[Any] | None = None, **kwargs: Any) -> Agent[Any]:
    """An agent whose model replays ``turns`` (``text`` / ``call`` values, or plain strings)."""
    return Agent(name=name, model=ScriptedProvider(list(turns)), tools=list(tools or []), **kwargs)


class Hold:
    """A tool that keeps a run busy until the test releases it (or 30 s pass)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        hold = self

        @tool
        async def wait_here() -> str:
            """Wait until released."""
            hold.entered.set()
            deadline = time.monotonic() + 30
            while not hold.release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return "released"

        self.tool = wait_here


def hold_agent(hold: Hold, *after: Any, name: str = "bot", **kwargs: Any) -> Agent[Any]:
    """An agent whose first turn calls ``wait_here`` and then says ``after`` (default: "finished")."""
    turns = [call("wait_here", {}), *(after or (text("finished"),))]
    return scripted(*turns, name=name, tools=[hold.tool], **kwargs)


def app_client(agent: Any, tmp_path: Path, **kwargs: Any) -> TestClient:
    """``TestClient(create_app(agent, db_path=<tmp>/chat.db, ...))`` (enter it with ``with``)."""
    kwargs.setdefault("db_path", tmp_path / "chat.db")
    return TestClient(create_app(agent, **kwargs))
