"""Workspace behaviours of lovia 0.9.119 (behaviours-0.9.119.md, "Workspace"), one test each."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from lovia import Agent, Runner
from lovia.exceptions import UserError
from lovia.parts import ImagePart, TextPart
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import (
    CommandResult,
    LocalWorkspaceSession,
    PathRule,
    Workspace,
    WorkspaceClosedError,
    WorkspaceError,
    WorkspaceLimits,
    WorkspacePolicy,
)
from lovia.workspace.tools import _render_file


@pytest.fixture
async def ws(tmp_path: Path):
    session = LocalWorkspaceSession(root=tmp_path, limits=WorkspaceLimits(max_file_read_bytes=64))
    yield session
    await session.close()


# ---------------------------------------------------------------------- read_text


async def test_read_text_says_truncated_when_lines_remain_after_the_range(ws, tmp_path: Path) -> None:
    (tmp_path / "three.txt").write_text("one\ntwo\nthree\n")
    head = await ws.read_text("three.txt", start=1, end=2)
    assert head.content == "one\ntwo\n" and head.truncated and head.total_lines == 3
    assert "continue with start=3" in _render_file(head, None)
    tail = await ws.read_text("three.txt", start=2)
    assert tail.content == "two\nthree\n" and not tail.truncated


async def test_read_text_of_a_file_over_the_byte_limit_returns_its_leading_portion(ws, tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i:03d}\n" for i in range(100)))  # 900 bytes
    page = await ws.read_text("big.txt")
    assert page.truncated and page.content.startswith("line 000\n") and page.content.endswith("\n")
    assert len(page.content.encode()) <= 64
    assert page.note is not None and "leading portion" in page.note
    assert "leading portion" in _render_file(page, None)


async def test_read_text_past_the_end_is_empty_with_the_line_count(ws, tmp_path: Path) -> None:
    (tmp_path / "short.txt").write_text("a\nb\n")
    past = await ws.read_text("short.txt", start=50)
    assert past.content == "" and past.total_lines == 2


async def test_read_text_turns_a_few_bad_bytes_into_replacement_characters(ws, tmp_path: Path) -> None:
    (tmp_path / "mixed.txt").write_bytes(b"caf\xe9 au lait\nfine line\n")
    assert (await ws.read_text("mixed.txt")).content == "caf\ufffd au lait\nfine line\n"
    (tmp_path / "noise.txt").write_bytes(bytes(range(0x80, 0xC0)))
    with pytest.raises(WorkspaceError, match="mostly not UTF-8") as info:
        await ws.read_text("noise.txt")
    assert info.value.hint


# ---------------------------------------------------------------------- edit_text


async def test_edit_text_reports_instead_of_raising(ws, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\n")
    empty = await ws.edit_text("a.txt", "", "y")
    assert not empty.ok and empty.message
    twice = await ws.edit_text("a.txt", "x = 1", "x = 2")
    assert not twice.ok and twice.replacements == 2
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9\n")
    bad = await ws.edit_text("latin.txt", "caf", "tea")
    assert not bad.ok and bad.message and latin.read_bytes() == b"caf\xe9\n"
    assert (tmp_path / "a.txt").read_text() == "x = 1\nx = 1\n"


# ---------------------------------------------------------------------- listing and search


async def test_list_files_puts_directories_first_and_globs_come_sorted(ws, tmp_path: Path) -> None:
    for name in ("b.txt", "A.txt", "zdir/c.txt", "adir/z.txt", "adir/a.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n")
    assert [e.path for e in await ws.list_files(".")] == ["adir", "zdir", "A.txt", "b.txt"]
    found = [e.path for e in await ws.list_files(".", pattern="**/*.txt")]
    assert found == sorted(found) == ["A.txt", "adir/a.txt", "adir/z.txt", "b.txt", "zdir/c.txt"]


async def test_grep_clips_each_line_to_the_limit_marker_included(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("needle " + "x" * 500 + "\n")
    ws = LocalWorkspaceSession(root=tmp_path, limits=WorkspaceLimits(max_grep_line_chars=60))
    [hit] = await ws.grep("needle")
    assert len(hit.text) == 60 and hit.text.startswith("needle") and hit.text.endswith("truncated]")


# ---------------------------------------------------------------------- sessions and processes


async def test_a_nonexistent_root_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        LocalWorkspaceSession(root=tmp_path / "missing")
    assert info.value.hint


async def test_the_session_is_an_async_context_manager_and_ids_start_with_bg(tmp_path: Path) -> None:
    async with LocalWorkspaceSession(root=tmp_path) as ws:
        start = await ws.spawn("sleep 30")
        assert start.process_id.startswith("bg-")
    assert ws.closed
    assert [p.status for p in ws.background_processes()] == []


def test_writable_grants_come_before_readable_ones(tmp_path: Path) -> None:
    local = Workspace.local(str(tmp_path), readable=("docs/**",), writable=("src/**",))
    rules = local.policy.path_rules
    assert rules[:2] == (
        PathRule("src/**", "allow", frozenset({"read", "write"})),
        PathRule("docs/**", "allow", frozenset({"read"})),
    )


async def test_venv_activation_drops_an_inherited_pythonhome(tmp_path: Path, monkeypatch) -> None:
    bindir = tmp_path / ".venv" / "bin"
    bindir.mkdir(parents=True)
    os.symlink("/bin/true", bindir / "python")
    monkeypatch.setenv("PYTHONHOME", "/nowhere")
    async with LocalWorkspaceSession(root=tmp_path, inherit_env=True) as ws:
        out = await ws.run("echo home=${PYTHONHOME-unset}")
    assert out.stdout.strip() == "home=unset"


# ---------------------------------------------------------------------- close versus running commands


def _running(marker: str) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(marker.encode()):
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        out.append(pid)
            except OSError:
                continue
    return out


async def _settled(marker: str) -> list[str]:
    for _ in range(60):
        if not _running(marker):
            return []
        await asyncio.sleep(0.05)
    return _running(marker)


async def test_close_kills_an_in_flight_foreground_command(tmp_path: Path) -> None:
    marker = f"lovia-inflight-{uuid.uuid4().hex[:8]}"
    ws = LocalWorkspaceSession(root=tmp_path, shell_timeout=120)
    task = asyncio.ensure_future(ws.run(f"bash -c 'exec -a {marker} sleep 300'"))
    for _ in range(200):
        if _running(marker):
            break
        await asyncio.sleep(0.05)
    assert _running(marker)
    await ws.close()
    result = await asyncio.wait_for(task, 10)
    assert not result.ok and result.exit_code is None and "closed" in result.stderr
    assert await _settled(marker) == []


@pytest.mark.parametrize("how", ["run", "spawn"])
async def test_a_command_racing_close_is_refused_and_reaped(tmp_path: Path, how: str) -> None:
    marker = f"lovia-race-{uuid.uuid4().hex[:8]}"
    ws = LocalWorkspaceSession(root=tmp_path, shell_timeout=120)
    command = f"exec bash -c 'exec -a {marker} sleep 300'"
    task = asyncio.ensure_future(ws.run(command) if how == "run" else ws.spawn(command))
    await asyncio.sleep(0)  # the shell is being started
    await ws.close()
    with pytest.raises(WorkspaceClosedError) as info:
        await asyncio.wait_for(task, 10)
    assert info.value.hint
    assert await _settled(marker) == []


# ---------------------------------------------------------------------- view_image

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class _TextOnly(ScriptedProvider):
    @property
    def supports_vision(self) -> bool:
        return False


async def test_view_image_is_offered_to_vision_models_in_order_and_shows_the_image(tmp_path: Path) -> None:
    (tmp_path / "dot.png").write_bytes(PNG)
    model = ScriptedProvider([call("view_image", {"path": "dot.png"}, call_id="v"), text("a dot")])
    agent = Agent(name="a", model=model, workspace=Workspace.local(str(tmp_path), mode="readonly"))
    result = await Runner.run(agent, "look")
    names = [t.name for t in model.requests[0].tools if t.name != "recall_tool_result"]
    assert names == ["read_file", "view_image", "list_files", "grep_files"]
    [entry] = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert entry.output == f"dot.png\n[image: image/png, {len(PNG)} B]"
    assert [type(p) for p in entry.parts or []] == [TextPart, ImagePart]

    blind = _TextOnly([text("ok")])
    await Runner.run(Agent(name="b", model=blind, workspace=Workspace.local(str(tmp_path))), "hi")
    assert "view_image" not in {t.name for t in blind.requests[0].tools}


# ---------------------------------------------------------------------- bad arguments, executors, concurrency


async def test_grep_on_a_missing_path_and_an_invalid_glob_raise(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    ws = LocalWorkspaceSession(root=tmp_path)
    with pytest.raises(WorkspaceError, match="does not exist") as missing:
        await ws.grep("x", path="nope")
    with pytest.raises(WorkspaceError, match="invalid glob") as glob:
        await ws.list_files(".", pattern=".")
    with pytest.raises(WorkspaceError, match="invalid glob"):
        await ws.grep("x", glob="../*.txt")
    assert missing.value.hint and glob.value.hint
    assert [e.path for e in await ws.list_files(".", pattern="*.txt")] == ["a.txt"]


class _Chatty:
    """A real executor that answers with far more output than the cap."""

    async def run(self, command: str, **_: object) -> CommandResult:
        return CommandResult(exit_code=0, stdout="o" * 5000 + "END", stderr="e" * 10)


async def test_a_custom_executor_is_clipped_to_the_output_cap(tmp_path: Path) -> None:
    ws = LocalWorkspaceSession(
        root=tmp_path,
        executor=_Chatty(),
        policy=WorkspacePolicy.trusted(),
        limits=WorkspaceLimits(max_shell_output_chars=200),
    )
    result = await ws.run("make")
    assert result.truncated and len(result.stdout) < 400 and result.stdout.endswith("END")
    assert result.stderr == "e" * 10


async def test_concurrent_edits_reads_and_writes_of_one_file_take_turns(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"a{i}\n" for i in range(20)))
    ws = LocalWorkspaceSession(root=tmp_path)
    edits = [ws.edit_text("f.txt", f"a{i}\n", f"b{i}\n") for i in range(20)]
    reads = [ws.read_text("f.txt") for _ in range(20)]
    outcomes = await asyncio.gather(*edits, *reads, return_exceptions=True)
    assert [o for o in outcomes if isinstance(o, BaseException)] == []
    assert all(o.ok for o in outcomes[:20])  # type: ignore[union-attr]
    assert (tmp_path / "f.txt").read_text() == "".join(f"b{i}\n" for i in range(20))
    for content in outcomes[20:]:
        assert len(content.content.splitlines()) == 20  # type: ignore[union-attr]
    writes = [ws.write_text("g.txt", f"version {i}\n" * 100) for i in range(10)]
    more = [ws.read_text("g.txt") for _ in range(10)]
    await ws.write_text("g.txt", "start\n")
    done = await asyncio.gather(*writes, *more, return_exceptions=True)
    assert [o for o in done if isinstance(o, BaseException)] == []
    for page in done[10:]:
        assert len(set(page.content.splitlines())) == 1  # type: ignore[union-attr]
