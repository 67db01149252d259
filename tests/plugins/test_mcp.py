"""MCP against real servers written with the official SDK (tests/plugins/mcp_server.py).

Servers run as child processes over stdio and streamable HTTP. Unhappy paths first: a server that
dies mid-call, hangs, writes bad JSON, answers with a malformed result, or lists a broken schema.
Every test checks by PID that no server process outlives it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from lovia import Agent, MCPError, Runner, UserError, events  # noqa: E402
from lovia.plugins.mcp import (  # noqa: E402
    MCP,
    MCPConnection,
    MCPServer,
    MCPServerStdio,
    MCPServerStreamableHTTP,
    MCPToolResult,
    normalize_schema,
    render_mcp_content,
)
from lovia.testing import ScriptedProvider, batch, call, text  # noqa: E402
from lovia.transcript import ToolResultEntry  # noqa: E402

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "mcp_server.py")
CORRUPT = str(HERE / "mcp_corrupt.py")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def pids(log: Path) -> list[int]:
    if not log.exists():
        return []
    return [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("pid ")]


def wait_gone(pid_list: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pid_list if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pid_list if alive(p)]


@pytest.fixture
def log(tmp_path: Path):
    path = tmp_path / "server.log"
    yield path
    assert wait_gone(pids(path)) == [], "an MCP server process outlived the test"


def stdio(log: Path, *, script: str = SERVER, mode: str | None = None, **options) -> MCPServerStdio:
    env = dict(os.environ, MCP_TEST_LOG=str(log))
    if mode:
        env["MCP_TEST_MODE"] = mode
    args = [script] if script == CORRUPT else [script, "stdio"]
    return MCPServerStdio(command=sys.executable, args=args, env=env, **options)


def log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def wait_for_line(log: Path, wanted: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while wanted not in log_lines(log):
        assert time.monotonic() < deadline, f"{wanted!r} never logged: {log_lines(log)}"
        await asyncio.sleep(0.05)


# ----------------------------------------------------------------------------- unhappy paths


async def test_a_server_that_dies_mid_call_is_reconnected_and_the_call_retried_once(log: Path) -> None:
    async with await stdio(log, name="t").open() as conn:
        first = pids(log)
        with pytest.raises(MCPError) as err:
            await conn.call_tool("crash", {}, exposed_name="t__crash")
        assert err.value.tool_name == "t__crash"
        assert "again after reconnecting" in str(err.value) and err.value.hint
        assert log_lines(log).count("crash") == 2  # at-least-once: retried once on a fresh server
        result = await conn.call_tool("echo", {"text": "still here"})
        assert render_mcp_content(result.content) == "echo: still here"
        assert len(pids(log)) == 3 and not any(alive(p) for p in first)


async def test_without_auto_reconnect_a_dead_server_is_an_error_and_nothing_is_retried(log: Path) -> None:
    async with await stdio(log, auto_reconnect=False).open() as conn:
        with pytest.raises(MCPError, match="went away") as err:
            await conn.call_tool("crash", {})
        assert err.value.hint and "stderr" in err.value.hint
        assert log_lines(log).count("crash") == 1


async def test_a_hanging_server_times_out_and_the_cancellation_reaches_it(log: Path) -> None:
    async with await stdio(log, timeout=0.5).open() as conn:
        started = time.monotonic()
        with pytest.raises(MCPError, match="no answer") as err:
            await conn.call_tool("hang", {})
        assert time.monotonic() - started < 5
        assert "timeout=" in (err.value.hint or "")
        await wait_for_line(log, "hang cancelled")
        assert render_mcp_content((await conn.call_tool("echo", {"text": "ok"})).content) == "echo: ok"


async def test_cancelling_the_caller_cancels_the_call_on_the_server(log: Path) -> None:
    async with await stdio(log).open() as conn:
        task = asyncio.ensure_future(conn.call_tool("hang", {}))
        await wait_for_line(log, "hang start")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_for_line(log, "hang cancelled")


async def test_a_line_that_is_not_json_fails_the_call_with_a_hint(log: Path) -> None:
    async with await stdio(log, script=CORRUPT, timeout=20).open() as conn:
        started = time.monotonic()
        with pytest.raises(MCPError, match="not JSON-RPC") as err:
            await conn.call_tool("garbage", {})
        assert time.monotonic() - started < 10  # failed fast, not by the timeout
        assert "stdout" in (err.value.hint or "")


async def test_a_malformed_result_is_an_mcp_error_and_the_connection_survives(log: Path) -> None:
    async with await stdio(log, script=CORRUPT).open() as conn:
        with pytest.raises(MCPError, match="malformed answer") as err:
            await conn.call_tool("malformed", {})
        assert err.value.hint
        assert render_mcp_content((await conn.call_tool("echo", {"text": "x"})).content) == "echo: x"


async def test_a_tool_with_an_invalid_schema_fails_the_listing_naming_the_tool(log: Path) -> None:
    with pytest.raises(MCPError, match="'add'") as err:
        await stdio(log, mode="badschema", name="t").open()
    assert err.value.tool_name == "t__add" and "exclude_tools" in (err.value.hint or "")
    async with await stdio(log, mode="badschema", exclude_tools=["add"]).open() as conn:
        assert "add" not in [t.name for t in conn.tools()] and "echo" in [t.name for t in conn.tools()]


async def test_a_command_that_is_not_a_server_is_an_mcp_error(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet.py"
    quiet.write_text("import sys, time\nsys.stdin.read()\n")
    conn = MCPServerStdio(command=sys.executable, args=[str(quiet)]).connection()
    conn.open_timeout = 1.0
    with pytest.raises(MCPError, match="no handshake") as err:
        await conn.open()
    assert err.value.hint
    with pytest.raises(MCPError, match="could not connect"):
        await MCPServerStdio(command=str(tmp_path / "does-not-exist")).open()


async def test_a_tool_error_is_rendered_for_the_model_not_raised(log: Path) -> None:
    provider = ScriptedProvider([call("fail", {"reason": "nope"}), text("ok")])
    agent = Agent(name="a", model=provider, plugins=[MCP(stdio(log))])
    result = await Runner.run(agent, "go")
    [entry] = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert entry.output.startswith("[tool error]")


def test_schemas_are_repaired_or_refused() -> None:
    assert normalize_schema(None) == {"type": "object", "properties": {}}
    assert normalize_schema({"properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
    }
    for broken in (
        [],
        {"type": "string"},
        {"properties": []},
        {"required": "a"},
        {"properties": {"a": 3}},
        {"properties": {"a": {"type": "nonsense"}}},
    ):
        with pytest.raises(MCPError) as err:
            normalize_schema(broken)
        assert err.value.hint


def test_content_rendering_never_inlines_base64() -> None:
    rendered = render_mcp_content(
        [
            {"type": "text", "text": "a chart"},
            {"type": "image", "data": base64.b64encode(bytes(600)).decode(), "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///x"},
            {"type": "resource", "resource": {"uri": "file:///y", "text": "inline"}},
            {"type": "audio", "data": "YWJjZA==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///z", "blob": "YWJjZGU=", "mimeType": "image/gif"}},
        ]
    )
    assert rendered == (
        "a chart\n[image: image/png, 600 B]\n[resource link: file:///x]\ninline\n"
        "[audio: audio/wav, 4 B]\n[resource: file:///z, image/gif, 5 B]"
    )
    assert render_mcp_content([{"type": "text", "text": "x"}], is_error=True) == "[tool error] x"


def test_str_of_a_result_is_what_the_model_reads() -> None:
    chart = MCPToolResult(
        content=[{"type": "text", "text": "a chart"}, {"type": "image", "data": "YWJj", "mimeType": "image/png"}]
    )
    assert str(chart) == "a chart\n[image: image/png, 3 B]"
    failed = MCPToolResult(content=[{"type": "text", "text": "disk full"}], is_error=True)
    assert str(failed) == "[tool error] disk full"
    assert str(MCPToolResult(structured={"n": 1})) == '{"n": 1}'


async def test_a_real_servers_image_renders_with_its_type_and_byte_count(log: Path) -> None:
    async with await stdio(log).open() as conn:
        result = await conn.call_tool("picture", {})
    assert str(result) == "a chart\n[image: image/png, 5 B]\n[resource link: file:///tmp/chart.png]"


def test_a_missing_sdk_is_a_user_error_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import asyncio\n"
        "from lovia.plugins.mcp import MCPServerStdio\n"
        "from lovia import UserError\n"
        "try:\n"
        "    asyncio.run(MCPServerStdio(command='x').open())\n"
        "except UserError as e:\n"
        "    print(e.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'lovia[mcp]'" in out.stdout, out.stderr


def test_the_shared_options_base_alone_is_a_user_error_naming_the_transports() -> None:
    with pytest.raises(UserError) as err:
        MCPServer(name="docs").connection()
    assert "MCPServerStdio" in err.value.hint and "MCPServerStreamableHTTP" in err.value.hint


# ----------------------------------------------------------------------------- listing and calls


async def test_tools_are_prefixed_filtered_and_marked_idempotent_from_annotations(log: Path) -> None:
    async with await stdio(log, name="srv", include_tools=["echo", "add", "create_ticket", "hang"]).open() as conn:
        tools = {t.name: t for t in conn.tools()}
        assert sorted(tools) == ["srv__add", "srv__create_ticket", "srv__echo", "srv__hang"]
        assert tools["srv__echo"].idempotent and tools["srv__add"].idempotent  # readOnly / idempotent hints
        assert not tools["srv__create_ticket"].idempotent
        assert tools["srv__add"].parameters["required"] == ["a", "b"]
    async with await stdio(log, exclude_tools=["crash", "hang"]).open() as conn:
        names = [t.name for t in conn.tools()]
        assert "crash" not in names and "hang" not in names and "echo" in names


async def test_a_run_calls_mcp_tools_and_the_connection_closes_at_run_end(log: Path) -> None:
    provider = ScriptedProvider([batch(("w__echo", {"text": "hi"}), ("w__picture", {})), text("done")])
    agent = Agent(name="a", model=provider, plugins=[MCP(stdio(log, name="w"))])
    seen: list[str] = []
    handle = Runner.stream(agent, "go")
    async for ev in handle:
        if isinstance(ev, events.ToolCallCompleted):
            seen.append(ev.call.name)
    result = await handle.result()
    outputs = sorted(e.output for e in result.entries if isinstance(e, ToolResultEntry))
    assert (
        outputs[0].startswith("a chart\n[image: image/png") and "[resource link: file:///tmp/chart.png]" in outputs[0]
    )
    assert outputs[1] == "echo: hi"
    assert sorted(seen) == ["w__echo", "w__picture"]
    assert isinstance(result.entries[-2], ToolResultEntry) or result.output == "done"
    assert wait_gone(pids(log)) == []  # closed when the run ended


async def test_approval_gates_every_tool_of_a_server(log: Path) -> None:
    asked: list[str] = []

    def handler(call_, ctx) -> bool:
        asked.append(call_.name)
        return call_.name == "echo"

    provider = ScriptedProvider([batch(("echo", {"text": "a"}), ("create_ticket", {"title": "t"})), text("ok")])
    agent = Agent(name="a", model=provider, approval_handler=handler, plugins=[MCP(stdio(log, needs_approval=True))])
    result = await Runner.run(agent, "go")
    assert sorted(asked) == ["create_ticket", "echo"]
    outputs = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert [o.output for o in outputs if not o.is_error] == ["echo: a"]
    assert "ticket t" not in log_lines(log)  # the denied call never reached the server


async def test_approval_can_name_single_tools(log: Path) -> None:
    async with await stdio(log, needs_approval={"create_ticket"}).open() as conn:
        gates = {t.name: t.needs_approval for t in conn.tools()}
        assert gates["create_ticket"] is True and gates["echo"] is False


async def test_twenty_concurrent_calls_over_stdio(log: Path) -> None:
    async with await stdio(log).open() as conn:
        results = await asyncio.gather(*(conn.call_tool("slow_echo", {"text": str(i)}) for i in range(20)))
        assert [render_mcp_content(r.content) for r in results] == [f"slow: {i}" for i in range(20)]


async def test_a_persistent_connection_serves_sequential_runs_and_is_not_closed_by_them(log: Path) -> None:
    async with stdio(log).session() as conn:
        assert isinstance(conn, MCPConnection) and not conn.close_after_run
        for n in range(2):
            provider = ScriptedProvider([call("add", {"a": n, "b": 1}), text("ok")])
            agent = Agent(name="a", model=provider, plugins=[MCP(conn)])
            result = await Runner.run(agent, "go")
            assert [e.output for e in result.entries if isinstance(e, ToolResultEntry)] == [str(n + 1)]
        assert conn.is_open and len(pids(log)) == 1
    assert not conn.is_open


async def test_a_config_kept_open_is_reused_by_the_plugin_until_closed(log: Path) -> None:
    plugin = MCP(stdio(log, close_after_run=False))
    for n in range(2):
        provider = ScriptedProvider([call("add", {"a": n, "b": 2}), text("ok")])
        await Runner.run(Agent(name="a", model=provider, plugins=[plugin]), "go")
    assert len(pids(log)) == 1 and alive(pids(log)[0])
    await plugin.close()
    assert wait_gone(pids(log)) == []


async def test_a_custom_renderer_receives_the_raw_result(log: Path) -> None:
    def shout(raw, ctx) -> str:
        assert isinstance(raw, MCPToolResult)
        return render_mcp_content(raw.content).upper()

    provider = ScriptedProvider([call("echo", {"text": "quiet"}), text("ok")])
    agent = Agent(name="a", model=provider, plugins=[MCP(stdio(log, result_renderer=shout, max_output_chars=200))])
    result = await Runner.run(agent, "go")
    assert [e.output for e in result.entries if isinstance(e, ToolResultEntry)] == ["ECHO: QUIET"]


# ----------------------------------------------------------------------------- deferred servers


async def test_deferred_tools_stay_out_of_the_list_and_are_reached_through_the_pair(log: Path) -> None:
    asked: list[dict] = []

    def handler(call_, ctx) -> bool:
        asked.append(json.loads(call_.arguments))
        return True

    provider = ScriptedProvider(
        [
            call("search_mcp_tools", {"query": "integers"}),
            call("call_mcp_tool", {"name": "big__add", "arguments": {"a": 2, "b": 40}}),
            call("call_mcp_tool", {"name": "big__nope", "arguments": {}}),
            text("42"),
        ]
    )
    server = stdio(log, name="big", defer=True, needs_approval=lambda args, ctx: args.get("a") == 2)
    agent = Agent(name="a", model=provider, approval_handler=handler, plugins=[MCP(server)])
    result = await Runner.run(agent, "go")
    offered = {t.name for t in provider.requests[0].tools} - {"recall_tool_result"}
    assert offered == {"search_mcp_tools", "call_mcp_tool"}
    system = provider.requests[0].entries[0].content
    assert "big__add" in system and "big__echo" in system
    search, added, missing = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    found = json.loads(search.output)
    assert found[0]["name"] == "big__add" and found[0]["parameters"]["required"] == ["a", "b"]
    assert added.output == "42" and not added.is_error
    assert asked == [{"name": "big__add", "arguments": {"a": 2, "b": 40}}]  # the server's predicate applied
    assert missing.is_error and "search_mcp_tools" in missing.output


async def test_a_deferred_name_clash_is_a_user_error_at_setup(log: Path) -> None:
    provider = ScriptedProvider([text("never")])
    agent = Agent(name="a", model=provider, plugins=[MCP(stdio(log), stdio(log, defer=True))])
    with pytest.raises(UserError, match="used twice"):
        await Runner.run(agent, "go")


# ----------------------------------------------------------------------------- streamable HTTP


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path):
    port = free_port()
    log = tmp_path / "http.log"
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        env=dict(os.environ, MCP_TEST_LOG=str(log)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "HTTP MCP server did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp", log, proc
    proc.kill()
    proc.wait()


async def test_streamable_http_lists_calls_and_handles_twenty_concurrent_calls(http_server) -> None:
    url, log, _ = http_server
    server = MCPServerStreamableHTTP(url=url, name="web", headers={"User-Agent": "lovia-test"}, timeout=1.0)
    async with await server.open() as conn:
        assert "web__echo" in [t.name for t in conn.tools()]
        results = await asyncio.gather(*(conn.call_tool("slow_echo", {"text": str(i)}) for i in range(20)))
        assert [render_mcp_content(r.content) for r in results] == [f"slow: {i}" for i in range(20)]
        with pytest.raises(MCPError, match="no answer"):
            await conn.call_tool("hang", {})
        await wait_for_line(log, "hang cancelled")


async def test_streamable_http_reconnects_after_the_server_restarts(http_server) -> None:
    url, log, proc = http_server
    port = int(url.split(":")[2].split("/")[0])
    async with await MCPServerStreamableHTTP(url=url, timeout=5.0).open() as conn:
        assert render_mcp_content((await conn.call_tool("echo", {"text": "1"})).content) == "echo: 1"
        proc.kill()
        proc.wait()
        with subprocess.Popen(
            [sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ) as again:
            try:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                        break
                    except OSError:
                        assert time.monotonic() < deadline
                        time.sleep(0.1)
                result = await conn.call_tool("echo", {"text": "2"})  # the new server forgot our session
                assert render_mcp_content(result.content) == "echo: 2"
            finally:
                again.kill()
        with pytest.raises(MCPError, match="could not connect: Connect") as err:
            await conn.call_tool("echo", {"text": "3"})
        assert err.value.hint


async def test_streamable_http_server_that_is_down_is_an_mcp_error() -> None:
    server = MCPServerStreamableHTTP(url=f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(MCPError) as err:
        await server.open()
    assert err.value.hint


# ----------------------------------------------------------------------------- orphans


PARENT = """
import asyncio, os, sys
from lovia.plugins.mcp import MCPServerStdio
async def main():
    conn = await MCPServerStdio(command=sys.executable, args=[sys.argv[1], "stdio"]).open()
    print("ready", flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


def test_a_sigkilled_parent_leaves_no_server_behind(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, SERVER],
        env=dict(os.environ, MCP_TEST_LOG=str(log)),
        stdout=subprocess.PIPE,
        text=True,
    ) as parent:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        [child] = pids(log)
        assert alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    assert wait_gone([child]) == [], "the MCP server survived its parent's SIGKILL"


