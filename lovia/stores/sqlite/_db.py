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

* default journal (``wal=False``): rollback journal in ``PERSIST`` mode, ``synchronous=FULL`` — a
  committed write survives a process crash *and* an OS crash or power loss. ``PERSIST`` (the
  journal file stays, its header zeroed after each commit) measured 0.6x the cost of ``DELETE``
  per append in ``bench/journal_modes.py``, with the same guarantees; a file already in WAL mode
  (set by another writer) is left in WAL mode.
* ``wal=True``: ``journal_mode=WAL``, ``synchronous=NORMAL`` — a committed write survives a process
  crash; after an OS crash or power loss the last few commits may be rolled back, but the file is
  never corrupted. Readers never block the writer.

Both modes set ``busy_timeout=5000`` so a writer waits up to 5 s for another connection's lock,
and every write opens with ``BEGIN IMMEDIATE`` so it takes the write lock up front (a deferred
transaction that upgrades from read to write can fail with "database is locked" under WAL
without ever waiting).

The WAL fast path (:meth:`Database.write`): under WAL with ``synchronous=NORMAL`` a commit appends
pages to the log and never waits for the disk, so the thread hop (tens of microseconds of wake-ups)
would cost several times the commit itself. Short write transactions (a checkpoint save, a session
append) therefore run on the calling thread through a second connection whose ``busy_timeout`` is
0 and whose automatic checkpointing is off: it takes the write lock only when it is free, and
otherwise the transaction goes to the worker thread, which waits for the lock as usual. The
calling thread thus never waits on a lock or an ``fsync``; WAL checkpoints (which do sync) run on
the worker thread. The default journal syncs on every commit and always uses the worker.
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

from ..._guard import store_hint, unencodable_key
from ...exceptions import LoviaError, StoreError
from ._schema import Component, ensure_schema

__all__ = ["RETRY_DELAYS", "Database", "SQLiteOperationalError", "configure", "read", "transient", "write"]

T = TypeVar("T")
BUSY_TIMEOUT_MS = 5000
# Fast-path commits between two WAL checkpoints run on the worker: SQLite's own automatic
# checkpoint fires at 1,000 log pages, and one small save writes two or three pages.
CHECKPOINT_EVERY = 400
# Larger writes go to the worker even under WAL: copying them into the log is no longer negligible.
FAST_MAX_BYTES = 64 * 1024


def configure(conn: sqlite3.Connection, *, wal: bool) -> None:
    """Set this connection's pragmas (outside any transaction): the only place they are chosen."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if wal:
        _enable_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
    else:
        # PERSIST retires the journal by zeroing its header instead of deleting the file: one
        # directory update less per commit, equally durable (bench/journal_modes.py measures it).
        # A file another connection put in WAL mode stays in WAL mode.
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "delete":
            conn.execute("PRAGMA journal_mode = PERSIST")
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


def _checkpoint(conn: sqlite3.Connection) -> None:
    """Marker job: fold the WAL into the database file (PASSIVE: never waits for readers or writers)."""


class _Busy(Exception):
    """The fast path found the write lock taken."""


class _FastWriter:
    """The WAL fast path's connection: never waits for a lock, never checkpoints (see the module docstring)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        # Held while the connection is in use: a store shared by threads running their own event
        # loops takes turns, and a second concurrent caller simply goes to the worker instead.
        self.lock = threading.Lock()
        self.commits = 0

    def attempt(self, fn: Callable[[sqlite3.Connection], T], path: str) -> T:
        """Run ``fn`` now; raises :class:`_Busy` (nothing written) when the write lock is taken."""
        conn = self.conn
        try:
            result = fn(conn)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.rollback()
            if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
                raise _Busy from exc
            if transient(exc):  # the worker retries it
                raise _Busy from exc
            raise _store_error(path, exc) from exc
        except BaseException as exc:
            if conn.in_transaction:
                conn.rollback()
            if isinstance(exc, UnicodeEncodeError):
                raise unencodable_key(exc) from exc
            raise
        self.commits += 1
        return result


class SQLiteOperationalError(StoreError, sqlite3.OperationalError):
    """A store's :class:`StoreError` for a ``sqlite3.OperationalError``, and that error too.

    Code written for lovia 0.9.119 catches ``sqlite3.OperationalError`` around a SQLite store; it
    still catches these, with the hint and the store's message. ``sqlite_errorcode`` and
    ``sqlite_errorname`` are the original error's.
    """


# Transient failures (another process holds the lock past the busy timeout, the file or its
# journal cannot be opened for a moment): retried after each of these pauses, then once more.
RETRY_DELAYS = (0.05, 0.2, 0.5)
_TRANSIENT = ("unable to open database file", "database is locked")


