"""SQLite connection threads: one writer with group commit, one reader.

SQLite admits one writer at a time. Instead of every request taking an asyncio lock and then
making a dozen async round trips to a driver thread while holding SQLite's write lock, requests
hand a *sync* transaction function to this thread. The thread takes every job that is waiting,
runs them inside one ``BEGIN IMMEDIATE`` transaction, COMMITs once, and only then resolves each
job's future. A step is acknowledged after the COMMIT that contains it: group commit changes
throughput, not durability.

Faults. A job's own error (a conflict, a constraint) must cost only that job: the batch is then run
again with each job in its own SAVEPOINT. But on some errors — SQLITE_FULL and SQLITE_IOERR among
them — SQLite rolls the *whole* transaction back by itself, and a SAVEPOINT or COMMIT after that
would silently start or end a new one. So after every job the thread checks that its transaction
is still open. If a job's own statement ended it (a row that does not fit on a full disk), that job
fails with the fault and the rest of the batch runs again without it; if the connection is suspect
(I/O error), or a RELEASE, ROLLBACK TO or the COMMIT fails, no job of the batch is committed and every
one of them fails with the fault. A job counts as committed only after its savepoint is released
*and* the COMMIT succeeded; each future is resolved exactly once.

The file. SQLite keeps using the file it opened after it was deleted or replaced at its path (in WAL
mode it goes on committing into the unlinked inode), so each thread records the file's identity
(``st_dev``, ``st_ino``) when it connects and, before every COMMIT, checks that the path still names
that file — one ``stat`` per batch. If not, the batch fails (503) and the thread reopens. (Closing a
connection to a moved file does not delete the ``-wal``/``-shm`` files at the path: SQLite sees the
move and skips its checkpoint-on-close.) Only the first connect may create the file
(:class:`SqliteFile`): a missing file later is an outage, never a new empty database.

The connection is opened when the thread starts. If that fails (file unreachable) or the
connection turns bad (I/O error, file moved), the thread fails the jobs that arrive at once with
:class:`DatabaseUnavailable` and reconnects with backoff; it never dies, whatever a job raises. A
caller waits at most ``wait_s`` for its job: then 503, or — for a write that had already started —
:class:`DatabaseOutcomeUnknown` (it may still commit). A job whose caller gave up before it started
is never run. After :meth:`SqliteThread.close` every job, queued or new, is answered at once.

Reads use the same mechanism on a second thread and connection (``savepoints=False``, a plain
deferred transaction per batch): one thread hop per read instead of aiosqlite's one per cursor
call, and WAL lets it read while the writer writes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from service.db.errors import (
    DatabaseFault,
    DatabaseOutcomeUnknown,
    DatabaseUnavailable,
    FaultLog,
    describe,
    fault_from,
    io_error,
    needs_reopen,
)

log = logging.getLogger("service.db.writer")

T = TypeVar("T")
MAX_BATCH = 256
MAX_RERUNS = 8  # re-runs of one batch after jobs whose statements made SQLite end its transaction
RECONNECT_FIRST_S = 0.05  # backoff between connect attempts: doubles up to RECONNECT_MAX_S
RECONNECT_MAX_S = 2.0


class SqliteFile:
    """The database file a SQLite URL names, shared by the connection threads of one database.

    Only a connect before any succeeded may create it; once one has, connects open it read-write
    without creating it (:meth:`connect_uri`), so a deleted file answers 503 until it is back instead
    of being replaced by a new empty database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = False  # set by the first successful connect

    def identity(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) of the file the path names now (through symlinks), None if there is none."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def connect_uri(self) -> str | None:
        """The ``file:`` URI that opens the existing file without creating it, once it has been opened."""
        return f"file:{quote(str(self.path))}?mode=rw" if self.opened else None


