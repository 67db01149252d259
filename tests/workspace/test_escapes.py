"""Adversarial suite: every attempt to get out of the root or at a denied file fails, with a clear error.

Each attempt also checks that nothing secret leaks through the result or the error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
from pathlib import Path

import pytest

from lovia.exceptions import ToolError
from lovia.workspace import PermissionDeniedError, WorkspaceError

from .conftest import DOTENV, SECRET

READS = [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "sub/./../../outside/secret.txt",
    "./../outside/secret.txt",
    "{outside}/secret.txt",
    "{root}/../outside/secret.txt",
    "//{outside_rel}/secret.txt",
    "/etc/passwd",
    "/etc/shadow",
    "/proc/self/environ",
    "~/.bashrc",
    "~",
    "link_out",
    "dir_out/secret.txt",
    "sub/../dir_out/secret.txt",
    "dir_out/../outside/secret.txt",
    "hard_out",
    ".env",
    "./.env",
    "sub/../.env",
    ".ENV",
    ".Env.LOCAL",
    ".env.local",
    "link_env",
    "{root}/.env",
    "secrets/key.pem",
    "SECRETS/key.pem",
    "sub/../secrets/key.pem",
    "rel_out",
    "chain/secret.txt",
    "sub/up/../outside/secret.txt",
    "sub/up/dir_out/secret.txt",
    "{outside}/../root/../outside/secret.txt",
]

BROKEN = [
    ("fifo", WorkspaceError),
    ("dev_zero", PermissionDeniedError),  # lands outside the root (/dev/zero)
    ("bin.dat", WorkspaceError),
    ("sub", WorkspaceError),
    ("", WorkspaceError),
    ("ok.txt\x00../../outside/secret.txt", WorkspaceError),
    ("%2e%2e/outside/secret.txt", WorkspaceError),
    ("\uff0e\uff0e/outside/secret.txt", WorkspaceError),
    ("loop_a", WorkspaceError),
    ("a" * 5000, WorkspaceError),
]

WRITES = [
    "../outside/new.txt",
    "{outside}/new.txt",
    "sub/../../outside/new.txt",
    "link_out",
    "dir_out/new.txt",
    "dir_out/nested/new.txt",
    ".env",
    ".ENV",
    "link_env",
    "secrets/new.pem",
    "/tmp/lovia-escape-{pid}.txt",
    "~/lovia-escape.txt",
]

COMMANDS = [
    "cat ../outside/secret.txt",
    "cat {outside}/secret.txt",
    "cat .env",
    "cat < .env",
    "cat link_out",
    "cat link_env",
    "cat dir_out/secret.txt",
    "echo pwned > ../outside/pwned.txt",
    "echo pwned >> {outside}/pwned.txt",
    "ls && cat secrets/key.pem",
    "true; cat .env.local",
    "grep -r API_KEY .env",
    "cp .env copy.txt",
    "cat \x00 .env",
    "cat $(echo) .env",
    "FOO=1 cat .env",
    "(cat .env)",
]


def _fill(text: str, tree: Path) -> str:
    outside = tree.parent / "outside"
    return text.format(root=tree, outside=outside, outside_rel=str(outside).lstrip("/"), pid=os.getpid())


def _no_leak(exc: BaseException) -> None:
    text = f"{exc} {getattr(exc, 'hint', '')}"
    assert SECRET not in text and "hunter2" not in text
    assert isinstance(exc, ToolError) and getattr(exc, "hint", None), "every refusal carries a hint"


@pytest.mark.parametrize("path", READS)
async def test_reads_out_of_bounds_are_denied(session, tree, path):
    with pytest.raises(PermissionDeniedError) as info:
        await session.read_text(_fill(path, tree))
    _no_leak(info.value)


@pytest.mark.parametrize(("path", "error"), BROKEN)
async def test_special_and_bad_files_are_refused(session, tree, path, error):
    with pytest.raises(error) as info:
        await session.read_text(path)
    _no_leak(info.value)


@pytest.mark.parametrize("path", WRITES)
async def test_writes_out_of_bounds_are_denied(session, tree, path):
    target = _fill(path, tree)
    with pytest.raises(PermissionDeniedError) as info:
        await session.write_text(target, "pwned")
    _no_leak(info.value)
    assert (tree.parent / "outside" / "secret.txt").read_text().strip() == SECRET
    assert not (tree.parent / "outside" / "new.txt").exists()
    assert (tree / ".env").read_text().strip() == DOTENV


@pytest.mark.parametrize("path", ["link_out", "../outside/secret.txt", ".env", "secrets/key.pem"])
async def test_edits_out_of_bounds_are_denied(session, tree, path):
    with pytest.raises(PermissionDeniedError) as info:
        await session.edit_text(path, SECRET, "pwned")
    _no_leak(info.value)
    assert (tree.parent / "outside" / "secret.txt").read_text().strip() == SECRET


@pytest.mark.parametrize("command", COMMANDS)
async def test_commands_naming_out_of_bounds_paths_are_denied(session, tree, command):
    with pytest.raises(PermissionDeniedError) as info:
        await session.run(_fill(command, tree))
    _no_leak(info.value)
    assert not (tree.parent / "outside" / "pwned.txt").exists()
    assert not (tree / "copy.txt").exists()


@pytest.mark.parametrize("cwd", ["..", "dir_out", "{outside}", "secrets"])
async def test_a_cwd_out_of_bounds_is_denied(session, tree, cwd):
    with pytest.raises(PermissionDeniedError):
        await session.run("pwd", cwd=_fill(cwd, tree))


@pytest.mark.parametrize("path", ["..", "dir_out", "/", "~", "{outside}", "secrets"])
async def test_listing_out_of_bounds_is_denied(session, tree, path):
    with pytest.raises(PermissionDeniedError):
        await session.list_files(_fill(path, tree))


async def test_listing_never_shows_denied_or_escaping_entries(session):
    names = {e.path.rstrip("/") for e in await session.list_files(".", include_hidden=True)}
    assert {".env", ".env.local", "link_env", "secrets", "link_out", "hard_out", "dir_out", "dev_zero"}.isdisjoint(
        names
    )
    assert {"ok.txt", "sub", "fifo", "bin.dat"} <= names
    deep = {e.path for e in await session.list_files(".", pattern="**/*", include_hidden=True)}
    assert not any("secret" in p or ".env" in p for p in deep)


@pytest.mark.parametrize("needle", [SECRET, "hunter2", "API_KEY"])
async def test_grep_never_reads_denied_or_outside_files(session, needle):
    hits = await session.grep(needle, include_hidden=True)
    assert hits == []
    for path in ("link_out", "hard_out", ".env", "dir_out", ".."):
        with pytest.raises(PermissionDeniedError):
            await session.grep(needle, path=path)


async def test_writing_through_a_hard_link_never_changes_the_other_name(tree, session):
    # hard_out's reads are judged as outside (a second name may live anywhere); writes replace the
    # inside name atomically, so the outside file keeps its content.
    change = await session.write_text("hard_out", "replaced\n")
    assert change.action == "updated"
    assert (tree.parent / "outside" / "secret.txt").read_text().strip() == SECRET
    assert (await session.read_text("hard_out")).content == "replaced\n"


async def test_writing_to_a_fifo_is_refused(session):
    with pytest.raises(WorkspaceError, match="not a regular file"):
        await session.write_text("fifo", "x")


async def test_symlink_swapped_between_check_and_open_is_refused(tree, session):
    """A thread flips swap.txt between a plain file and a symlink to the secret while we read."""
    target = tree / "swap.txt"
    secret = tree.parent / "outside" / "secret.txt"
    target.write_text("inside\n")
    stop = threading.Event()

    def flipper() -> None:
        tmp_link, tmp_file = tree / ".swap-link", tree / ".swap-file"
        while not stop.is_set():
            os.symlink(secret, tmp_link)
            os.replace(tmp_link, target)
            tmp_file.write_text("inside\n")
            os.replace(tmp_file, target)

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    outcomes = {"ok": 0, "refused": 0}
    try:
        for _ in range(400):
            try:
                content = (await session.read_text("swap.txt")).content
            except WorkspaceError as exc:
                _no_leak(exc)
                outcomes["refused"] += 1
                continue
            assert SECRET not in content
            outcomes["ok"] += 1
    finally:
        stop.set()
        thread.join()
    assert outcomes["ok"] + outcomes["refused"] == 400


async def test_parent_directory_swapped_during_writes_never_writes_outside(tree, session):
    outside = tree.parent / "outside"
    real = tree / "work"
    real.mkdir()
    stop = threading.Event()

    def flipper() -> None:
        parked = tree / ".work-parked"
        while not stop.is_set():
            try:
                os.rename(real, parked)
            except OSError:
                continue
            with contextlib.suppress(OSError):
                os.symlink(outside, real)  # the swap: work/ now points outside
                os.unlink(real)
            try:
                os.rename(parked, real)
            except OSError:  # the session re-created work/ in the gap
                shutil.rmtree(parked, ignore_errors=True)

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    try:
        for i in range(200):
            try:
                await session.write_text(f"work/f{i}.txt", "data")
            except WorkspaceError as exc:
                _no_leak(exc)
    finally:
        stop.set()
        thread.join()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_the_shell_gets_no_secrets_from_the_environment(session, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-should-not-leak")
    result = await session.run("env")
    assert result.ok
    assert "should-not-leak" not in result.stdout
    assert "PATH=" in result.stdout


async def test_a_fork_storm_is_killed_with_its_whole_group(session, tree):
    marker = f"lovia-storm-{os.getpid()}-{id(session)}"
    command = f"for i in $(seq 60); do (exec -a {marker} sleep 120 &); done; exec -a {marker} sleep 120"
    result = await session.run(f"bash -c '{command}'", timeout=1.5)
    assert result.timed_out and result.exit_code is None
    await asyncio.sleep(0.3)
    survivors = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith(marker)]
    assert survivors == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
    except OSError:
        return ""


async def test_non_utf8_file_names_are_listed_without_breaking(session, tree):
    os.close(os.open(os.fsencode(tree) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    entries = await session.list_files(".")
    assert any(e.path.startswith("caf") for e in entries)
    for entry in entries:
        entry.model_dump_json()  # serialisable for the transcript


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*b", r"(\w+\s?)*$", "(x+x+)+y"])
async def test_catastrophic_regexes_are_refused_before_they_run(session, tree, pattern):
    (tree / "aaa.txt").write_text("a" * 40 + "!\n")
    with pytest.raises(WorkspaceError, match="take forever") as info:
        await session.grep(pattern)
    assert info.value.hint
    assert [m.path for m in await session.grep(r"a{40}!")] == ["aaa.txt"]
