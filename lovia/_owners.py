"""Which process owns a run: the ``host:pid`` owner strings the web server and the CLI share."""

from __future__ import annotations

import os
import socket

__all__ = ["OWNER", "owner_alive"]

OWNER = f"{socket.gethostname()}:{os.getpid()}"
"""This process as ``host:pid``: recorded on the runs it owns and the schedule claims it takes."""


def owner_alive(owner: str) -> bool | None:
    """Whether the ``host:pid`` process runs; ``None`` when it is on another host (cannot tell)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
