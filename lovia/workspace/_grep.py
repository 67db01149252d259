"""Internal: regular-expression search in a child process that a deadline can stop.

Python's ``re`` holds the GIL while it backtracks, so a hostile pattern searched on a thread of
the server stalls its event loop, and nothing can interrupt it. Here the matching runs in a
small child interpreter (standard library only), fed one file at a time over a pipe; the parent
waits with ``select`` (the GIL released) and SIGKILLs the child when the deadline passes.

The protocol is JSON lines: first ``[pattern, flags]``, then per file the parent sends
``"<text>"`` (a JSON string) and the child answers with the list of 1-based numbers of the
matching lines (``text.splitlines()``).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from types import TracebackType

from .errors import WorkspaceError

__all__ = ["GrepTimeoutError", "RegexWorker"]

_CHILD = r"""
import json, re, sys
pattern, flags = json.loads(sys.stdin.readline())
rx = re.compile(pattern, flags)
out = sys.stdout
for raw in sys.stdin:
    text = json.loads(raw)
    hits = [n for n, line in enumerate(text.splitlines(), 1) if rx.search(line)]
    out.write(json.dumps(hits) + "\n")
    out.flush()
"""


class GrepTimeoutError(WorkspaceError):
    """The search did not finish within its deadline; the matching process was killed."""


class RegexWorker:
    """One child process searching with one compiled pattern, under one overall deadline."""

    def __init__(self, pattern: str, flags: int, *, deadline: float) -> None:
        self.pattern = pattern
        self.seconds = deadline
        self.deadline = time.monotonic() + deadline
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._pending = b""
        self._header = (json.dumps([pattern, flags]) + "\n").encode("utf-8", "surrogatepass")

    def __enter__(self) -> RegexWorker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Kill the child (whatever it is doing) and reap it."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def _timeout(self) -> GrepTimeoutError:
        self.close()
        return GrepTimeoutError(
            f"the search for {self.pattern!r} did not finish within {self.seconds:g}s and was stopped",
            hint="simplify the regular expression (avoid nested or overlapping repetition such as (a|a)+), "
            "or search a narrower path or glob",
        )

    def search(self, text: str) -> list[int]:
        """The 1-based numbers of the lines of ``text`` that match.

        Raises:
            GrepTimeoutError: The overall deadline passed (the child is killed).
        """
        data = self._header + (json.dumps(text) + "\n").encode("utf-8", "surrogatepass")
        self._header = b""
        view = memoryview(data)
        with selectors.DefaultSelector() as sel:
            sel.register(self._in, selectors.EVENT_WRITE)
            sel.register(self._out, selectors.EVENT_READ)
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise self._timeout()
                for key, _ in sel.select(left):
                    if key.fd == self._in:
                        try:
                            view = view[os.write(self._in, view) :]
                        except BlockingIOError:
                            continue
                        except OSError:
                            raise self._crashed() from None
                        if not view:
                            sel.unregister(self._in)
                    else:
                        chunk = os.read(self._out, 65536)
                        if not chunk:
                            raise self._crashed()
                        self._pending += chunk
                        if b"\n" in self._pending:
                            line, _, self._pending = self._pending.partition(b"\n")
                            return [int(n) for n in json.loads(line)]

    def _crashed(self) -> WorkspaceError:
        self.close()
        return WorkspaceError(
            "the search process ended unexpectedly", hint="retry; if it happens again, simplify the pattern"
        )
