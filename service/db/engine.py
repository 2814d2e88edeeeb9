"""Engine construction. SQLite is configured here and nowhere else.

SQLite: WAL, ``busy_timeout``, ``synchronous=FULL``, foreign keys on every connection;
pysqlite's implicit BEGIN is disabled and we emit our own, ``BEGIN IMMEDIATE`` for writers
(so two writers never deadlock upgrading a shared lock) and plain ``BEGIN`` for readers.
Every write goes through :meth:`Database.write` as a sync transaction function: on SQLite it runs
on one writer thread with group commit (:mod:`service.db.sqlite_threads`); on PostgreSQL it runs
in its own async transaction via ``run_sync``. Reads go through :meth:`Database.read` the same way
(a reader thread on SQLite). One function, the same SQL, on both backends.

PostgreSQL: an optional schema is applied through ``search_path`` (used for isolated tests).

Faults: every read and write raises :class:`~service.db.errors.DatabaseUnavailable` or
:class:`~service.db.errors.DatabaseFull` when the database cannot do the work (see
:mod:`service.db.errors`), and every wait is bounded: connecting (``connect_timeout_s``), waiting for
a pooled connection or a place in a SQLite thread's queue (``pool_timeout_s``), and each statement —
asyncpg's ``command_timeout``, SQLite's ``busy_timeout`` (``statement_timeout_s``). Migrations at start
run without the bound (:meth:`Database.write_unbounded`, :meth:`Database.unbounded_connection`). A write
whose outcome cannot be known — its wait ran out after it started, or the connection was lost during
its COMMIT — raises :class:`~service.db.errors.DatabaseOutcomeUnknown`; a PostgreSQL deadlock or
serialization failure (the server rolled the transaction back) is run once more, then answered 503.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from service.db.errors import PG_RETRYABLE, DatabaseOutcomeUnknown, DatabaseUnavailable, FaultLog, fault_from, sqlstate
from service.db.sqlite_threads import SqliteFile, SqliteThread

T = TypeVar("T")

_json_encode = msgspec.json.Encoder().encode


def json_serializer(value: Any) -> str:
    """JSON columns are written by msgspec (several times faster than ``json.dumps``, same JSON)."""
    return _json_encode(value).decode()


_JSON_CODEC: dict[str, Any] = {"json_serializer": json_serializer, "json_deserializer": msgspec.json.decode}

DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_POOL_TIMEOUT_S = 5.0
# Per backend: SQLite's is its busy_timeout (a lock held by another process), 10 s as it always was;
# PostgreSQL's is asyncpg's command_timeout, short enough that a stalled server fails requests fast.
SQLITE_STATEMENT_TIMEOUT_S = 10.0
PG_STATEMENT_TIMEOUT_S = 5.0
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for in-memory or non-SQLite URLs)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite"):
        return None
    if not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


SQLITE_JOURNAL_MODES = ("WAL", "DELETE", "TRUNCATE", "PERSIST")
SQLITE_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")


def _configure_sqlite(
    engine: Engine,
    journal_mode: str = "WAL",
    synchronous: str = "FULL",
    busy_timeout_s: float = SQLITE_STATEMENT_TIMEOUT_S,
    file: SqliteFile | None = None,
) -> None:
    """WAL + synchronous=FULL by default: every COMMIT is fsynced before the steps in it are
    acknowledged, so an acknowledged step survives a power cut, not only a crash of the process
    (group commit makes that one fsync per batch). On a network file system (WAL needs shared memory
    there is none of) use journal_mode=DELETE with synchronous=FULL. ``busy_timeout``: how long a
    statement waits for another process's lock before it fails (503). ``file``: once it has been
    opened, connects open it without creating it."""
    if journal_mode not in SQLITE_JOURNAL_MODES or synchronous not in SQLITE_SYNCHRONOUS:
        raise ValueError(f"unsupported SQLite journal_mode={journal_mode!r} / synchronous={synchronous!r}")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver; see _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA journal_mode={journal_mode}")
        cursor.execute(f"PRAGMA busy_timeout={round(busy_timeout_s * 1000)}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    if file is not None:

        @event.listens_for(engine, "do_connect")
        def _open_existing(_dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
            uri = file.connect_uri()
            if uri is not None:  # mode=rw: a missing file is CANTOPEN (503), not a new empty database
                cargs[:] = [uri]
                cparams["uri"] = True

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


class Database:
    """The engine plus the two ways in: :meth:`read` and :meth:`write` transactions."""

    def __init__(
        self,
        url: str,
        schema: str | None = None,
        echo: bool = False,
        sqlite_journal_mode: str = "WAL",
        sqlite_synchronous: str = "FULL",
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S,
        statement_timeout_s: float | None = None,
    ) -> None:
        """``statement_timeout_s``: None for the backend's default (SQLite 10 s, PostgreSQL 5 s)."""
        self.url = url
        self.is_sqlite = make_url(url).drivername.startswith("sqlite")
        if statement_timeout_s is None:
            statement_timeout_s = SQLITE_STATEMENT_TIMEOUT_S if self.is_sqlite else PG_STATEMENT_TIMEOUT_S
        self.schema = schema
        self.echo = echo
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        # SQLite: the longest a caller waits for its job (queue, lock wait, run); then 503.
        self.wait_s = pool_timeout_s + statement_timeout_s
        self.faults = FaultLog()  # one log line per failure, tracebacks rate-limited
        kwargs: dict[str, Any] = {"echo": echo, **_JSON_CODEC}
        if self.is_sqlite:
            path = sqlite_path(url)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        else:
            if schema and not _SCHEMA_NAME.match(schema):
                raise ValueError(f"DATABASE_SCHEMA {schema!r} is not a plain identifier")
            kwargs.update(pool_size=10, max_overflow=20, pool_pre_ping=True, pool_timeout=pool_timeout_s)
            kwargs["connect_args"] = self._pg_connect_args(statement_timeout_s)
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        self._writer: SqliteThread | None = None
        self._reader: SqliteThread | None = None
        if self.is_sqlite:
            modes = (sqlite_journal_mode, sqlite_synchronous, statement_timeout_s)
            _configure_sqlite(self.engine.sync_engine, *modes)
            path = sqlite_path(url)
            file = SqliteFile(path) if path is not None else None  # watched by both threads
            # NullPool: a connection thread that reopens its connection gets a new one, not a pooled one.
            sync_engine = create_engine(
                make_url(url).set(drivername="sqlite"), echo=echo, poolclass=NullPool, **_JSON_CODEC
            )
            _configure_sqlite(sync_engine, *modes, file=file)
            writer_engine = sync_engine.execution_options(sqlite_begin="IMMEDIATE")
            self._writer = SqliteThread(writer_engine, "sqlite-writer", savepoints=True, faults=self.faults, file=file)
            self._reader = SqliteThread(sync_engine, "sqlite-reader", savepoints=False, faults=self.faults, file=file)

    def _pg_connect_args(self, statement_timeout_s: float | None) -> dict[str, Any]:
        """asyncpg: bounded connect, and a client-side bound on every statement (it cancels it)."""
        args: dict[str, Any] = {"timeout": self.connect_timeout_s, "command_timeout": statement_timeout_s}
        if self.schema:
            args["server_settings"] = {"search_path": self.schema}
        return args

    async def start(self) -> bool:
        """Open the SQLite connection threads now (not on first use); True if the database answered.

        A thread that cannot connect keeps retrying with backoff and fails its jobs meanwhile (503),
        so the service can start and report "not ready" instead of hanging or dying. PostgreSQL
        connects per request through its pool: a ping says whether it answers."""
        if self.is_sqlite:
            threads = [t for t in (self._writer, self._reader) if t is not None]
            results = [await anyio.to_thread.run_sync(t.start, self.connect_timeout_s) for t in threads]
            return all(results)
        try:
            await self.ping()
        except Exception:  # noqa: BLE001 - reported by the caller and by GET /ready
            return False
        return True

    async def reachable(self) -> None:
        """One trivial read: raises :class:`~service.db.errors.DatabaseFault` if the read path is down."""
        await self.read(_select_one)

    async def ping(self) -> None:
        """Raise :class:`~service.db.errors.DatabaseFault` unless the database answers a trivial
        read on the read path and on the write path (on SQLite: both connection threads, neither of
        them stalled — running one batch for longer than the statement timeout)."""
        for thread in (self._writer, self._reader):
            if thread is not None and (took := thread.running_for()) > self.statement_timeout_s:
                raise DatabaseUnavailable(
                    f"{thread.name} stalled: one batch has been running for {took:.1f}s "
                    f"(over DB_STATEMENT_TIMEOUT_S={self.statement_timeout_s:g}s); jobs queue behind it"
                )
        await self.read(_select_one)
        if self.is_sqlite:
            await self.write(_select_one)

    def connection_generation(self) -> int:
        """Changes whenever a SQLite connection thread (re)connects; 0 on PostgreSQL (pooled connections)."""
        return sum(t.connects for t in (self._writer, self._reader) if t is not None)

    def describe(self) -> str:
        """Where the data lives, for the startup log (no password)."""
        path = sqlite_path(self.url)
        if path is not None:
            return f"sqlite file {path.resolve()}"
        shown = make_url(self.url).render_as_string(hide_password=True)
        return shown + (f" (schema {self.schema})" if self.schema else "")

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def unbounded_connection(self) -> AsyncIterator[AsyncConnection]:
        """A PostgreSQL connection without the statement bound, for migrations at start (waiting for
        another worker's migration lock, or a long DDL, may take longer than a request may)."""
        engine = create_async_engine(
            self.url, echo=self.echo, poolclass=NullPool, connect_args=self._pg_connect_args(None), **_JSON_CODEC
        )
        try:
            async with engine.connect() as conn:
                yield conn
        finally:
            await engine.dispose()

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run the sync transaction function ``fn(conn, *args, **kwargs)`` and commit.

        Returns once the transaction is committed (durable); an exception from ``fn`` rolls back
        its own writes only. Keep ``fn`` to database calls and pure computation. Raises
        :class:`~service.db.errors.DatabaseFault` when the database cannot do it (nothing of
        ``fn`` is committed then, unless the wait bound ran out while it was running).
        """
        return await self._run(self._writer, self.engine.connect, fn, args, kwargs, self.wait_s, commit=True)

    async def write_unbounded(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`write` without the wait bound: for migrations at start."""
        if self._writer is not None:
            return await self._run(self._writer, self.engine.connect, fn, args, kwargs, None, commit=True)
        return await self._run(None, self.unbounded_connection, fn, args, kwargs, None, commit=True)

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run the sync read function ``fn(conn, *args, **kwargs)`` in a read transaction."""
        return await self._run(self._reader, self.engine.connect, fn, args, kwargs, self.wait_s)

    @staticmethod
    async def _run(
        thread: SqliteThread | None,
        open_conn: Callable[[], Any],
        fn: Callable[..., T],
        args: Any,
        kwargs: Any,
        wait_s: float | None,
        commit: bool = False,
    ) -> T:
        def job(conn: Any) -> T:
            return fn(conn, *args, **kwargs)

        if thread is not None:  # SQLite: on the connection thread (it raises DatabaseFault itself)
            return await thread.submit(job, wait_s)
        for attempt in (
            1,
            2,
        ):  # PostgreSQL: an async connection, the same sync function; bounded by the driver's timeouts
            try:
                return await _pg_transaction(open_conn, job, commit)
            except DatabaseOutcomeUnknown:
                raise
            except Exception as exc:
                fault = fault_from(exc)
                if fault is None:
                    raise
                if attempt == 1 and sqlstate(exc) in PG_RETRYABLE:
                    continue  # deadlock / serialization failure: rolled back by the server, safe to run again
                raise fault from exc
        raise AssertionError("unreachable")

    async def dispose(self) -> None:
        for thread in (self._writer, self._reader):
            if thread is not None:
                await anyio.to_thread.run_sync(thread.close)
                thread.engine.dispose()
        await self.engine.dispose()


async def _pg_transaction(open_conn: Callable[[], Any], job: Callable[[Any], T], commit: bool) -> T:
    """``job`` in one transaction on a new connection; committed if ``commit`` (else rolled back on close).

    A COMMIT that fails without the server's answer (timeout, connection lost — the driver's own class 08
    SQLSTATE, e.g. a server that PANICked on a full WAL disk, maybe after this commit's record was flushed)
    may have committed: :class:`DatabaseOutcomeUnknown`. One the server refused (its SQLSTATE) did not."""
    async with open_conn() as conn:
        if commit:
            await conn.begin()  # explicit: a job may run prepared statements on the DB-API cursor (no autobegin)
        result = await conn.run_sync(job)
        if commit:
            try:
                await conn.commit()
            except Exception as exc:
                fault = fault_from(exc)
                state = sqlstate(exc)
                if fault is None or (state is not None and not state.startswith("08")):
                    raise
                raise DatabaseOutcomeUnknown(f"the COMMIT was not confirmed: {fault.reason}") from exc
        return result


def _select_one(conn: Any) -> Any:
    return conn.execute(text("SELECT 1")).scalar()
