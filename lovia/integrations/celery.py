"""Background runs on Celery that survive a killed worker (``pip install 'lovia[celery]'``).

:class:`CeleryRuns` registers two tasks on your Celery app:

* ``<name>.run(run_id)`` runs one booked job as a leased, checkpointed run. It is safe to deliver
  any number of times: a completed run replays its stored result, an interrupted one resumes from
  its checkpoint, and a run another worker is driving right now is refused by its lease
  (:class:`~lovia.exceptions.RunBusy`) and retried once that lease could have expired. The task is
  ``acks_late`` with ``reject_on_worker_lost``: a worker killed mid-run never acknowledged its
  message, so the broker hands the run to another worker.
* ``<name>.sweep()`` re-enqueues pending jobs that nobody is driving (no live lease) and that have
  seen no message for ``sweep_after`` seconds: the safety net for a message the broker lost.

What to run is kept in a job book (one table next to the stores), so a message carries only the
``run_id``. Agents are named by a registry given on both sides: ``agents={"support": support}``
where a value is an :class:`~lovia.Agent` or an import path ``"package.module:attribute"``
(imported on first use in the worker, so a producer need not import agent code). A message can
only name an agent of that registry: the broker never decides what code a worker imports.

Internal layout: one event loop thread per worker process (created after the fork, on the first
task) owns the stores and runs the agents; task bodies hand it coroutines and wait.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import random
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..agent import Agent
from ..checkpointer import CheckpointOptions
from ..exceptions import LeaseLostError, LoviaError, RunBusy, StoreError, UserError
from ..runner import Runner
from ._jobs import Job, JobBook, is_postgres, open_book

__all__ = ["CeleryRuns", "Job"]

T = TypeVar("T")


def _require_celery() -> None:
    try:
        import celery  # noqa: F401
    except ImportError as exc:
        raise UserError("lovia.integrations.celery needs Celery", hint="pip install 'lovia[celery]'") from exc


def _import_agent(name: str, path: str) -> Agent[Any]:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"agent {name!r}: {path!r} is not 'module:attribute'", hint="e.g. 'myapp.agents:support'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(
            f"agent {name!r}: cannot import {module_name!r}: {exc}",
            hint="the module must be importable in the worker (installed, or on PYTHONPATH)",
        ) from exc
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not isinstance(target, Agent):
        raise UserError(
            f"agent {name!r}: {path!r} is {type(target).__name__}, not an Agent",
            hint="point the registry entry at a module-level Agent",
        )
    return target


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        dump = getattr(value, "model_dump", None)
        return dump(mode="json") if callable(dump) else str(value)


def _check_config(db: Any, agents: Any, *, lease_ttl: Any, sweep_after: Any) -> None:
    """Refuse a bad ``CeleryRuns`` configuration at construction, with the fix in the hint."""
    if not isinstance(db, str) or not db:
        raise UserError("db must be a PostgreSQL URL or a SQLite file path", hint="db='postgresql://user@host/app'")
    if not isinstance(agents, Mapping) or not agents:
        raise UserError("agents must be a non-empty mapping", hint="agents={'support': support_agent}")
    for key, value in agents.items():
        if not isinstance(key, str) or not key or not isinstance(value, (Agent, str)):
            raise UserError(
                f"agents entry {key!r} must map a name to an Agent or a 'module:attribute' string",
                hint="agents={'support': 'myapp.agents:support'}",
            )
    for label, number in (("lease_ttl", lease_ttl), ("sweep_after", sweep_after)):
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number <= 0:
            raise UserError(f"{label} must be a positive number of seconds, got {number!r}", hint="e.g. 30")


@dataclass
class _Process:
    """One worker process's loop thread, stores and resolved agents (never shared across a fork)."""

    pid: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    session: Any
    checkpointer: Any
    book: JobBook
    deps: Any
    agents: dict[str, Agent[Any]] = field(default_factory=dict)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class CeleryRuns:
    """Run lovia agents as Celery tasks, by ``run_id``, on shared stores.

    Args:
        app: your ``celery.Celery`` application.
        db: where sessions, checkpoints and the job book live: a PostgreSQL URL
            (``"postgresql://user@host/db"``) for workers on many hosts, or a SQLite file path
            (opened with ``wal=True``; one host only).
        agents: the registry ``{name: Agent or "module:attribute"}``; ``submit`` names one of these.
        schema: PostgreSQL schema for all tables (default: the search path).
        lease_ttl: seconds a worker's lease on a run lasts without renewal; a dead worker's run
            can be taken over this long after its last renewal.
        deps: a zero-argument factory called once per worker process; its value is every run's
            ``context`` (``ctx.deps``), e.g. an HTTP client.
        max_turns: turn limit of each run.
        pool_size: connections per store per worker process (PostgreSQL).
        sweep_every: seconds between sweeps when Celery beat runs (``None``: no beat entry).
        sweep_after: a pending job with no live lease and no message for this long is re-enqueued.
        busy_retries: how often a delivery refused by a live lease (or whose lease was lost) is
            retried before the task gives up (the sweeper still covers the run).
        store_retries: retries, with exponential backoff, when a store is unreachable.
        name: prefix of the task names (``"<name>.run"``, ``"<name>.sweep"``).
    """

    def __init__(
        self,
        app: Any,
        *,
        db: str,
        agents: Mapping[str, Agent[Any] | str],
        schema: str | None = None,
        lease_ttl: float = 30.0,
        deps: Callable[[], Any] | None = None,
        max_turns: int = 50,
        pool_size: int = 4,
        sweep_every: float | None = 60.0,
        sweep_after: float = 300.0,
        busy_retries: int = 20,
        store_retries: int = 5,
        name: str = "lovia",
    ) -> None:
        _require_celery()
        _check_config(db, agents, lease_ttl=lease_ttl, sweep_after=sweep_after)
        self.app = app
        self.db = db
        self.schema = schema
        self.agents = dict(agents)
        self.lease_ttl = float(lease_ttl)
        self.sweep_after = float(sweep_after)
        self.max_turns = max_turns
        self.pool_size = pool_size
        self.busy_retries = busy_retries
        self.store_retries = store_retries
        self._deps = deps
        self._local: _Process | None = None
        self._lock = threading.Lock()

        self._register(name, sweep_every=sweep_every, max_retries=max(busy_retries, store_retries))

    def _register(self, name: str, *, sweep_every: float | None, max_retries: int) -> None:
        def run(task: Any, run_id: str) -> dict[str, Any]:
            return self._run_task(task, run_id)

        def sweep() -> list[str]:
            return self.sweep()

        app = self.app
        self.run_task = app.task(
            name=f"{name}.run", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=max_retries
        )(run)
        """The Celery task ``<name>.run(run_id)``."""
        self.sweep_task = app.task(name=f"{name}.sweep", ignore_result=True)(sweep)
        """The Celery task ``<name>.sweep()``."""
        if sweep_every is not None:
            schedule = dict(app.conf.beat_schedule or {})
            schedule[f"{name}.sweep"] = {
                "task": f"{name}.sweep",
                "schedule": float(sweep_every),
                "options": {"expires": float(sweep_every)},  # a missed sweep is dropped, not piled up
            }
            app.conf.beat_schedule = schedule

    # ------------------------------------------------------------------ producer side

    def submit(self, agent: str, input: str, *, session_id: str | None = None, run_id: str | None = None) -> str:
        """Book a run and enqueue it; returns its ``run_id`` (also the Celery task id).

        Submitting an existing ``run_id`` again with the same agent and input re-issues it (a
        completed run replays, an interrupted one resumes); with a different agent, input or
        session it is refused.
        """
        if agent not in self.agents:
            raise UserError(
                f"no agent {agent!r} in this CeleryRuns registry",
                hint=f"use one of {', '.join(repr(a) for a in self.agents)}",
            )
        if not isinstance(input, str):
            raise UserError("input must be a string (the user's message)", hint="keep conversation in a session")
        run_id = run_id or uuid.uuid4().hex
        book = self.process().book
        if not book.add(run_id, agent, input, session_id):
            job = book.get(run_id)
            if job is not None and (job.agent, job.input, job.session_id) != (agent, input, session_id):
                raise UserError(
                    f"run_id {run_id!r} is already booked for agent {job.agent!r} with other input or session",
                    hint="generate a new run_id for a new job; re-submit an id only to re-issue the same job",
                )
        self.enqueue(run_id)
        return run_id

    def enqueue(self, run_id: str) -> None:
        """Publish a message for a booked run (what ``submit`` and the sweeper do)."""
        self.run_task.apply_async(args=[run_id], task_id=run_id)

    def jobs(self) -> list[Job]:
        """Every booked job, oldest first."""
        return self.process().book.jobs()

    def sweep(self, limit: int = 500) -> list[str]:
        """Re-enqueue pending jobs with no live lease and no message for ``sweep_after`` seconds."""
        proc = self.process()
        stale = proc.book.stale(quiet_for=self.sweep_after, limit=limit)
        if not stale:
            return []
        live = {lease.run_id for lease in proc.call(proc.checkpointer.live_leases())}
        requeued = []
        for job in stale:
            if job.run_id not in live:
                proc.book.requeued(job.run_id)
                self.enqueue(job.run_id)
                requeued.append(job.run_id)
        return requeued

    # ------------------------------------------------------------------ worker side

    def process(self) -> _Process:
        """This process's loop thread and stores (made on first use, again after a fork)."""
        local = self._local
        if local is not None and local.pid == os.getpid():
            return local
        with self._lock:
            if self._local is None or self._local.pid != os.getpid():
                self._local = self._start_process()
            return self._local

    def _start_process(self) -> _Process:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="lovia-celery-loop", daemon=True)
        thread.start()
        if is_postgres(self.db):
            from ..stores import PostgresCheckpointer, PostgresSession

            size = self.pool_size
            session: Any = PostgresSession(self.db, schema=self.schema, min_size=1, max_size=size)
            checkpointer: Any = PostgresCheckpointer(self.db, schema=self.schema, min_size=1, max_size=size)
        else:
            from ..stores import SQLiteCheckpointer, SQLiteSession

            session, checkpointer = SQLiteSession(self.db, wal=True), SQLiteCheckpointer(self.db, wal=True)
        book = open_book(self.db, schema=self.schema)
        deps = self._deps() if self._deps is not None else None
        return _Process(os.getpid(), loop, thread, session, checkpointer, book, deps)

    def agent(self, name: str) -> Agent[Any]:
        """The registry's agent ``name``, importing it on first use in this process."""
        proc = self.process()
        found = proc.agents.get(name)
        if found is None:
            entry = self.agents.get(name)
            if entry is None:
                raise UserError(
                    f"no agent {name!r} in this worker's registry", hint="deploy the same registry everywhere"
                )
            found = entry if isinstance(entry, Agent) else _import_agent(name, entry)
            proc.agents[name] = found
        return found

    def _run_task(self, task: Any, run_id: str) -> dict[str, Any]:
        """The task body: drive the run, and map lease and store trouble to Celery retries."""
        try:
            return self._drive(run_id)
        except RunBusy as exc:
            # Someone else drives it: come back when the lease could have run out, and replay.
            wait = (exc.expires_in or self.lease_ttl) + random.uniform(0.1, 1.0)
            raise task.retry(exc=exc, countdown=wait, max_retries=self.busy_retries) from exc
        except LeaseLostError as exc:
            raise task.retry(exc=exc, countdown=self.lease_ttl, max_retries=self.busy_retries) from exc
        except StoreError as exc:  # the book or a store is unreachable (before or during the run)
            wait = min(2.0**task.request.retries, 60.0) * random.uniform(0.5, 1.0)
            raise task.retry(exc=exc, countdown=wait, max_retries=self.store_retries) from exc

    def _drive(self, run_id: str) -> dict[str, Any]:
        proc = self.process()
        job = proc.book.get(run_id)
        if job is None:
            raise UserError(
                f"no booked job {run_id!r}", hint="submit runs with CeleryRuns.submit, not the task directly"
            )
        proc.book.delivered(run_id)
        agent = self.agent(job.agent)
        options = CheckpointOptions(proc.checkpointer, run_id, lease_ttl=self.lease_ttl)
        try:
            result = proc.call(
                Runner.run(
                    agent,
                    job.input,
                    context=proc.deps,
                    max_turns=self.max_turns,
                    session=proc.session if job.session_id is not None else None,
                    session_id=job.session_id,
                    checkpoint=options,
                )
            )
        except (RunBusy, StoreError):
            raise  # not the run's own failure: retried by the caller
        except LoviaError:
            proc.book.finish(run_id, "failed")
            raise
        proc.book.finish(run_id, "done")
        return {
            "run_id": run_id,
            "output": _jsonable(result.output),
            "replayed": result.replayed,
            "turns": result.turns,
        }

    def close(self) -> None:
        """Close this process's stores, job book and ``deps`` value (if it has ``close()``) and stop its loop."""
        with self._lock:
            proc, self._local = self._local, None
        if proc is None or proc.pid != os.getpid():
            return
        try:
            proc.call(proc.session.close())
            proc.call(proc.checkpointer.close())
            proc.book.close()
            closer = getattr(proc.deps, "close", None)
            if callable(closer):
                closer()
        finally:
            proc.loop.call_soon_threadsafe(proc.loop.stop)
            proc.thread.join(timeout=10)
            proc.loop.close()
