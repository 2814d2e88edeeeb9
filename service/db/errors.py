"""Database faults, classified in one place: the database is unavailable, or its disk is full.

A driver or SQLAlchemy error that means "the database cannot do this now" becomes
:class:`DatabaseUnavailable` (answered 503 with ``Retry-After``: retry later) or :class:`DatabaseFull`
(answered 507: nothing new can be stored until space is freed). Anything else — an
``IntegrityError``, a bug — is not a fault and is left as it is. ``Database`` raises these from
every read and write; ``service.lib.problems`` turns them into problem details; :class:`FaultLog`
keeps the log to one line per failure.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator

from sqlalchemy import exc as sa_exc

RETRY_DETAIL = "a retried step with the same request_id is applied at most once"


class DatabaseFault(Exception):
    """The database could not do the work; retrying later may succeed. ``reason`` is for the log. How it is
    answered (503, or 507 for :class:`DatabaseFull`) is ``service.lib.problems``'s business."""

    retry_after_s = 1
    slug = "database-unavailable"
    title = "Database unavailable"
    detail = f"the database is not answering right now; retry after Retry-After seconds — {RETRY_DETAIL}"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DatabaseUnavailable(DatabaseFault):
    """Cannot connect, connection lost, locked or stalled past the bound: answered 503."""


class DatabaseOutcomeUnknown(DatabaseUnavailable):
    """A write was running (or its COMMIT was sent) when its wait ran out or its connection was lost: it
    may still be committed. Answered 503, with a detail that says how to find out before sending it again."""

    slug = "outcome-unknown"
    title = "Outcome unknown"
    detail = (
        "the database did not confirm this write in time, and it may still be applied: do not simply send it again. "
        "Retry the step with the same request_id (applied at most once), or first check GET /state?episode_id=… "
        "(WebSocket: a state frame): if step_count moved on, the step was applied"
    )


class DatabaseNotMigrated(DatabaseUnavailable):
    """The tables (or columns) this version needs are not there: nobody ran the migrations. Answered 503."""

    retry_after_s = 5
    slug = "database-not-migrated"
    title = "Database not migrated"
    detail = (
        "the database does not have this version's tables yet (it was not migrated): the operator runs "
        "`alembic upgrade head` or starts the service with MIGRATE_ON_START=true; retry after Retry-After seconds"
    )


class DatabaseFull(DatabaseFault):
    """The disk (or the database's size limit) is full: answered 507."""

    retry_after_s = 10
    slug = "storage-full"
    title = "Insufficient storage"
    detail = (
        "the server's disk is full, so nothing new can be stored (reads still work); retry after Retry-After seconds — "
        f"{RETRY_DETAIL}"
    )


_SQLITE_FULL = {sqlite3.SQLITE_FULL}
_SQLITE_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_READONLY,  # also SQLITE_READONLY_DBMOVED: the file was renamed or deleted under us
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PROTOCOL,
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_PERM,
}
# Errors after which a SQLite connection itself is suspect (reopen it), unlike a lock or a full disk.
_SQLITE_REOPEN = _SQLITE_UNAVAILABLE - {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM}

_PG_FULL = {"53100"}  # disk_full
_ENOSPC_TEXT = "No space left on device"  # strerror(ENOSPC), as PostgreSQL quotes it when it cannot write
# connection exception (08), insufficient resources (53), operator intervention: query canceled by
# statement_timeout, shutdown, cannot connect now (57), system/I-O error (58), lock not available,
# read-only transaction (a replica after a failover).
_PG_UNAVAILABLE_CLASSES = ("08", "53", "57", "58")
_PG_UNAVAILABLE = {"55P03", "25006"}
# deadlock_detected, serialization_failure: the server rolled the transaction back; running it again may succeed.
PG_RETRYABLE = {"40P01", "40001"}
_PG_NOT_MIGRATED = {"42P01", "42703"}  # undefined_table, undefined_column
_SQLITE_NOT_MIGRATED = ("no such table", "no such column")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The error, what it wraps (``orig``) and what caused it, each once."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend((getattr(current, "orig", None), current.__cause__))


def classify(exc: BaseException) -> type[DatabaseFault] | None:
    """Which fault ``exc`` is, or None when it is not a database fault (the caller's own error)."""
    if isinstance(exc, DatabaseFault):
        return type(exc)
    if isinstance(exc, sa_exc.IntegrityError):
        return None
    chain = list(_chain(exc))
    if any(_ENOSPC_TEXT in str(err) for err in chain):
        # PostgreSQL that could not write its WAL (a full disk) PANICs: the connection closes with that
        # message and no answer of its own ("connection was closed in the middle of operation: could not write
        # to file pg_wal/…: No space left on device"; the driver calls it 08003), and its restart fails the
        # same way. Whoever quotes ENOSPC, it is a full disk (507), not an outage (503).
        return DatabaseFull
    # What the database itself answered (a SQLite result code, a PostgreSQL SQLSTATE) decides before how the
    # connection ended: PostgreSQL answers a full disk with 53100 and may then drop the connection, which
    # SQLAlchemy reports as invalidated — that is a full disk (507), not an outage (503).
    for err in chain:
        fault = _sqlite_fault(err) or _postgres_fault(err)
        if fault is not None:
            return fault
    for err in chain:
        fault = _connection_fault(err)
        if fault is not None:
            return fault
    return None


