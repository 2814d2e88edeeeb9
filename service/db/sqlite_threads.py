"""SQLite connection threads: one writer with group commit, one reader.

SQLite admits one writer at a time. Instead of every request taking an asyncio lock and then
making a dozen async round trips to a driver thread while holding SQLite's write lock, requests
hand a *sync* transaction function to this thread. The thread takes every job that is waiting,
runs them inside one ``BEGIN IMMEDIATE`` transaction (each job in its own SAVEPOINT, so one job's
error rolls back only that job), COMMITs once, and only then resolves each job's future. A step
is acknowledged after the COMMIT that contains it: group commit changes throughput, not
durability.

Reads use the same mechanism on a second thread and connection (``savepoints=False``, a plain
deferred transaction per batch): one thread hop per read instead of aiosqlite's one per cursor
call, and WAL lets it read while the writer writes.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

log = logging.getLogger("service.db.writer")

T = TypeVar("T")
MAX_BATCH = 256


@dataclass
class _Job:
    fn: Callable[[Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


class _JobFailed(Exception):
    """A job raised inside a batch run without savepoints."""


def _resolve(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        if future.cancelled():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class SqliteThread:
    """Runs sync transaction functions on a dedicated thread and connection, many per transaction."""

    def __init__(self, engine: Engine, name: str, savepoints: bool) -> None:
        """``savepoints``: isolate a failing job's writes (writers); readers need no isolation."""
        self.engine = engine
        self.name = name
        self.savepoints = savepoints
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.batches = 0  # commits made (diagnostics and tests)
        self.jobs = 0

    def _ensure_started(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                    self._thread.start()

    async def submit(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` inside a write transaction; returns after the COMMIT that includes it."""
        self._ensure_started()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Job(fn, loop, future))
        return await future

    def _run(self) -> None:
        with self.engine.connect() as conn:
            while True:
                first = self._queue.get()
                if first is None:
                    return
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
                self._commit(conn, batch)

    def _commit(self, conn: Connection, batch: list[_Job]) -> None:
        try:
            outcomes = self._attempt(conn, batch, isolate=False)
        except _JobFailed:
            # Some job raised after writing (or may have): run the batch again with each job in
            # its own SAVEPOINT, so a failed job rolls back alone. Jobs are pure functions of
            # their inputs and the database, so running them again is safe.
            try:
                outcomes = self._attempt(conn, batch, isolate=True)
            except Exception as exc:  # noqa: BLE001 - the COMMIT failed: nothing in the batch is durable
                log.exception("sqlite batch failed (%d jobs)", len(batch))
                outcomes = [(job, None, exc) for job in batch]
        except Exception as exc:  # noqa: BLE001 - the COMMIT failed: nothing in the batch is durable
            log.exception("sqlite batch failed (%d jobs)", len(batch))
            outcomes = [(job, None, exc) for job in batch]
        self.batches += 1
        self.jobs += len(batch)
        # One wake-up per event loop for the whole batch, not one per job.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for job, result, error in outcomes:
            by_loop.setdefault(job.loop, []).append((job.future, result, error))
        for loop, resolved in by_loop.items():
            loop.call_soon_threadsafe(_resolve, resolved)

    def _attempt(self, conn: Connection, batch: list[_Job], isolate: bool) -> list[tuple[_Job, Any, BaseException | None]]:
        """One transaction over the batch. Fast path (no savepoints): the first job error aborts
        the whole transaction with :class:`_JobFailed`; with ``isolate`` each job has a SAVEPOINT."""
        outcomes: list[tuple[_Job, Any, BaseException | None]] = []
        with conn.begin():  # the engine decides BEGIN IMMEDIATE or DEFERRED (engine._configure_sqlite)
            for job in batch:
                if not isolate:
                    try:
                        outcomes.append((job, job.fn(conn), None))
                    except Exception as exc:
                        if self.savepoints:
                            raise _JobFailed from exc
                        outcomes.append((job, None, exc))  # reads write nothing: no need to retry
                    continue
                try:
                    with conn.begin_nested():
                        outcomes.append((job, job.fn(conn), None))
                except Exception as exc:  # noqa: BLE001 - the job's own error, reported to its caller
                    outcomes.append((job, None, exc))
        return outcomes

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None
