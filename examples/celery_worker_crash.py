"""Background runs on Celery: SIGKILL a worker in the middle of a run and the run still finishes once.

Run it: ``python examples/celery_worker_crash.py`` (offline: a private ``redis-server`` on a free
port as the broker, a SQLite file for the stores, a scripted model; needs ``lovia[celery]`` and
Debian's ``redis-server``).

The script starts one Celery worker (``celery -A celery_worker_crash worker``), submits three
runs, and SIGKILLs the worker's pool process while the first run is inside its ``ship`` tool.
Celery puts the unacknowledged message back, the next delivery waits out the dead worker's lease,
resumes the run from its checkpoint, and only the call that was in flight runs again: each order is
shipped once (the tool keys its side effect by ``ctx.idempotency_key``).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from celery import Celery

from lovia import Agent, RunContext, tool
from lovia.integrations.celery import CeleryRuns
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry

HERE = Path(__file__).resolve().parent
BROKER = os.environ.get("EXAMPLE_BROKER", "redis://127.0.0.1:6379/0")
DB = os.environ.get("EXAMPLE_DB", "jobs.db")


@tool
def ship(ctx: RunContext, order: int) -> str:
    """Ship an order (the side effect is recorded once per idempotency key)."""
    with sqlite3.connect(DB, timeout=30) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS attempts (run_id TEXT, order_no INT)")
        conn.execute("INSERT INTO attempts VALUES (?, ?)", (ctx.run_id, order))
    Path(DB + ".in-flight").write_text(f"{order} {os.getpid()}")
    time.sleep(0.5 if order == 1 else 0.05)  # order 1 is slow: the kill lands here
    with sqlite3.connect(DB, timeout=30) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS shipped (key TEXT PRIMARY KEY, run_id TEXT, order_no INT)")
        conn.execute("INSERT OR IGNORE INTO shipped VALUES (?, ?, ?)", (ctx.idempotency_key, ctx.run_id, order))
    return f"order {order} shipped"


def model_turn(entries, tools):
    """A scripted model: ship the order named in the request, then confirm."""
    order = int(next(e.text for e in entries if isinstance(e, InputEntry) and e.role == "user").split()[-1])
    if not any(isinstance(e, ToolResultEntry) for e in entries):
        return call("ship", {"order": order}, call_id="ship-1")
    return text(f"Order {order} is on its way.")


shipper = Agent(name="shipper", instructions="Ship orders.", model=ScriptedProvider(model_turn), tools=[ship])

app = Celery("celery_worker_crash", broker=BROKER, backend=BROKER)
app.conf.worker_prefetch_multiplier = 1
runs = CeleryRuns(app, db=DB, agents={"shipper": "celery_worker_crash:shipper"}, lease_ttl=2, sweep_every=None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def pool_process(worker: subprocess.Popen) -> int | None:
    kids = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()
    return int(kids[0]) if kids else None


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="lovia-celery-")
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    env = {**os.environ, "EXAMPLE_BROKER": f"redis://127.0.0.1:{port}/0", "EXAMPLE_DB": f"{workdir}/jobs.db"}
    try:
        # The producer and the worker import this module with the same settings (from the environment).
        driver = subprocess.run([sys.executable, __file__, "--drive"], env=env, cwd=HERE, check=False)
    finally:
        redis.terminate()
        redis.wait()
    raise SystemExit(driver.returncode)


def drive() -> None:
    print(f"broker: {BROKER}; stores and job book: {DB}")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "celery_worker_crash",
            "worker",
            "-c",
            "1",
            "-l",
            "ERROR",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        ids = [
            runs.submit("shipper", f"Ship order {n}", run_id=f"order-{n}", session_id=f"order-{n}") for n in (1, 2, 3)
        ]
        print(f"submitted {len(ids)} runs: {', '.join(ids)}")
        marker = Path(DB + ".in-flight")
        wait_for(lambda: marker.exists() and marker.read_text().startswith("1 "), 60, "order 1 to start shipping")
        pid = pool_process(worker)
        os.kill(pid, signal.SIGKILL)
        print(f"order-1 is inside ship(): SIGKILL the worker's pool process (pid {pid})")
        wait_for(lambda: all(j.state == "done" for j in runs.jobs()), 90, "every run to finish")
        with sqlite3.connect(DB) as conn:
            attempts = dict(conn.execute("SELECT run_id, count(*) FROM attempts GROUP BY run_id"))
            shipped = dict(conn.execute("SELECT run_id, count(*) FROM shipped GROUP BY run_id"))
        proc = runs.process()
        for job in runs.jobs():
            answer = app.AsyncResult(job.run_id).get(timeout=30)["output"]
            segments = proc.call(proc.session.segments(job.run_id))
            print(
                f"{job.run_id}: {answer!r} deliveries={job.deliveries} ship() ran {attempts.get(job.run_id, 0)}x, "
                f"shipped {shipped.get(job.run_id, 0)}x, session: {len(segments)} run(s)"
            )
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        runs.close()


if __name__ == "__main__":
    drive() if "--drive" in sys.argv else main()
