"""Internal: running commands in their own process group, with bounded output capture."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import WorkspaceClosedError
from .types import CommandResult, ProcessOutput, ProcessState, ProcessStatus

_MINIMAL_ENV_POSIX = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "TZ")
_MINIMAL_ENV_WINDOWS = (
    "SYSTEMROOT", "WINDIR", "SYSTEMDRIVE", "COMSPEC", "PATHEXT", "TEMP", "TMP", "USERPROFILE", "USERNAME",
    "HOMEDRIVE", "HOMEPATH", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES", "PROGRAMFILES(X86)",
)  # fmt: skip
LINGER_SECONDS = 2.0
PEEK_TAIL_BYTES = 64 * 1024
"""How much recent output a background process keeps for passive viewers (never consumed by a read)."""


def find_venv(root: Path) -> Path | None:
    """A virtualenv at the root with a real interpreter inside (``.venv`` preferred, then ``venv``)."""
    for name in (".venv", "venv"):
        venv = root / name
        bindir = venv / ("Scripts" if sys.platform == "win32" else "bin")
        if any((bindir / exe).exists() for exe in ("python", "python3", "python.exe")):
            return venv
    return None


def build_env(
    root: Path, *, inherit: bool, base: Mapping[str, str] | None, extra: Mapping[str, str] | None
) -> dict[str, str]:
    """The child environment: minimal (no secrets) unless ``inherit``; the root's venv activated."""
    if inherit:
        env = dict(os.environ)
    else:
        keep = _MINIMAL_ENV_POSIX + (_MINIMAL_ENV_WINDOWS if sys.platform == "win32" else ())
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env.setdefault("LANG", "C.UTF-8")
    venv = find_venv(root)
    if venv is not None:
        env.pop("PYTHONHOME", None)  # an inherited PYTHONHOME would point the venv's interpreter elsewhere
        bindir = venv / ("Scripts" if sys.platform == "win32" else "bin")
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
    env.update(base or {})
    env.update(extra or {})
    return env


def kill_group(pid: int) -> None:
    """SIGKILL the whole process group led by ``pid`` (best effort)."""
    if sys.platform == "win32":  # pragma: no cover - not exercised on POSIX CI
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- the process tree

TAG_VARIABLE = "LOVIA_PROCESS_TAG"
"""Set in every command's environment to a fresh token: whatever the command starts inherits it,
including processes that left its process group and session (``setsid``) or were orphaned."""

_PROC = Path("/proc")


def new_tag() -> str:
    """A fresh token for :data:`TAG_VARIABLE`."""
    return uuid.uuid4().hex