# ----------------------------------------------------------------------------- crash resume


async def test_a_crash_mid_call_never_repeats_a_non_idempotent_mcp_tool(tmp_path: Path) -> None:
    from lovia.stores import SQLiteCheckpointer, SQLiteSession
    from lovia.testing.crash import Boundary, crash_test

    async def open_sqlite(path: str):
        return SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)

    crash_db = str(tmp_path / "crash.db")
    report = await crash_test(
        "tests.plugins.mcp_scenarios:mcp_scenario",
        store=crash_db,
        reference_store=str(tmp_path / "reference.db"),
        run_id="desk-1",
        boundary=Boundary.IN_TOOL,
        tool="mcp",
        workdir=tmp_path,
        open_stores=open_sqlite,
    )
    assert report.crashed.killed, report.crashed.stderr
    assert report.ok, report.problems
    server_log = Path(crash_db + ".server.log")
    assert log_lines(server_log).count("ticket printer") == 1  # started once, never re-run on resume
    stored = await SQLiteSession(crash_db).load("crash-session")
    results = {e.call_id: e for e in stored if isinstance(e, ToolResultEntry)}
    assert results["c-echo"].output == "echo: hello"  # read-only: safe to run again
    assert results["c-ticket"].is_error and "not idempotent" in results["c-ticket"].output
    assert wait_gone(pids(server_log)) == []  # the killed client's server exited too
