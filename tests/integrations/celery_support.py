"""Real processes for the Celery tests: a private redis-server and Celery worker processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REDIS = "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """Our own redis-server on an ephemeral port (no persistence); yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Workers:
    """Celery worker processes (prefork, one child each), each in its own process group."""

    def __init__(self, env: dict[str, str], logs: Path, *, concurrency: int = 1) -> None:
        self.env = {**os.environ, **env}
        self.logs = logs
        self.concurrency = concurrency
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.born: dict[str, float] = {}

    def start(self, name: str) -> None:
        with open(self.logs / f"{name}.log", "ab") as log:  # a file, not a pipe: a chatty worker never blocks
            self.procs[name] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "tests.integrations.celery_app",
                    "worker",
                    "-P",
                    "prefork",
                    "-c",
                    str(self.concurrency),
                    "-n",
                    f"{name}@%h",
                    "-l",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.born[name] = time.monotonic()

    def children(self, name: str) -> list[int]:
        pid = self.procs[name].pid
        try:
            return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            return []

    def kill_child(self, name: str) -> bool:
        """SIGKILL the pool process of worker ``name`` (the main process stays and forks a new one)."""
        kids = self.children(name)
        if not kids:
            return False
        os.kill(kids[0], signal.SIGKILL)
        self.born[name] = time.monotonic()  # its replacement needs time to start, too
        return True

    def kill_worker(self, name: str) -> None:
        """SIGKILL worker ``name`` with its pool process, then start it again."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()
        self.start(name)

    def check_alive(self) -> int:
        """Fail on a worker that died on its own; restart one that Celery gave up on; returns restarts.

        When a pool process is killed before it finished starting, Celery's main process exits
        ("Could not start worker processes"); a process supervisor (systemd, Kubernetes) would
        start it again, and so does this harness.
        """
        restarts = 0
        for name, proc in list(self.procs.items()):
            if proc.poll() is None or proc.returncode == -signal.SIGKILL:
                continue
            if "Could not start worker processes" not in self.tail(name):
                raise AssertionError(f"worker {name} exited with {proc.returncode}: {self.tail(name)}")
            (self.logs / f"{name}.log").write_bytes(b"")  # the next failure must be a new one
            self.start(name)
            restarts += 1
        return restarts

    def tail(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