def _sqlite_fault(err: BaseException) -> type[DatabaseFault] | None:
    if isinstance(err, sqlite3.OperationalError) and str(err).startswith(_SQLITE_NOT_MIGRATED):
        return DatabaseNotMigrated
    code = getattr(err, "sqlite_errorcode", None) if isinstance(err, sqlite3.Error) else None
    if code is not None:
        primary = code & 0xFF
        if primary in _SQLITE_FULL:
            return DatabaseFull
        if primary in _SQLITE_UNAVAILABLE:
            return DatabaseUnavailable
    return None


def _postgres_fault(err: BaseException) -> type[DatabaseFault] | None:
    state = getattr(err, "sqlstate", None)
    if not (isinstance(state, str) and len(state) == 5):
        return None
    if state in _PG_FULL:
        return DatabaseFull
    if state in _PG_NOT_MIGRATED:
        return DatabaseNotMigrated
    if state.startswith(_PG_UNAVAILABLE_CLASSES) or state in _PG_UNAVAILABLE or state in PG_RETRYABLE:
        return DatabaseUnavailable
    return None


def _connection_fault(err: BaseException) -> type[DatabaseFault] | None:
    """The connection itself failed: refused, reset, timed out, invalidated or closed."""
    if isinstance(err, OSError):  # refused, reset, connect/command timeout (TimeoutError), ENOSPC
        return DatabaseFull if err.errno in (errno.ENOSPC, errno.EDQUOT) else DatabaseUnavailable
    if isinstance(err, sa_exc.TimeoutError | sa_exc.DisconnectionError):  # pool wait, lost connection
        return DatabaseUnavailable
    if isinstance(err, sa_exc.DBAPIError) and err.connection_invalidated:
        return DatabaseUnavailable
    if type(err).__name__ in ("InterfaceError", "ConnectionDoesNotExistError") and "asyncpg" in type(err).__module__:
        return DatabaseUnavailable  # "connection is closed"
    return None


def describe(exc: BaseException) -> str:
    """One line for the log: the innermost driver message, without SQL or parameters."""
    inner = exc
    for err in _chain(exc):
        if isinstance(err, sqlite3.Error | OSError) or getattr(err, "sqlstate", None):
            inner = err
            break
    text = str(inner).split("\n", 1)[0].strip() or type(inner).__name__
    name = getattr(inner, "sqlite_errorname", None)
    return f"{type(inner).__name__}: {text}" + (f" ({name})" if name else "")


def fault_from(exc: BaseException, context: str = "") -> DatabaseFault | None:
    """``exc`` as a :class:`DatabaseFault` (chained to it), or None when it is not one."""
    if isinstance(exc, DatabaseFault):
        return exc
    kind = classify(exc)
    if kind is None:
        return None
    fault = kind(f"{context}{describe(exc)}")
    fault.__cause__ = exc
    return fault


def sqlstate(exc: BaseException) -> str | None:
    """The PostgreSQL SQLSTATE the server answered with, or None (no answer: timeout, connection lost, not
    PostgreSQL)."""
    for err in _chain(exc):
        state = getattr(err, "sqlstate", None)
        if isinstance(state, str) and len(state) == 5:
            return state
    return None


def io_error(exc: BaseException) -> bool:
    """SQLite answered an I/O error (``SQLITE_IOERR``: a failed write or ``fsync``). At COMMIT it leaves the
    outcome unknown: in WAL mode the commit's frames may be in the file and replayed by the next open."""
    for err in _chain(exc):
        code = getattr(err, "sqlite_errorcode", None)
        if isinstance(err, sqlite3.Error) and code is not None:
            return code & 0xFF == sqlite3.SQLITE_IOERR
    return False


def needs_reopen(exc: BaseException) -> bool:
    """After this error a SQLite connection is suspect (I/O error, file moved or unreadable): reopen it."""
    for err in _chain(exc):
        code = getattr(err, "sqlite_errorcode", None)
        if isinstance(err, sqlite3.Error) and code is not None:
            return code & 0xFF in _SQLITE_REOPEN
    return False


class FaultLog:
    """One log line per failure; its traceback at most once per ``interval_s`` for each kind of fault."""

    def __init__(self, interval_s: float = 60.0) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def _traceback_due(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                return False
            self._last[key] = now
            return True

    def failure(self, log: logging.Logger, where: str, exc: BaseException) -> None:
        """Log ``exc`` (a fault, or an unexpected error) met while serving ``where``."""
        if isinstance(exc, DatabaseFault):
            key, line = type(exc).__name__, f"{where}: {exc.title.lower()} ({exc.slug}): {exc.reason}"
        else:
            key, line = (
                type(exc).__name__,
                f"{where}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            )
        if self._traceback_due(key):
            log.warning("%s", line, exc_info=exc)
        else:
            log.warning("%s (traceback logged at most every %.0fs)", line, self.interval_s)


__all__ = [
    "DatabaseFault",
    "DatabaseFull",
    "DatabaseNotMigrated",
    "DatabaseOutcomeUnknown",
    "DatabaseUnavailable",
    "FaultLog",
    "classify",
    "describe",
    "fault_from",
    "io_error",
    "needs_reopen",
    "sqlstate",
]
