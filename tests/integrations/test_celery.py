"""lovia.integrations.celery with a real redis-server, real Celery workers and the real PostgreSQL.

The soak at the end SIGKILLs random workers (sometimes only the pool process, which Celery's main
process notices and requeues; sometimes the whole worker, whose unacknowledged message Redis hands
out again after the visibility timeout) while runs are in flight, and checks that every run
completed exactly once. Short by default; ``LOVIA_SOAK=1`` runs the full 200 runs / 4 workers /
10+ kills (``-s`` prints the figures either way).
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")

from lovia.exceptions import UserError
from lovia.transcript import ToolCallEntry, ToolResultEntry
from tests.pg_support import DSN, UNREACHABLE, drop_schema, new_schema

from .celery_support import ROOT, Workers, redis_server

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(UNREACHABLE is not None, reason=UNREACHABLE or ""),
    pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server is not installed"),
]

SOAK = os.environ.get("LOVIA_SOAK") == "1"


class Env:
    """The module's redis-server, PostgreSQL schema and the test-side CeleryRuns."""

    def __init__(self, broker: str, schema: str, logs: Path) -> None:
        self.broker, self.schema, self.logs = broker, schema, logs
        self.vars = {
            "LOVIA_TEST_BROKER": broker,
            "LOVIA_TEST_DB": DSN,
            "LOVIA_TEST_SCHEMA": schema,
            "LOVIA_TEST_SWEEP_AFTER": "30",
            # Slow enough tool calls that the killer lands its kills while runs are in flight.
            "LOVIA_TEST_STEP_DELAY": "0.1",
        }
        os.environ.update(self.vars)
        sys.modules.pop("tests.integrations.celery_app", None)
        self.module: Any = importlib.import_module("tests.integrations.celery_app")
        self.runs: Any = self.module.runs

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        import psycopg

        with psycopg.connect(DSN, autocommit=True, options=f"-c search_path={self.schema}") as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def workers(self, **kwargs: Any) -> Workers:
        return Workers(self.vars, self.logs, **kwargs)

    def wait_done(self, run_ids: list[str], workers: Workers, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = {j.run_id: j.state for j in self.runs.jobs()}
            left = [r for r in run_ids if states.get(r) != "done"]
            if not left:
                return
            workers.check_alive()
            if time.monotonic() > deadline:
                logs = "\n".join(workers.tail(n) for n in workers.procs)
                raise AssertionError(f"{len(left)} runs not done, e.g. {left[:3]}: {logs}")
            time.sleep(0.1)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    logs = tmp_path_factory.mktemp("celery")
    schema = new_schema("celery")
    saved = dict(os.environ)
    with redis_server(logs) as broker:
        e = Env(broker, schema, logs)
        e.sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        for ddl in e.module.EFFECT_TABLES:
            e.sql(ddl)
        try:
            yield e
        finally:
            e.runs.close()
            os.environ.clear()
            os.environ.update(saved)
            drop_schema(schema)


def session_segments(env: Env, run_id: str) -> list[Any]:
    proc = env.runs.process()
    return proc.call(proc.session.segments(run_id))


# --------------------------------------------------------------------------- misuse


def test_missing_extra_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['celery'] = None\n"
        "from lovia.integrations.celery import CeleryRuns\n"
        "try:\n    CeleryRuns(object(), db='x.db', agents={'a': 'm:a'})\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "UserError pip install 'lovia[celery]'"


def test_bad_configuration_is_refused_with_hints(env: Env) -> None:
    from celery import Celery

    from lovia.integrations.celery import CeleryRuns

    app = Celery("bad", broker=env.broker)
    with pytest.raises(UserError, match="non-empty mapping") as info:
        CeleryRuns(app, db=DSN, agents={})
    assert info.value.hint
    with pytest.raises(UserError, match="Agent or a 'module:attribute'"):
        CeleryRuns(app, db=DSN, agents={"a": 42})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="lease_ttl"):
        CeleryRuns(app, db=DSN, agents={"a": "m:a"}, lease_ttl=0)
    runs = env.runs
    with pytest.raises(UserError, match="no agent 'nope'") as info:
        runs.submit("nope", "hi")
    assert "'worker'" in (info.value.hint or "")
    with pytest.raises(UserError, match="input must be a string"):
        runs.submit("worker", ["hi"])


def test_a_bad_import_path_fails_the_run_with_its_reason(env: Env) -> None:
    from lovia.integrations.celery import CeleryRuns

    runs = CeleryRuns(env.module.app, db=DSN, schema=env.schema, agents={"x": "tests.nowhere:agent"}, name="badpath")
    other = CeleryRuns(env.module.app, db=DSN, schema=env.schema, agents={"x": "os:sep"}, name="badattr")
    try:
        with pytest.raises(UserError, match="cannot import 'tests.nowhere'"):
            runs.agent("x")
        with pytest.raises(UserError, match="not an Agent"):
            other.agent("x")
    finally:
        runs.close()
        other.close()