def transient(exc: BaseException) -> bool:
    """Whether a failed statement is worth retrying (any other error propagates at once)."""
    return isinstance(exc, sqlite3.OperationalError) and any(t in str(exc) for t in _TRANSIENT)


def _store_error(path: str, exc: sqlite3.Error, *, doing: str = "SQLite error on") -> StoreError:
    message = f"{doing} {path}: {exc}"
    default = "check the path and its permissions, that the file is a lovia database, and not on a network filesystem"
    if not isinstance(exc, sqlite3.OperationalError):
        return StoreError(message, hint=store_hint(exc, default))
    error = SQLiteOperationalError(message, hint=store_hint(exc, default))
    error.sqlite_errorcode = getattr(exc, "sqlite_errorcode", None)  # type: ignore[attr-defined]
    error.sqlite_errorname = getattr(exc, "sqlite_errorname", None)  # type: ignore[attr-defined]
    return error


class _Worker:
    """The thread and connection of one store; stopped explicitly or when the store is collected."""

    def __init__(self, path: str, wal: bool, component: Component) -> None:
        self.path = path
        self.wal = wal
        self.component = component
        self.conn: sqlite3.Connection | None = None
        self.fast: _FastWriter | None = None  # opened beside ``conn`` under WAL
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
                elif fn is _checkpoint:
                    outcome = (
                        True,
                        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall() if self.conn else None,
                    )
                else:
                    outcome = (True, self.call(fn))
            except BaseException as exc:  # handed to the awaiting coroutine, never lost
                outcome = (False, exc)
            try:
                loop.call_soon_threadsafe(_settle, fut, *outcome)
            except RuntimeError:  # that event loop is closed: nobody is waiting any more
                pass
            # Hold nothing of this job while waiting for the next one: a load's result would
            # otherwise stay alive here (and be freed in the middle of the next job).
            job = fn = loop = fut = outcome = None  # type: ignore[assignment]

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` (opening the file first if needed); a transient failure is retried (``RETRY_DELAYS``)."""
        for delay in (*RETRY_DELAYS, None):
            opening = self.conn is None
            try:
                if self.conn is None:
                    self.conn = self._open()
                return fn(self.conn)
            except LoviaError:
                raise
            except sqlite3.Error as exc:
                if delay is None or not transient(exc):
                    doing = "cannot open SQLite database" if opening else "SQLite error on"
                    raise _store_error(self.path, exc, doing=doing) from exc
                if self.conn is not None and self.conn.in_transaction:  # a retry starts clean
                    self.conn.rollback()
            except UnicodeEncodeError as exc:  # content is cleaned before this point: only a key can hold it
                raise unencodable_key(exc) from exc
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            configure(conn, wal=self.wal)
            ensure_schema(conn, self.component, path=self.path)
            if self.wal:
                self.fast = _FastWriter(self._open_fast())
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_fast(self) -> sqlite3.Connection:
        # check_same_thread=False: the connection is used on the callers' threads, one at a time
        # (under _FastWriter.lock), and closed here.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        return conn

    def close_connection(self) -> None:
        fast, self.fast = self.fast, None
        if fast is not None:
            with fast.lock:  # let a caller's transaction on it finish first
                fast.conn.close()
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

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, size: int) -> T:
        """Run the write transaction ``fn(conn)`` of about ``size`` bytes: under WAL and when small,
        on this thread if the write lock is free (the module docstring says why), otherwise on the
        worker like :meth:`run`.

        ``fn`` must commit what it writes (``with write(conn):``) and must not wait on anything.
        """
        fast = self._worker.fast
        if fast is not None and size <= FAST_MAX_BYTES and not self._closed and fast.lock.acquire(blocking=False):
            try:
                if self._worker.fast is fast:  # not closed meanwhile by another thread
                    result = fast.attempt(fn, self.path)
                    if fast.commits % CHECKPOINT_EVERY == 0:
                        self._checkpoint_soon()
                    return result
            except _Busy:
                pass
            finally:
                fast.lock.release()
        return await self.run(fn)

    def _checkpoint_soon(self) -> None:
        """Queue a WAL checkpoint on the worker without waiting for it."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[object] = loop.create_future()
        fut.add_done_callback(_ignore_outcome)
        self._worker.submit((_checkpoint, loop, fut))

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


def _ignore_outcome(fut: asyncio.Future[object]) -> None:
    # A failed background checkpoint is harmless (the next one, or SQLite's, folds the log).
    if not fut.cancelled():
        fut.exception()
