"""Internal: running commands in their own process group, with bounded output capture."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


async def _exited(proc: asyncio.subprocess.Process, readers: asyncio.Future[Any], timeout: float | None) -> bool:
    """Wait for the shell itself to exit (``Process.wait`` would also wait for every pipe to close)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        if readers.done():  # the output closed: the exit is imminent, wait for it properly
            try:
                await asyncio.wait_for(proc.wait(), remaining)
            except asyncio.TimeoutError:
                return False
            return True
        if proc.returncode is not None:  # exited while something it started still holds the output
            return True
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
    command: str, *, cwd: Path, env: Mapping[str, str], timeout: float | None, max_chars: int
) -> CommandResult:
    """Run ``command`` through the system shell in a fresh process group."""
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=str(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    out, err = _Capture(max_chars), _Capture(max_chars)
    readers = asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
    timed_out = False
    notes: list[str] = []
    try:
        if not await _exited(proc, readers, timeout):
            timed_out = True
            kill_group(proc.pid)
            await _reaped(proc)
        try:
            await asyncio.wait_for(asyncio.shield(readers), LINGER_SECONDS)
        except asyncio.TimeoutError:
            notes.append(
                f"[lovia: something the command started still held its output {LINGER_SECONDS:.0f}s after the shell "
                "exited; it was killed. Use shell(background=true) for long-lived processes.]"
            )
            kill_group(proc.pid)
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
            _release(proc)
    except BaseException:  # cancelled: leave nothing behind
        kill_group(proc.pid)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await _reaped(proc)
        _release(proc)
        raise
    stdout, cut_out = out.text()
    stderr, cut_err = err.text()
    if timed_out:
        notes.append(f"[lovia: timed out after {timeout:g}s; the command and its process group were killed]")
    if notes:
        stderr = (stderr + "\n" if stderr else "") + "\n".join(notes)
    return CommandResult(
        exit_code=None if timed_out else proc.returncode,
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
        if self.proc.returncode is None:
            self.killed = True
        kill_group(self.proc.pid)
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
    """Start ``command`` in its own process group with stdout and stderr merged."""
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=str(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    bg = BackgroundProcess(process_id=process_id, command=command, proc=proc, cap=cap)
    bg.start_reader()
    return bg