def _table() -> dict[int, tuple[int, int, str]]:
    """``pid -> (ppid, pgid, state)`` of every process visible in ``/proc``."""
    table: dict[int, tuple[int, int, str]] = {}
    try:
        names = os.listdir(_PROC)
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            raw = (_PROC / name / "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
        if len(fields) >= 4:
            table[int(name)] = (int(fields[1]), int(fields[2]), fields[0].decode("ascii", "replace"))
    return table


def _carries(pid: int, marker: bytes) -> bool:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return environ.startswith(marker) or b"\x00" + marker in environ


def members(leader: int, tag: str | None, *, leader_alive: bool) -> set[int]:
    """Live processes a command started: its process group, the tagged ones, and their descendants.

    ``leader`` is the command's shell. Its descendants are walked only while it is alive (a dead
    leader's pid may be reused); its process group and the tag outlive it.
    """
    table = _table()
    marker = f"{TAG_VARIABLE}={tag}\x00".encode() if tag else None
    found = {pid for pid, (_, pgid, state) in table.items() if pgid == leader and state != "Z"}
    if marker is not None:
        found |= {pid for pid, (_, _, state) in table.items() if state != "Z" and _carries(pid, marker)}
    if leader_alive and leader in table:
        found.add(leader)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and table[child][2] != "Z":
                found.add(child)
                stack.append(child)
    found.discard(os.getpid())
    return {pid for pid in found if table.get(pid, (0, 0, "Z"))[2] != "Z"}


def signal_tree(leader: int, tag: str | None, *, leader_alive: bool) -> set[int]:
    """One pass: SIGKILL the group led by ``leader`` and every member found; the pids signalled."""
    if not sys.platform.startswith("linux"):
        kill_group(leader)
        return set()
    if leader_alive:  # a dead leader's group is reached through its live members (its pid may be reused)
        kill_group(leader)
    found = members(leader, tag, leader_alive=leader_alive)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return found


async def kill_tree(leader: int, tag: str | None, *, leader_alive: bool, settle: float = 2.0) -> list[int]:
    """SIGKILL everything the command led by ``leader`` started, new sessions and orphans included.

    Repeats until a pass finds nothing (a process forking meanwhile is caught by the next pass).
    Returns the pids still alive after ``settle`` seconds: what could not be killed (empty when all died).
    """
    deadline = time.monotonic() + settle
    alive = leader_alive
    while True:
        found = signal_tree(leader, tag, leader_alive=alive)
        alive = False  # once signalled, the leader's pid is not trusted for a walk again
        if not found:
            return []
        if time.monotonic() >= deadline:
            return sorted(found)
        await asyncio.sleep(0.02)


def unkilled_note(pids: list[int]) -> str:
    """The plain statement that some processes survived a kill."""
    shown = ", ".join(str(p) for p in pids[:20]) + (" ..." if len(pids) > 20 else "")
    return f"[lovia: could NOT kill {len(pids)} process(es) the command started (pids {shown}); they are still running]"


class _Capture:
    """Keeps the first and last ``cap // 2`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> tuple[str, bool]:
        head = self.head.decode("utf-8", errors="replace")
        if self.total <= len(self.head) + len(self.tail):
            return head + self.tail.decode("utf-8", errors="replace"), False
        dropped = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {dropped} bytes of output truncated: first and last parts kept ...]\n"
        return head + marker + self.tail.decode("utf-8", errors="replace"), True


async def _pump(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        capture.feed(chunk)


async def _exited(
    proc: asyncio.subprocess.Process, readers: asyncio.Future[Any], timeout: float | None, abort: asyncio.Event | None
) -> str:
    """Wait for the shell itself to exit (``Process.wait`` would also wait for every pipe to close).

    ``"exited"``, ``"timeout"``, or ``"aborted"`` once ``abort`` is set (the session closed).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if abort is not None and abort.is_set():
            return "aborted"
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return "timeout"
        if readers.done():  # the output closed: the exit is imminent, wait for it properly
            try:
                await asyncio.wait_for(proc.wait(), remaining)
            except asyncio.TimeoutError:
                return "timeout"
            return "exited"
        if proc.returncode is not None:  # exited while something it started still holds the output
            return "exited"
        await asyncio.wait({readers}, timeout=0.05 if remaining is None else min(0.05, remaining))


def _release(proc: asyncio.subprocess.Process) -> None:
    """Close our ends of the pipes that a detached leftover still holds (asyncio has no public call)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


async def _reaped(proc: asyncio.subprocess.Process, limit: float = 5.0) -> None:
    """After SIGKILL: wait (bounded) for the exit status; a detached child may hold the pipes forever."""
    deadline = time.monotonic() + limit
    while proc.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def run_foreground(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    max_chars: int,
    abort: asyncio.Event | None = None,
) -> CommandResult:
    """Run ``command`` through the system shell in a fresh process group (tagged: see :data:`TAG_VARIABLE`).

    Setting ``abort`` (the session closing) kills everything the command started; the result then
    has no exit code. Set before the shell even started, it raises :class:`WorkspaceClosedError`.
    """
    tag = new_tag()
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=str(cwd),
        env={**env, TAG_VARIABLE: tag},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    if abort is not None and abort.is_set():  # closed while the shell was starting: reap it, refuse
        await kill_tree(proc.pid, tag, leader_alive=proc.returncode is None)
        await _reaped(proc)
        _release(proc)
        raise WorkspaceClosedError(
            "the workspace session closed while the command was starting; it was killed",
            hint="open a new session (the run that owned it ended)",
        )
    out, err = _Capture(max_chars), _Capture(max_chars)
    readers = asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
    timed_out = aborted = False
    notes: list[str] = []
    unkilled: list[int] = []
    try:
        ending = await _exited(proc, readers, timeout, abort)
        if ending != "exited":
            timed_out, aborted = ending == "timeout", ending == "aborted"
            unkilled = await kill_tree(proc.pid, tag, leader_alive=proc.returncode is None)
            await _reaped(proc)
        try:
            await asyncio.wait_for(asyncio.shield(readers), LINGER_SECONDS)
        except asyncio.TimeoutError:
            unkilled = await kill_tree(proc.pid, tag, leader_alive=proc.returncode is None)
            notes.append(
                f"[lovia: something the command started still held its output {LINGER_SECONDS:.0f}s after the shell "
                f"exited; {'it was killed' if not unkilled else 'lovia tried to kill it'}. "
                "Use shell(background=true) for long-lived processes.]"
            )
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
            _release(proc)
    except BaseException:  # cancelled: leave nothing behind
        signal_tree(proc.pid, tag, leader_alive=proc.returncode is None)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await _reaped(proc)
        _release(proc)
        raise
    stdout, cut_out = out.text()
    stderr, cut_err = err.text()
    if timed_out and not unkilled:
        notes.append(f"[lovia: timed out after {timeout:g}s; the command and every process it started were killed]")
    elif timed_out:
        notes.append(f"[lovia: timed out after {timeout:g}s; the command was stopped]")
    elif aborted:
        notes.append("[lovia: the workspace session was closed; the command and what it started were killed]")
    if unkilled:
        notes.append(unkilled_note(unkilled))
    if notes:
        stderr = (stderr + "\n" if stderr else "") + "\n".join(notes)
    return CommandResult(
        exit_code=None if timed_out or aborted else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        truncated=cut_out or cut_err,
    )


@dataclass(eq=False)
class BackgroundProcess:
    """One session-owned background process: merged output spooled to a bounded buffer."""

    process_id: str
    command: str
    proc: asyncio.subprocess.Process
    cap: int
    buffer: bytearray = field(default_factory=bytearray)
    dropped: int = 0
    recent: bytearray = field(default_factory=bytearray)
    total: int = 0
    killed: bool = False
    exit_seen: bool = False
    reader: asyncio.Task[None] | None = None
    tag: str | None = None
    unkilled: list[int] = field(default_factory=list)
    """Pids that survived the last kill (said plainly in the output, never reported as killed)."""

    def start_reader(self) -> None:
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        stream = self.proc.stdout
        if stream is None:
            return
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            self.total += len(chunk)
            self.recent += chunk
            if len(self.recent) > PEEK_TAIL_BYTES:
                del self.recent[: len(self.recent) - PEEK_TAIL_BYTES]
            self.buffer += chunk
            if len(self.buffer) > self.cap:
                over = len(self.buffer) - self.cap
                self.dropped += over
                del self.buffer[:over]

    @property
    def status(self) -> ProcessState:
        if self.killed:
            return "killed"
        return "running" if self.proc.returncode is None else "exited"

    def drain(self) -> ProcessOutput:
        """Output since the last drain; an exit is delivered (and marked seen) once it is reported."""
        status = self.status
        text = self.buffer.decode("utf-8", errors="replace")
        truncated = self.dropped > 0
        if truncated:
            text = f"[... {self.dropped} older bytes of unread output were dropped ...]\n" + text
        self.buffer.clear()
        self.dropped = 0
        if status != "running":
            self.exit_seen = True
        return ProcessOutput(
            process_id=self.process_id,
            status=status,
            exit_code=self.proc.returncode if status != "running" else None,
            output=text,
            truncated=truncated,
        )

    def peek(self) -> ProcessOutput:
        """The last :data:`PEEK_TAIL_BYTES` of output and the status, consuming nothing.

        ``truncated`` says older output exists that the tail no longer holds.
        """
        status = self.status
        data = bytes(self.recent)
        truncated = self.total > len(data)
        if truncated:  # the cut may have split a UTF-8 sequence: start at the next whole character
            skip = 0
            while skip < min(len(data), 3) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        return ProcessOutput(
            process_id=self.process_id,
            status=status,
            exit_code=self.proc.returncode if status != "running" else None,
            output=data.decode("utf-8", errors="replace"),
            truncated=truncated,
        )

    async def settle(self) -> None:
        """After the process ended: let the reader take the remaining output."""
        if self.proc.returncode is not None and self.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self.reader), LINGER_SECONDS)

    async def kill(self) -> None:
        """Kill the process and everything it started (new sessions and orphans included)."""
        if self.proc.returncode is None:
            self.killed = True
        self.unkilled = await kill_tree(self.proc.pid, self.tag, leader_alive=self.proc.returncode is None)
        if self.unkilled:
            note = ("\n" + unkilled_note(self.unkilled) + "\n").encode()
            self.buffer += note
            self.recent += note
        await _reaped(self.proc)
        await self.settle()
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader
            _release(self.proc)

    def snapshot(self) -> ProcessStatus:
        status = self.status
        return ProcessStatus(
            process_id=self.process_id,
            command=self.command,
            status=status,
            exit_code=self.proc.returncode if status != "running" else None,
            exit_seen=self.exit_seen,
        )


async def spawn_background(
    process_id: str, command: str, *, cwd: Path, env: Mapping[str, str], cap: int
) -> BackgroundProcess:
    """Start ``command`` in its own process group with stdout and stderr merged (tagged like foreground)."""
    tag = new_tag()
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=str(cwd),
        env={**env, TAG_VARIABLE: tag},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    bg = BackgroundProcess(process_id=process_id, command=command, proc=proc, cap=cap, tag=tag)
    bg.start_reader()
    return bg