def test_resubmitting_an_id_with_other_input_is_refused(env: Env) -> None:
    run_id = f"dup-{random.getrandbits(32)}"
    env.runs.process().book.add(run_id, "worker", "first", None)  # booked, not published
    with pytest.raises(UserError, match="already booked") as info:
        env.runs.submit("worker", "second", run_id=run_id)
    assert "new run_id" in (info.value.hint or "")


# --------------------------------------------------------------------------- idempotent re-issue


def test_completed_replays_and_a_live_run_is_refused_by_its_lease(env: Env) -> None:
    runs = env.runs
    proc = runs.process()
    busy, warm = f"busy-{random.getrandbits(32)}", f"warm-{random.getrandbits(32)}"
    workers = env.workers()
    workers.start("w0")
    try:
        runs.submit("worker", "job warm", run_id=warm)
        env.wait_done([warm], workers, timeout=60)  # the worker is up and idle: the next delivery is immediate
        # Another "worker" holds the lease: the delivery is refused and retried until the lease expires.
        proc.call(proc.checkpointer.acquire_lease(busy, owner="elsewhere:1:x", ttl=3))
        runs.submit("worker", "job busy", run_id=busy, session_id=busy)
        time.sleep(1.5)
        assert {j.run_id: j.state for j in runs.jobs()}[busy] == "pending"
        assert env.sql("SELECT count(*) FROM attempts WHERE run_id = %s", (busy,))[0][0] == 0
        env.wait_done([busy], workers, timeout=60)
        job = next(j for j in runs.jobs() if j.run_id == busy)
        assert job.deliveries >= 2  # refused at least once, then ran

        # Re-issue the completed run: it replays (no tool runs again, one session segment).
        runs.submit("worker", "job busy", run_id=busy, session_id=busy)
        deadline = time.monotonic() + 30
        while env.sql("SELECT count(*) FROM completions WHERE run_id = %s", (busy,))[0][0] < 2:
            assert time.monotonic() < deadline, workers.tail("w0")
            time.sleep(0.1)
        assert env.sql("SELECT replayed FROM completions WHERE run_id = %s ORDER BY id", (busy,)) == [(False,), (True,)]
        assert env.sql("SELECT count(*) FROM attempts WHERE run_id = %s", (busy,))[0][0] == 3
        assert [s.run_id for s in session_segments(env, busy)] == [busy]
        assert runs.app.AsyncResult(busy).get(timeout=10)["output"] == "job busy: done"
    finally:
        workers.stop()


def test_the_sweeper_requeues_a_lost_job_but_not_a_live_one(env: Env) -> None:
    from celery import Celery

    from lovia.integrations.celery import CeleryRuns

    runs = CeleryRuns(
        Celery("sweeper", broker=env.broker),
        db=DSN,
        schema=env.schema,
        agents={"worker": env.module.worker_agent},
        sweep_after=0.5,
        sweep_every=None,
    )
    lost, live = f"lost-{random.getrandbits(32)}", f"live-{random.getrandbits(32)}"
    workers = env.workers()
    try:
        proc = runs.process()
        proc.book.add(lost, "worker", "job lost", lost)  # booked, message never published (the broker lost it)
        proc.book.add(live, "worker", "job live", live)
        proc.call(proc.checkpointer.acquire_lease(live, owner="elsewhere:2:y", ttl=60))
        first = runs.sweep()
        assert lost not in first and live not in first  # too recent
        time.sleep(0.7)
        second = runs.sweep()
        assert lost in second and live not in second  # the live one is someone's
        workers.start("w0")
        env.wait_done([lost], workers, timeout=60)
        job = {j.run_id: j for j in runs.jobs()}[lost]
        assert (job.enqueues, job.state) == (2, "done")
        assert [s.run_id for s in session_segments(env, lost)] == [lost]
        assert {j.run_id: j.state for j in runs.jobs()}[live] == "pending"
    finally:
        workers.stop()
        runs.close()


# --------------------------------------------------------------------------- the soak