@dataclass(slots=True)
class _Job:
    fn: Callable[[Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    started: bool = False  # set by the thread before it decides to run the job


Outcome = tuple[_Job, Any, BaseException | None]


class _JobFailed(Exception):
    """A job failed (or its transaction ended) in a batch run without savepoints: run it again with them."""


class _BatchAborted(Exception):
    """The batch's transaction ended before its COMMIT: nothing in it is committed. ``__cause__`` is
    the job error that ended it, if a job raised one; ``job`` the job under which it ended."""

    def __init__(self, job: _Job | None = None) -> None:
        super().__init__()
        self.job = job


class _CommitFailed(Exception):
    """The batch's COMMIT itself failed (``__cause__``): after an I/O error its outcome is unknown."""


class JobRaisedBaseException(RuntimeError):
    """A transaction function raised a BaseException that is not an Exception (it is the ``__cause__``):
    reported to its caller as an error instead of ending the connection thread or the caller's task."""


_TIMED_OUT = "the database wait bound ran out"


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.cancel(_TIMED_OUT)  # the thread skips a job whose future is done, if it has not started it


def _resolve(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        if future.done():  # its caller stopped waiting (timeout, cancelled)
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class SqliteThread:
    """Runs sync transaction functions on a dedicated thread and connection, many per transaction."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        savepoints: bool,
        faults: FaultLog | None = None,
        file: SqliteFile | None = None,
    ) -> None:
        """``savepoints``: isolate a failing job's writes (writers); readers need no isolation.
        ``file``: the database file to watch (None for an in-memory database)."""
        self.engine = engine
        self.name = name
        self.savepoints = savepoints
        self.faults = faults or FaultLog()
        self.file = file
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # None: stop
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()  # also orders submit() against close()
        self._closed = False
        self._first_attempt = threading.Event()
        self.connected = threading.Event()  # set while the thread holds an open connection
        self.last_error: BaseException | None = None  # why the last connect failed
        self._identity: tuple[int, int] | None = None  # of the file the open connection uses
        self._failing: str | None = None  # the fault the last batch failed with (logged once per spell)
        self._reopen = False
        self._busy_since: float | None = None  # monotonic start of the batch running now
        self.connects = 0  # successful connects (a reconnect changes it)
        self.batches = 0  # commits made (diagnostics and tests)
        self.jobs = 0

    def _ensure_started(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def start(self, timeout: float) -> bool:
        """Start the thread and wait (blocking) for its first connect; True if it is connected."""
        with self._start_lock:
            if self._closed:
                return False
            self._ensure_started()
        self._first_attempt.wait(timeout)
        return self.connected.is_set()

    def running_for(self) -> float:
        """How long the batch running now has been running (0 when the thread is idle)."""
        since = self._busy_since
        return 0.0 if since is None else time.monotonic() - since

    async def submit(self, fn: Callable[[Connection], T], wait_s: float | None = None) -> T:
        """Run ``fn(conn)`` inside a transaction; returns after the COMMIT that includes it.

        Raises :class:`DatabaseFault` when the database fails the job or it is not answered within
        ``wait_s`` seconds (None: no bound); a job not started by then is never run, a write that
        had started is answered :class:`DatabaseOutcomeUnknown`."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        job = _Job(fn, loop, future)
        with self._start_lock:  # uncontended: a few tens of nanoseconds
            if self._closed:
                raise DatabaseUnavailable(f"{self.name}: the database is closed (the service is stopping)")
            self._ensure_started()
            self._queue.put(job)
        if wait_s is None:
            return await future
        timer = loop.call_later(wait_s, _expire, future)  # cheaper than asyncio.timeout on the step path
        try:
            return await future
        except asyncio.CancelledError as exc:
            if exc.args != (_TIMED_OUT,):
                raise  # the caller itself was cancelled
            if job.started and self.savepoints:
                raise DatabaseOutcomeUnknown(
                    f"{self.name}: no answer within {wait_s:g}s, and the write had started (it may still commit)"
                ) from None
            raise DatabaseUnavailable(f"{self.name}: no answer within {wait_s:g}s") from None
        finally:
            timer.cancel()

    # ---- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        delay = RECONNECT_FIRST_S
        try:
            while True:
                try:
                    conn = self._connect()
                    self._first_attempt.set()
                    if conn is None:
                        if self._fail_arrivals(delay):
                            return
                        delay = min(delay * 2, RECONNECT_MAX_S)
                        continue
                except BaseException as exc:  # noqa: BLE001 - a bug here must not kill the thread
                    self.faults.failure(log, f"{self.name}: connection thread error, reconnecting", exc)
                    time.sleep(delay)
                    continue
                delay = RECONNECT_FIRST_S
                try:
                    stop = self._serve(conn)
                except BaseException as exc:  # noqa: BLE001 - a bug here must not kill the thread (callers are bounded by wait_s)
                    self.faults.failure(log, f"{self.name}: connection thread error, reopening", exc)
                    stop = False
                finally:
                    self.connected.clear()
                    self._busy_since = None
                    try:
                        conn.invalidate()  # closes the DB-API connection for good (no pool keeps it)
                        conn.close()
                    except Exception:  # noqa: BLE001 - it is being thrown away
                        pass
                    self._identity = None
                if stop:
                    return
        finally:
            self._drain("the connection thread stopped")

    def _connect(self) -> Connection | None:
        before = self.file.identity() if self.file is not None else None
        try:
            conn = self.engine.connect()  # opens the file and applies the pragmas (engine._configure_sqlite)
        except Exception as exc:  # noqa: BLE001 - reported to every job until a connect succeeds
            if self.last_error is None:
                log.warning(
                    "%s: cannot open the database (%s); failing its jobs with 503 and reconnecting with backoff",
                    self.name,
                    describe(exc),
                )
            self.last_error = exc
            return None
        if self.file is not None:
            identity = self.file.identity()
            if identity is None or (before is not None and identity != before):  # gone, or replaced while it was opened
                conn.invalidate()
                conn.close()
                self.last_error = DatabaseUnavailable(f"the database file {self.file.path} changed while it was opened")
                return None
            self._identity = identity
            self.file.opened = True
        if self.last_error is not None:
            log.warning("%s: connected again", self.name)
        self.last_error = None
        self.connects += 1
        self.connected.set()
        return conn

    def _fail_arrivals(self, delay: float) -> bool:
        """Until the next connect attempt, answer every job at once: the database cannot be opened.
        Returns True when asked to stop."""
        deadline = time.monotonic() + delay
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                job = self._queue.get(timeout=remaining)
            except queue.Empty:
                return False
            if job is None:
                return True
            reason = describe(self.last_error) if self.last_error is not None else "not connected"
            self._answer([(job, None, DatabaseUnavailable(f"{self.name}: cannot open the database: {reason}"))])
        return False

    def _drain(self, why: str) -> None:
        """Answer every job still queued (behind the stop sentinel, or after the thread stopped)."""
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                self._answer([(job, None, DatabaseUnavailable(f"{self.name}: {why} (the service is stopping)"))])

    def _serve(self, conn: Connection) -> bool:
        """Run batches until asked to stop (True) or the connection must be reopened (False)."""
        while True:
            first = self._queue.get()
            if first is None:
                return True
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(job)
            for job in batch:
                job.started = True  # before the check below: a caller that times out after it says "unknown"
            batch = [job for job in batch if not job.future.done()]  # its caller gave up: never run it
            if batch and not self._commit(conn, batch):
                return False

    def _commit(self, conn: Connection, batch: list[_Job]) -> bool:
        """Run, commit and answer one batch. False when the connection must be reopened."""
        self._reopen = False
        self._busy_since = time.monotonic()
        try:
            try:
                outcomes = self._attempt(conn, batch, isolate=False)
            except _JobFailed:
                # A job raised (or its transaction ended): run the batch again with each job in its
                # own SAVEPOINT, so a failed job rolls back alone. Jobs are pure functions of their
                # inputs and the database, so running them again is safe.
                outcomes = self._isolated(conn, batch)
        except BaseException as exc:  # noqa: BLE001 - BEGIN, RELEASE, ROLLBACK TO or COMMIT failed, or SQLite ended the transaction
            outcomes = self._fail_batch(batch, exc)
        else:
            if self._failing is not None and not self._reopen:
                log.warning("%s: the database works again", self.name)
                self._failing = None
        self.batches += 1
        self.jobs += len(batch)
        self._answer(outcomes)
        self._busy_since = None
        return not self._reopen

    def _isolated(self, conn: Connection, batch: list[_Job]) -> list[Outcome]:
        """The batch with savepoints. A job whose own statement made SQLite end the transaction (a row
        that does not fit on a full disk) fails alone: the others run again without it, in a new one."""
        dropped: list[Outcome] = []
        cause: BaseException | None = None
        for _ in range(MAX_RERUNS):
            try:
                return dropped + self._attempt(conn, batch, isolate=True)
            except _BatchAborted as exc:
                cause = exc.__cause__
                if exc.job is None or self._reopen or (cause is not None and needs_reopen(cause)):
                    raise  # not one job's doing, or the connection is suspect: the whole batch fails
                fault = fault_from(cause) if cause is not None else None
                if fault is None:
                    fault = DatabaseUnavailable(
                        f"{self.name}: the transaction ended under a job"
                        + (f": {describe(cause)}" if cause is not None else "")
                    )
                    fault.__cause__ = cause
                dropped.append((exc.job, None, fault))
                batch = [job for job in batch if job is not exc.job]
                if not batch:
                    return dropped
        raise _BatchAborted from cause  # jobs keep ending the transaction: fail the rest

    def _fail_batch(self, batch: list[_Job], exc: BaseException) -> list[Outcome]:
        """Nothing in the batch is committed — or, when its COMMIT failed with an I/O error, nobody can know
        (an ``fsync`` that failed after the WAL frames were written: the next open may replay them): every
        job fails with the fault (a new exception each), :class:`DatabaseOutcomeUnknown` in that case."""
        at_commit = isinstance(exc, _CommitFailed)
        cause = exc.__cause__ if isinstance(exc, _BatchAborted | _CommitFailed) and exc.__cause__ is not None else exc
        if needs_reopen(cause):
            self._reopen = True
        probe = fault_from(cause)
        if probe is None:  # not a known fault: log it (rate-limited traceback) and answer "retry"
            self.faults.failure(log, f"{self.name}: batch of {len(batch)} failed", exc)
            kind: type[DatabaseFault] = DatabaseUnavailable
            reason = f"the transaction failed: {describe(cause)}"
        else:
            kind, reason = type(probe), probe.reason
            if self._failing != kind.__name__:
                log.warning(
                    "%s: %s (%s); its batches fail as %s until it recovers",
                    self.name,
                    kind.title.lower(),
                    reason,
                    kind.slug,
                )
                self._failing = kind.__name__
        if isinstance(exc, _BatchAborted):
            reason = f"SQLite rolled the batch's transaction back: {reason}"
        if at_commit and io_error(cause) and self.savepoints:
            kind, reason = DatabaseOutcomeUnknown, f"the COMMIT failed with an I/O error, it may be applied: {reason}"
        outcomes: list[Outcome] = []
        for job in batch:
            fault = kind(reason)
            fault.__cause__ = cause
            outcomes.append((job, None, fault))
        return outcomes

    def _job_error(self, exc: BaseException) -> BaseException:
        """A job's own error, reported to its caller: a fault if it is one (503/507), else as it is."""
        if needs_reopen(exc):
            self._reopen = True
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit, CancelledError raised by the job
            error = JobRaisedBaseException(f"the transaction function raised {type(exc).__name__}")
            error.__cause__ = exc
            return error
        return fault_from(exc) or exc

    def _check_file(self) -> None:
        """Before a COMMIT: the path still names the file this connection has open (one stat)."""
        if self.file is not None and self.file.identity() != self._identity:
            self._reopen = True
            raise DatabaseUnavailable(
                f"{self.name}: the database file {self.file.path} was deleted or replaced; reopening"
            )

    def _attempt(self, conn: Connection, batch: list[_Job], isolate: bool) -> list[Outcome]:
        """One transaction over the batch. Fast path (no savepoints): the first job error, or a
        transaction that ended under a job, aborts it with :class:`_JobFailed`; with ``isolate`` each
        job has a SAVEPOINT and a transaction that ended aborts it with :class:`_BatchAborted`."""
        raw = conn.connection.dbapi_connection
        check = self.savepoints  # readers write nothing: a read needs no open transaction to be right
        outcomes: list[Outcome] = []
        transaction = conn.begin()  # the engine decides BEGIN IMMEDIATE or DEFERRED (engine._configure_sqlite)
        try:
            for job in batch:
                if not isolate:
                    try:
                        result = job.fn(conn)
                    except BaseException as exc:
                        if check:
                            raise _JobFailed from exc
                        outcomes.append((job, None, self._job_error(exc)))
                        continue
                    if check and not raw.in_transaction:  # type: ignore[union-attr]
                        raise _JobFailed  # a job swallowed the error that ended the transaction
                    outcomes.append((job, result, None))
                    continue
                savepoint = conn.begin_nested()
                try:
                    result = job.fn(conn)
                except BaseException as exc:
                    if not raw.in_transaction:  # type: ignore[union-attr]
                        raise _BatchAborted(job) from exc
                    savepoint.rollback()  # ROLLBACK TO: only this job's writes
                    outcomes.append((job, None, self._job_error(exc)))
                    continue
                if not raw.in_transaction:  # type: ignore[union-attr]
                    raise _BatchAborted(job)
                savepoint.commit()  # RELEASE
                outcomes.append((job, result, None))
            if check and not raw.in_transaction:  # type: ignore[union-attr]
                raise _BatchAborted  # (pysqlite's commit() would silently do nothing)
            self._check_file()
            try:
                transaction.commit()
            except Exception as exc:
                raise _CommitFailed from exc
        except BaseException:
            self._rollback(conn, transaction)
            raise
        return outcomes

    def _rollback(self, conn: Connection, transaction: Any) -> None:
        """Leave no transaction open, whatever state the failure left (SQLite may have ended it)."""
        try:
            transaction.rollback()  # also after a failed COMMIT: SQLAlchemy keeps that transaction until rolled back
        except Exception:  # noqa: BLE001 - the DB-API rollback below decides
            pass
        try:
            raw = conn.connection.dbapi_connection
            if raw is not None and raw.in_transaction:
                raw.rollback()
        except Exception:  # noqa: BLE001 - the connection is in an unknown state: reopen it
            self._reopen = True

    def _answer(self, outcomes: list[Outcome]) -> None:
        """Resolve every job once; one wake-up per event loop for the whole batch, not one per job."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for job, result, error in outcomes:
            by_loop.setdefault(job.loop, []).append((job.future, result, error))
        for loop, resolved in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, resolved)
            except RuntimeError:  # that event loop is closed: nobody is waiting any more
                pass

    def close(self) -> None:
        """Stop the thread after the jobs queued before now; every job after that is answered 503 at once."""
        with self._start_lock:
            self._closed = True
            thread, self._thread = self._thread, None
            self._queue.put(None)
        if thread is not None:
            thread.join(timeout=10)
        self._drain("the database was closed")
