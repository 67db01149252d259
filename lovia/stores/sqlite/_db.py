"""Internal: one SQLite connection per store, driven by one dedicated worker thread.

The event loop never touches SQLite: every statement runs on the store's own worker thread, which
also serialises the store's writes without any lock. Measured against ``asyncio.to_thread`` with a
locked shared connection in ``bench/session_store.py``.

The worker is a plain daemon thread fed through a ``queue.SimpleQueue``, not a
``ThreadPoolExecutor``: a store collected by the garbage collector must be able to stop its
thread from inside a finalizer, and ``SimpleQueue.put`` is safe there, whereas
``executor.submit`` takes a process-wide lock that the collector may already hold (a
deadlock seen in the test suite).

Durability (set once per connection in :func:`configure`):

* default journal (``wal=False``): rollback journal, ``synchronous=FULL`` — a committed write
  survives a process crash *and* an OS crash or power loss.
* ``wal=True``: ``journal_mode=WAL``, ``synchronous=NORMAL`` — a committed write survives a process
  crash; after an OS crash or power loss the last few commits may be rolled back, but the file is
  never corrupted. Readers never block the writer.

Both modes set ``busy_timeout=5000`` so a writer waits up to 5 s for another connection's lock,
and every write opens with ``BEGIN IMMEDIATE`` so it takes the write lock up front (a deferred
transaction that upgrades from read to write can fail with "database is locked" under WAL
without ever waiting).
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ...exceptions import LoviaError, StoreError
from ._schema import Component, ensure_schema

__all__ = ["Database", "configure", "read", "write"]

T = TypeVar("T")
BUSY_TIMEOUT_MS = 5000


def configure(conn: sqlite3.Connection, *, wal: bool) -> None:
    """Set this connection's pragmas (outside any transaction): the only place they are chosen."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if wal:
        _enable_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
    else:
        conn.execute("PRAGMA synchronous = FULL")


def _enable_wal(conn: sqlite3.Connection) -> None:
    # Switching a file to WAL needs an exclusive lock and SQLite does not always run the busy
    # handler for it, so a store opening while another connection writes must retry by hand.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taking the write lock up front; rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


@contextmanager
def read(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction, so several SELECTs see one consistent state."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.rollback()


Job = tuple[Callable[[sqlite3.Connection], object], asyncio.AbstractEventLoop, "asyncio.Future[object]"]


def _settle(fut: asyncio.Future[object], ok: bool, value: object) -> None:
    if fut.done():  # the caller was cancelled meanwhile
        return
    if ok:
        fut.set_result(value)
    else:
        assert isinstance(value, BaseException)
        fut.set_exception(value)


def _close(conn: sqlite3.Connection) -> None:
    """Marker job: close the connection without opening it first."""


class _Worker:
    """The thread and connection of one store; stopped explicitly or when the store is collected."""

    def __init__(self, path: str, wal: bool, component: Component) -> None:
        self.path = path
        self.wal = wal
        self.component = component
        self.conn: sqlite3.Connection | None = None
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, job: Job) -> None:
        """Queue one job (starting the thread on first use)."""
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    # Daemon: a store nobody closed must not keep the interpreter from exiting.
                    self._thread = threading.Thread(target=self._serve, name="lovia-sqlite", daemon=True)
                    self._thread.start()
        self.jobs.put(job)

    def _serve(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                self.close_connection()
                return
            fn, loop, fut = job
            try:
                if fn is _close:
                    self.close_connection()
                    outcome: tuple[bool, object] = (True, None)
                else:
                    outcome = (True, self.call(fn))
            except BaseException as exc:  # handed to the awaiting coroutine, never lost
                outcome = (False, exc)
            try:
                loop.call_soon_threadsafe(_settle, fut, *outcome)
            except RuntimeError:  # that event loop is closed: nobody is waiting any more
                pass

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            if self.conn is None:
                self.conn = self._open()
            return fn(self.conn)
        except LoviaError:
            raise
        except sqlite3.Error as exc:
            raise StoreError(
                f"SQLite error on {self.path}: {exc}",
                hint="check that the file is a lovia database, writable, and not on a network filesystem",
            ) from exc

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path}: {exc}", hint="check the path and its permissions") from exc
        try:
            configure(conn, wal=self.wal)
            ensure_schema(conn, self.component, path=self.path)
        except BaseException:
            conn.close()
            raise
        return conn

    def close_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def shutdown(self) -> None:
        """Ask the thread to close the connection and stop (safe inside a GC finalizer)."""
        self.jobs.put(None)


class Database:
    """A store's handle on one SQLite file: ``await db.run(fn)`` runs ``fn(conn)`` on the worker."""

    def __init__(self, path: str | os.PathLike[str], *, wal: bool, component: Component) -> None:
        self.path = os.fspath(path)
        self.wal = wal
        self._worker = _Worker(self.path, wal, component)
        self._finalizer = weakref.finalize(self, self._worker.shutdown)
        self._closed = False

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` with the connection on the worker thread (the file is opened and migrated on first use)."""
        if self._closed:
            raise StoreError(f"store for {self.path} is closed", hint="create a new store object")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[object] = loop.create_future()
        self._worker.submit((fn, loop, fut))
        return await fut  # type: ignore[return-value]

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[object] = loop.create_future()
        self._worker.submit((_close, loop, fut))
        await fut
        self._finalizer()
