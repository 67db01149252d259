"""What streaming a chat costs the lovia web server, against the floor of a bare relay.

Three processes on loopback, all started here:

* a fake OpenAI-compatible model (``--serve-model``): each ``/v1/chat/completions`` request whose
  last user message reads ``tokens=N pace=MS`` gets N streamed tokens, one chunk every MS
  milliseconds (``pace=0``: the whole answer in one write). The first token carries the
  monotonic clock of the moment it was written, so a client can tell how long the server held it;
* the floor, ``bench/relay_floor.py``: Starlette + httpx, relays the tokens as SSE frames;
* the lovia web server (``--serve-lovia``): ``create_app`` on one ``OpenAIChatProvider`` pointed
  at the fake model and a SQLite store, served by ``lovia.web.serve`` (uvicorn) as ``lovia web``
  does, with the run cap raised so 200 chats can stream at once (``lovia web`` keeps 8).

A load client (httpx, one event loop) opens N chats at once and reads every frame. Each server's
CPU time comes from ``/proc/<pid>/task/*/schedstat`` before and after each step, so the figures
are the server's own work (the client and the model are other processes). Reported, lovia / floor:

* per token: the extra CPU of a long answer over a short one, divided by the extra tokens, with
  1, 50 and 200 chats streaming at once;
* per chat: the CPU of chats with short answers, divided by the chats;
* time to first frame: a request until its first ``text_delta`` frame, and the time from the
  model writing its first token until the client reads it, for answers of 10, 200, 2,000 and
  8,000 tokens sent all at once (one chat at a time).

    .venv/bin/python bench/web_load.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONCURRENCY = (1, 50, 200)
BURSTS = (10, 200, 2_000, 8_000)
ASK = re.compile(r"tokens=(\d+) pace=([\d.]+)")


# --------------------------------------------------------------------------- the fake model


def _sse_chunk(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _choice(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return _sse_chunk({"object": "chat.completion.chunk", "choices": [choice]})


def _delta(text: str) -> bytes:
    return _choice({"content": text})


_TAIL = (
    _sse_chunk({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    + _sse_chunk(
        {"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    )
    + b"data: [DONE]\n\n"
)


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _last_user_text(body: bytes) -> str:
    messages = json.loads(body).get("messages") or []
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


async def _answer(writer: asyncio.StreamWriter, body: bytes) -> None:
    asked = ASK.match(_last_user_text(body))
    tokens, pace = (int(asked.group(1)), float(asked.group(2)) / 1e3) if asked else (3, 0.0)
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + _chunked(
            _sse_chunk({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        )
    )
    rest = [_delta(f" t{i}") for i in range(1, tokens)]
    if pace <= 0:
        first = _delta(f"@{time.monotonic_ns()}|")
        writer.write(_chunked(first + b"".join(rest) + _TAIL) + b"0\r\n\r\n")
        return
    writer.write(_chunked(_delta(f"@{time.monotonic_ns()}|")))
    for piece in rest:
        await asyncio.sleep(pace)
        writer.write(_chunked(piece))
    writer.write(_chunked(_TAIL) + b"0\r\n\r\n")


async def _model_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method = head[0].split(" ", 1)[0]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method != "POST":
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            else:
                await _answer(writer, body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve_model(port: int) -> None:
    server = await asyncio.start_server(_model_connection, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def serve_lovia(port: int, db: str, model_url: str) -> None:
    from lovia import Agent
    from lovia.providers import OpenAIChatProvider
    from lovia.web import create_app, serve

    # One provider for every run, as `lovia web` builds it (its HTTP client keeps connections open).
    model = OpenAIChatProvider("bench-model", base_url=model_url, api_key="sk-bench")
    agent: Agent[Any] = Agent(name="assistant", instructions="Answer.", model=model)
    app = create_app(agent, db_path=db, max_background_runs=10_000)
    serve(app, port=port, log_level="warning")


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """CPU time process ``pid`` has used so far: the sum over its live threads of the scheduler's
    nanosecond count (``/proc/<pid>/task/*/schedstat``); ``/proc/<pid>/stat`` counts in 10 ms ticks."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                total += int(fh.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:.0f} s")


@dataclass
class Servers:
    model: subprocess.Popen[bytes]
    floor: subprocess.Popen[bytes]
    lovia: subprocess.Popen[bytes]
    floor_url: str
    lovia_url: str


@contextmanager
def servers(python: str = sys.executable, lovia_from: str = ROOT) -> Iterator[Servers]:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    lovia_env = {**env, "PYTHONPATH": lovia_from + os.pathsep + env["PYTHONPATH"]}
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            ports = [free_port() for _ in range(3)]
            model_url = f"http://127.0.0.1:{ports[0]}/v1"
            commands = [
                [python, __file__, "--serve-model", str(ports[0])],
                [python, os.path.join(HERE, "relay_floor.py"), "--port", str(ports[1]), "--model-url", model_url],
                [python, __file__, "--serve-lovia", str(ports[2]), os.path.join(tmp, "web.db"), model_url],
            ]
            for cmd, port, cmd_env in zip(commands, ports, (env, env, lovia_env), strict=True):
                procs.append(subprocess.Popen(cmd, env=cmd_env, cwd=tmp, stdout=subprocess.DEVNULL))
                _wait_listening(port, procs[-1])
            yield Servers(*procs, f"http://127.0.0.1:{ports[1]}", f"http://127.0.0.1:{ports[2]}")
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()


# --------------------------------------------------------------------------- the load client


@dataclass
class ChatFigures:
    deltas: int = 0
    first_frame: float = 0.0
    """Seconds from the request until the first ``text_delta`` frame was read."""
    held: float = 0.0
    """Seconds from the model writing its first token until its frame was read."""


async def one_chat(client: Any, url: str, lovia: bool, message: str) -> ChatFigures:
    path, body = ("/api/chat/stream", {"message": message}) if lovia else ("/chat", {"message": message})
    out = ChatFigures()
    began = time.perf_counter()
    event = ""
    async with client.stream("POST", url + path, json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}{path} answered {response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "text_delta":
                if out.deltas == 0:
                    now_ns = time.monotonic_ns()
                    out.first_frame = time.perf_counter() - began
                    delta = json.loads(line[6:])["delta"]
                    out.held = (now_ns - int(delta[1 : delta.index("|")])) / 1e9
                out.deltas += 1
            elif line.startswith("data: ") and event in ("done", "error"):
                if event == "error":
                    raise RuntimeError(f"the chat failed: {line[6:300]}")
                break
    return out


async def load(url: str, lovia: bool, chats: int, at_once: int, tokens: int, pace_ms: float) -> list[ChatFigures]:
    import httpx

    limits = httpx.Limits(max_connections=at_once, max_keepalive_connections=at_once)
    message = f"tokens={tokens} pace={pace_ms:g}"
    async with httpx.AsyncClient(timeout=120.0, limits=limits) as client:
        gate = asyncio.Semaphore(at_once)

        async def gated() -> ChatFigures:
            async with gate:
                return await one_chat(client, url, lovia, message)

        figures = await asyncio.gather(*(gated() for _ in range(chats)))
    short = [f for f in figures if f.deltas != tokens]
    if short:
        raise RuntimeError(f"{len(short)} chats got {short[0].deltas} text_delta frames, not {tokens}")
    return list(figures)


def cpu_of(pid: int, url: str, lovia: bool, chats: int, at_once: int, tokens: int, pace_ms: float) -> float:
    before = cpu_seconds(pid)
    asyncio.run(load(url, lovia, chats, at_once, tokens, pace_ms))
    return cpu_seconds(pid) - before


# --------------------------------------------------------------------------- the workload


@dataclass
class Plan:
    reps: int = 3
    short: int = 10
    long: int = 300
    chats_alone: int = 20
    burst_chats: int = 5


QUICK = Plan(reps=1, long=200, chats_alone=10, burst_chats=3)


@dataclass
class Figures:
    per_token: dict[str, dict[int, list[float]]] = field(default_factory=lambda: {"lovia": {}, "floor": {}})
    per_chat: dict[str, dict[int, list[float]]] = field(default_factory=lambda: {"lovia": {}, "floor": {}})
    first_frame: dict[str, dict[int, list[float]]] = field(default_factory=lambda: {"lovia": {}, "floor": {}})
    held: dict[str, dict[int, list[float]]] = field(default_factory=lambda: {"lovia": {}, "floor": {}})
    load: list[str] = field(default_factory=list)


def pace_for(at_once: int) -> float:
    """Milliseconds between two tokens of one chat: about 1,000 to 10,000 tokens a second overall."""
    return max(1.0, at_once * 0.1)


def measure(plan: Plan, progress: Any = None, lovia_from: str = ROOT) -> Figures:
    say = progress or (lambda _msg: None)
    out = Figures()
    with servers(lovia_from=lovia_from) as srv:
        targets = (("floor", srv.floor.pid, srv.floor_url, False), ("lovia", srv.lovia.pid, srv.lovia_url, True))
        for _name, _pid, url, is_lovia in targets:  # warm-up: imports, first connections, first store writes
            asyncio.run(load(url, is_lovia, 4, 2, 50, 0))
        out.load.append(_loadavg())
        for rep in range(plan.reps):
            for at_once in CONCURRENCY:
                chats = max(at_once, plan.chats_alone) if at_once == 1 else at_once
                pace = pace_for(at_once)
                say(f"web: rep {rep + 1}/{plan.reps}, {at_once} at once, {chats} chats")
                for name, pid, url, is_lovia in targets:
                    short = cpu_of(pid, url, is_lovia, chats, at_once, plan.short, pace)
                    long = cpu_of(pid, url, is_lovia, chats, at_once, plan.long, pace)
                    out.per_chat[name].setdefault(at_once, []).append(short / chats)
                    extra = chats * (plan.long - plan.short)
                    out.per_token[name].setdefault(at_once, []).append(max(long - short, 0.0) / extra)
            for tokens in BURSTS:
                say(f"web: rep {rep + 1}/{plan.reps}, first frame of a {tokens}-token burst")
                for name, _pid, url, is_lovia in targets:
                    for _ in range(plan.burst_chats):
                        (fig,) = asyncio.run(load(url, is_lovia, 1, 1, tokens, 0))
                        out.first_frame[name].setdefault(tokens, []).append(fig.first_frame)
                        out.held[name].setdefault(tokens, []).append(fig.held)
        out.load.append(_loadavg())
    return out


def _loadavg() -> str:
    with open("/proc/loadavg", encoding="ascii") as fh:
        return " ".join(fh.read().split()[:3])


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def ratio(fig: dict[str, dict[int, list[float]]], key: int) -> float:
    return med(fig["lovia"][key]) / med(fig["floor"][key]) if med(fig["floor"][key]) > 0 else float("inf")


def targets(fig: Figures) -> list[tuple[str, float, float, str]]:
    """``(name, value, limit, detail)`` of each target: PASS when value <= limit."""
    out = []
    for n in CONCURRENCY:
        r = ratio(fig.per_token, n)
        detail = f"{med(fig.per_token['lovia'][n]) * 1e6:.1f} vs {med(fig.per_token['floor'][n]) * 1e6:.1f} µs"
        out.append((f"web: CPU per streamed token, {n} chats at once <= 1.2x the relay floor", r, 1.2, detail))
    for n in CONCURRENCY:
        r = ratio(fig.per_chat, n)
        detail = f"{med(fig.per_chat['lovia'][n]) * 1e3:.2f} vs {med(fig.per_chat['floor'][n]) * 1e3:.2f} ms"
        out.append((f"web: CPU per chat, {n} chats at once <= 2x the relay floor", r, 2.0, detail))
    for n in BURSTS:
        gap = med(fig.held["lovia"][n]) - med(fig.held["floor"][n])
        detail = f"{med(fig.held['lovia'][n]) * 1e3:.1f} vs {med(fig.held['floor'][n]) * 1e3:.1f} ms"
        out.append(
            (f"web: first token of a {n}-token burst on screen within 5 ms of the floor", gap * 1e3, 5.0, detail)
        )
    return out


def table(fig: Figures) -> list[str]:
    lines = [
        "| chats at once | CPU per token, lovia / floor (µs) | ratio | CPU per chat, lovia / floor (ms) | ratio |",
        "|---|---|---|---|---|",
    ]
    for n in CONCURRENCY:
        pt, pc = fig.per_token, fig.per_chat
        lines.append(
            f"| {n} | {med(pt['lovia'][n]) * 1e6:.1f} / {med(pt['floor'][n]) * 1e6:.1f} | {ratio(pt, n):.2f} "
            f"| {med(pc['lovia'][n]) * 1e3:.2f} / {med(pc['floor'][n]) * 1e3:.2f} | {ratio(pc, n):.2f} |"
        )
    lines += [
        "",
        "| burst (tokens) | first frame after the request, lovia / floor (ms) | first token held, lovia / floor (ms) |",
        "|---|---|---|",
    ]
    for n in BURSTS:
        ff, held = fig.first_frame, fig.held
        lines.append(
            f"| {n:,} | {med(ff['lovia'][n]) * 1e3:.1f} / {med(ff['floor'][n]) * 1e3:.1f} "
            f"| {med(held['lovia'][n]) * 1e3:.1f} / {med(held['floor'][n]) * 1e3:.1f} |"
        )
    lines += ["", f"Load average (1, 5, 15 min) before / after: {fig.load[0]} / {fig.load[-1]}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU per streamed token and per chat: lovia web against a bare relay.")
    parser.add_argument("--quick", action="store_true", help="one repetition, shorter answers")
    parser.add_argument("--reps", type=int, help="repetitions (default 3; medians are reported)")
    parser.add_argument(
        "--lovia-from",
        default=ROOT,
        metavar="DIR",
        help="serve the lovia package of this checkout (e.g. an older commit's, for a before/after)",
    )
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-lovia", nargs=3, metavar=("PORT", "DB", "MODEL_URL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_model:
        asyncio.run(serve_model(args.serve_model))
        return 0
    if args.serve_lovia:
        port, db, model_url = args.serve_lovia
        serve_lovia(int(port), db, model_url)
        return 0
    plan = QUICK if args.quick else Plan()
    if args.reps:
        plan.reps = args.reps
    fig = measure(plan, lambda msg: print(f"  .. {msg}", file=sys.stderr, flush=True), os.path.abspath(args.lovia_from))
    for line in table(fig):
        print(line)
    print()
    missed = 0
    for name, value, limit, detail in targets(fig):
        verdict = "PASS" if value <= limit else "MISS"
        missed += verdict == "MISS"
        print(f"- {verdict} {name}: {value:.2f} (limit {limit:g}; {detail})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
