"""Helpers for the web tests: a real uvicorn server in a thread or a subprocess, an SSE reader, scripted agents."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import ChatStore

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- servers


async def _close_pg_store(app: Any) -> None:
    """Close a PostgreSQL chat store the test handed to ``create_app`` in the loop that opened its pools.

    The app leaves a caller's store open, and the pools are bound to the server thread's loop, so
    the test could not close them later; unclosed, each store holds up to ~20 connections until
    garbage collection and a run of PostgreSQL tests exhausts the server's ``max_connections``.
    """
    from lovia.web.store import PostgresChatStore

    deps = getattr(getattr(app, "state", None), "deps", None)
    store = getattr(deps, "store", None)
    if isinstance(store, PostgresChatStore):
        await store.close()


class ThreadServer:
    """A uvicorn server for ``app`` on a free loopback port, in a background thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        from lovia.web.server import _server_class

        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", ws="none", lifespan="on")
        self.server = _server_class()(config)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.app = app

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        try:
            await self.server.serve()
        finally:
            await _close_pg_store(self.app)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        assert not self.thread.is_alive(), "server did not stop"

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ProcessServer:
    """``python -m lovia.web`` in a subprocess (so a test can SIGKILL it)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.args = ["--port", str(self.port), *args]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProcessServer:
        cmd = [sys.executable, "-m", "lovia.web", "--log-level", "warning", *self.args]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 60  # generous: a loaded 2-core machine starts three replicas at once
        while True:
            assert self.proc.poll() is None, f"server exited: {self.proc.stdout.read() if self.proc.stdout else ''}"
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        if self.proc.stdout:
            self.proc.stdout.close()
        return code

    def __enter__(self) -> ProcessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGKILL)


def inspect_store(db: str, fn: Any) -> Any:
    """Open a second ChatStore on the same file and run ``await fn(store)`` (from the test thread)."""

    async def go() -> Any:
        store = ChatStore.sqlite(db)
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(go())


# --------------------------------------------------------------------------- SSE


@dataclass
class Frame:
    event: str
    data: dict[str, Any]


@dataclass
class Stream:
    frames: list[Frame] = field(default_factory=list)

    def names(self) -> list[str]:
        return [f.event for f in self.frames]

    def of(self, event: str) -> list[dict[str, Any]]:
        return [f.data for f in self.frames if f.event == event]

    def text(self) -> str:
        return "".join(d["delta"] for d in self.of("text_delta"))


def iter_frames(response: httpx.Response) -> Iterator[Frame]:
    event, data = "message", []
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if data:
                yield Frame(event, json.loads("\n".join(data)))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def sse(
    base: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    until: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 20,
    on_frame: Any = None,
) -> Stream:
    """POST and collect frames until the stream ends (or until the first ``until`` frame, then disconnect).

    ``on_frame(frame)``, when given, is called as each frame arrives (to signal another thread).
    """
    out = Stream()
    with (
        httpx.Client(timeout=timeout) as client,
        client.stream("POST", base + path, json=body, headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        for frame in iter_frames(response):
            out.frames.append(frame)
            if on_frame is not None:
                on_frame(frame)
            if until is not None and frame.event == until:
                break
    return out


def wait_for(predicate: Any, timeout: float = 10, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(interval)


# --------------------------------------------------------------------------- scripted agent


def last_user(entries: list[TranscriptEntry]) -> tuple[str, int]:
    """The last user message and how many tool results follow it."""
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if isinstance(e, InputEntry) and e.role == "user":
            return e.text, sum(1 for x in entries[i:] if isinstance(x, ToolResultEntry))
    return "", 0


class Gate:
    """Lets a test hold a tool open (the slow tool waits on it) and count executions."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.runs: dict[str, int] = {}

    def bump(self, name: str) -> None:
        self.runs[name] = self.runs.get(name, 0) + 1


XSS = (
    'Safe? <script>window.__pwned = "script"</script> <img src=x onerror="window.__pwned = \'img\'"> '
    '[click me](javascript:window.__pwned=1) <b onmouseover="x()">bold?</b>'
)


def scripted_agent(gate: Gate | None = None, *, name: str = "scripted", delay: float = 0.0) -> Agent[Any]:
    """An agent whose replies depend only on the last user message (see the branches below)."""
    gate = gate or Gate()
    counter = {"n": 0}

    @tool
    def lookup(q: str) -> dict[str, Any]:
        """Look something up."""
        gate.bump("lookup")
        return {"q": q, "answer": 42}

    @tool
    async def slow(seconds: float = 30.0) -> str:
        """Wait (until the test releases it)."""
        gate.bump("slow")
        deadline = time.monotonic() + seconds
        while not gate.release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return "slow done"

    @tool(needs_approval=True)
    def remove(path: str) -> str:
        """Delete a file (gated: a person approves each call)."""
        gate.bump("remove")
        return f"removed {path}"

    def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
        said, results = last_user(entries)
        word = said.split()[0].lower() if said.split() else ""
        if word == "remove" and results == 0:
            return call("remove", {"path": said.split()[-1]}, call_id=f"call_remove_{len(entries)}")
        if word == "tool" and results == 0:
            return call("lookup", {"q": said}, call_id=f"call_lookup_{len(entries)}")
        if word == "slow" and results == 0:
            return call("lookup", {"q": "first"}, call_id=f"call_lookup_{len(entries)}")
        if word == "slow" and results == 1:
            return call("slow", {}, call_id=f"call_slow_{len(entries)}")
        if word == "xss":
            return text(XSS)
        if word == "count":
            counter["n"] += 1
            return text(f"Answer number {counter['n']}.")
        if word == "stream":
            return text("Streaming " + "word " * 15 + "end.", delay=0.02)
        if results:
            return text(f"Done: the tools said their piece about **{said}**.")
        return text(f"You said: {said}", delay=delay)

    return Agent(name=name, model=ScriptedProvider(script), tools=[lookup, slow, remove])


class NoRewindSession:
    """A Session without ``rewind`` (delegates the four protocol methods)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def segments(self, session_id: str) -> Any:
        return await self._inner.segments(session_id)

    async def load(self, session_id: str) -> Any:
        return await self._inner.load(session_id)

    async def append(self, session_id: str, entries: Any, *, run_id: str | None = None, meta: Any = None) -> str:
        return str(await self._inner.append(session_id, entries, run_id=run_id, meta=meta))

    async def clear(self, session_id: str) -> None:
        await self._inner.clear(session_id)