def test_runs_survive_sigkilled_workers_exactly_once(env: Env) -> None:
    n_runs, n_workers, n_kills = (200, 4, 12) if SOAK else (40, 3, 4)
    runs = env.runs
    prefix = f"soak-{random.getrandbits(32)}"
    rng = random.Random(11)
    workers = env.workers()
    for i in range(n_workers):
        workers.start(f"w{i}")
    started = time.monotonic()
    run_ids = [
        runs.submit("worker", f"job {i}", run_id=f"{prefix}-{i}", session_id=f"{prefix}-{i}") for i in range(n_runs)
    ]
    kills = {"pool process": 0, "whole worker": 0}
    requeued = restarts = 0
    try:
        deadline = started + (600 if SOAK else 240)
        while True:
            states = {j.run_id: j.state for j in runs.jobs() if j.run_id.startswith(prefix)}
            left = sum(states.get(r) != "done" for r in run_ids)
            if left == 0:
                break
            restarts += workers.check_alive()
            assert time.monotonic() < deadline, f"{left} runs left: " + workers.tail("w0")
            time.sleep(rng.uniform(0.3, 0.8))
            requeued += len(runs.sweep())
            ripe = [n for n, t in workers.born.items() if time.monotonic() - t > 2.0 and workers.children(n)]
            if sum(kills.values()) < n_kills and ripe and left > n_runs // 10:
                name = rng.choice(ripe)
                if rng.random() < 0.5 and workers.kill_child(name):
                    kills["pool process"] += 1
                else:
                    workers.kill_worker(name)
                    kills["whole worker"] += 1
        elapsed = time.monotonic() - started
    finally:
        workers.stop()

    total_kills = sum(kills.values())
    assert total_kills == n_kills, kills  # the killer really ran
    jobs = [j for j in runs.jobs() if j.run_id.startswith(prefix)]
    assert sorted(j.state for j in jobs) == ["done"] * n_runs
    fresh = dict(
        env.sql(
            "SELECT run_id, count(*) FROM completions WHERE run_id LIKE %s AND NOT replayed GROUP BY run_id",
            (prefix + "%",),
        )
    )
    # A delivery killed after the run finished but before its success was recorded leaves that run
    # with only replays (or, killed after the book update, no row): never with two fresh completions.
    assert set(fresh) <= set(run_ids) and set(fresh.values()) <= {1}, "a run completed twice"
    effects = env.sql("SELECT run_id, count(*) FROM effects WHERE run_id LIKE %s GROUP BY run_id", (prefix + "%",))
    assert dict(effects) == dict.fromkeys(run_ids, 3), "a side effect was applied twice (or not at all)"
    attempts = env.sql("SELECT count(*), count(DISTINCT key) FROM attempts WHERE run_id LIKE %s", (prefix + "%",))[0]
    reexecuted = attempts[0] - attempts[1]
    # A kill interrupts at most the one call in flight in that process: a call re-executed more
    # often than that means a completed result was run again.
    assert reexecuted <= total_kills, (attempts, kills)
    proc = runs.process()
    for run_id in run_ids:
        snapshot = proc.call(proc.checkpointer.load(run_id))
        assert (
            snapshot is not None
            and snapshot.status == "completed"
            and snapshot.output == f"job {run_id.rsplit('-', 1)[1]}: done"
        )
        segments = session_segments(env, run_id)
        assert [s.run_id for s in segments] == [run_id], f"{run_id}: {len(segments)} segments"
        entries = segments[0].entries
        calls = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
        results = [e.call_id for e in entries if isinstance(e, ToolResultEntry)]
        assert calls == results == ["c0", "c1", "c2"], (run_id, calls, results)
    deliveries = sum(j.deliveries for j in jobs)
    replays = env.sql("SELECT count(*) FROM completions WHERE run_id LIKE %s AND replayed", (prefix + "%",))[0][0]
    print(
        f"\ncelery soak: {n_runs} runs on {n_workers} workers, {total_kills} SIGKILLs "
        f"({kills['pool process']} pool process, {kills['whole worker']} whole worker) in {elapsed:.1f}s "
        f"= {n_runs / elapsed:.1f} runs/s; supervisor restarts {restarts}\n"
        f"  completed: {n_runs}/{n_runs} (checkpoint completed, one session segment); completed twice: 0; "
        f"finished by a replay after a kill: {n_runs - len(fresh)}; replayed deliveries {replays}; deliveries "
        f"{deliveries} "
        f"({deliveries - n_runs} redelivered or retried); sweeper re-enqueued {requeued}\n"
        f"  tool calls {attempts[1]} (3 per run), executions {attempts[0]} ({reexecuted} re-executed after a kill), "
        f"side effects applied {sum(c for _, c in effects)} (0 twice); session segments {n_runs} (0 duplicated)"
    )


def test_an_unreachable_database_is_retried_then_reported(env: Env) -> None:
    from celery import Celery
    from celery.signals import task_retry

    from lovia.exceptions import StoreError
    from lovia.integrations.celery import CeleryRuns

    from .celery_support import free_port

    app = Celery("unreachable", broker=env.broker)
    app.conf.task_always_eager = True  # the task body runs here; its retries run here too
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/test?connect_timeout=2"
    runs = CeleryRuns(app, db=dead, agents={"worker": env.module.worker_agent}, store_retries=2, sweep_every=None)
    retries: list[str] = []

    def count(request: Any = None, **_: Any) -> None:
        retries.append(request.id)

    task_retry.connect(count, weak=False)
    try:
        result = runs.run_task.apply(args=["no-such-run"], task_id="no-such-run")
        assert result.failed() and isinstance(result.result, StoreError), result.result
        assert "celery job book" in str(result.result) and result.result.hint
        assert retries == ["no-such-run", "no-such-run"]  # store_retries=2, then the error is the result
        with pytest.raises(StoreError):
            runs.submit("worker", "hi")  # a producer learns at once
    finally:
        task_retry.disconnect(count)
        runs.close()
