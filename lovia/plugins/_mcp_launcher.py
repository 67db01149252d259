"""Become an MCP stdio server, leaving a watcher that ends what the server leaves behind.

Run as ``python -I -S _mcp_launcher.py COMMAND [ARGS...]`` (standard library only). The MCP SDK
starts this launcher in a new session, so it leads a process group that the server and
everything the server starts belong to (unless they leave the group on purpose). The launcher
forks a watcher, then replaces itself with the server (``exec``): the server keeps the pid, the
parent, stdin and stdout the SDK gave the launcher. The watcher lets go of the pipes and waits for
the server to exit (end of a pipe only the server holds, or being re-parented). Then it sends
SIGTERM to the rest of the group, waits up to a second, and sends SIGKILL to what remains. The
SDK's own shutdown (SIGTERM, then SIGKILL to the whole group) still applies when the server does
not exit by itself.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

GRACE = 1.0
POLL = 0.25


def _members(group: int) -> list[int] | None:
    """Other live processes of ``group`` (Linux /proc), or None where they cannot be listed."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    me, found = os.getpid(), []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] not in ("Z", "X") and int(fields[2]) == group:
            found.append(int(name))
    return found


def _send(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _end_group(group: int) -> None:
    """SIGTERM the group's other members, then SIGKILL whatever is still there after GRACE."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    left = _members(group)
    if left is None:  # cannot list the group: signal it whole (the watcher goes with it)
        try:
            os.killpg(group, signal.SIGTERM)
            time.sleep(0.2)
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
        return
    _send(left, signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = _members(group) or []
    _send(left, signal.SIGKILL)


def _watch(server: int, gone: int) -> None:
    """Wait until the server has exited: EOF on ``gone``, or this process re-parented."""
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)  # hold no end of the SDK's pipes: it must see EOF when the server is gone
    os.dup2(quiet, 1)
    while os.getppid() == server:
        ready, _, _ = select.select([gone], [], [], POLL)
        if ready and not os.read(gone, 1):
            break
    _end_group(os.getpgid(0))


def main() -> None:
    argv = sys.argv[1:]
    if not argv:
        print("usage: _mcp_launcher.py COMMAND [ARGS...]", file=sys.stderr)
        sys.exit(2)
    leader = os.getpgid(0) == os.getpid()  # only ever end a group of our own
    gone, alive = os.pipe()  # the server holds `alive` open across exec; its end is the signal
    os.set_inheritable(alive, True)
    if leader and os.fork() == 0:
        os.close(alive)
        try:
            _watch(os.getppid(), gone)
        finally:
            os._exit(0)
    os.close(gone)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"lovia: could not start the MCP server {argv[0]!r}: {exc}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
