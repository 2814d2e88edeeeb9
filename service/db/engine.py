"""Engine construction. SQLite is configured here and nowhere else.

SQLite: WAL, ``busy_timeout``, ``synchronous=FULL``, foreign keys on every connection;
pysqlite's implicit BEGIN is disabled and we emit our own, ``BEGIN IMMEDIATE`` for writers
(so two writers never deadlock upgrading a shared lock) and plain ``BEGIN`` for readers.
Every write goes through :meth:`Database.write` as a sync transaction function: on SQLite it runs
on one writer thread with group commit (:mod:`service.db.sqlite_threads`); on PostgreSQL it runs
in its own async transaction via ``run_sync``. Reads go through :meth:`Database.read` the same way
(a reader thread on SQLite). One function, the same SQL, on both backends.

PostgreSQL: an optional schema is applied through ``search_path`` (used for isolated tests).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from service.db.sqlite_threads import SqliteThread

T = TypeVar("T")

_json_encode = msgspec.json.Encoder().encode


def json_serializer(value: Any) -> str:
    """JSON columns are written by msgspec (several times faster than ``json.dumps``, same JSON)."""
    return _json_encode(value).decode()


_JSON_CODEC: dict[str, Any] = {"json_serializer": json_serializer, "json_deserializer": msgspec.json.decode}

SQLITE_BUSY_TIMEOUT_MS = 10_000
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


def _configure_sqlite(engine: Engine, journal_mode: str = "WAL", synchronous: str = "FULL") -> None:
    """WAL + synchronous=FULL by default: every COMMIT is fsynced before the steps in it are
    acknowledged, so an acknowledged step survives a power cut, not only a crash of the process
    (group commit makes that one fsync per batch). On a network file system (WAL needs shared memory
    there is none of) use journal_mode=DELETE with synchronous=FULL."""
    if journal_mode not in SQLITE_JOURNAL_MODES or synchronous not in SQLITE_SYNCHRONOUS:
        raise ValueError(f"unsupported SQLite journal_mode={journal_mode!r} / synchronous={synchronous!r}")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver; see _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA journal_mode={journal_mode}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


class Database:
    """The engine plus the two ways in: :meth:`reader` and :meth:`writer` transactions."""

    def __init__(
        self,
        url: str,
        schema: str | None = None,
        echo: bool = False,
        sqlite_journal_mode: str = "WAL",
        sqlite_synchronous: str = "FULL",
    ) -> None:
        self.url = url
        self.is_sqlite = make_url(url).drivername.startswith("sqlite")
        self.schema = schema
        kwargs: dict[str, Any] = {"echo": echo, **_JSON_CODEC}
        if self.is_sqlite:
            path = sqlite_path(url)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        else:
            kwargs.update(pool_size=10, max_overflow=20, pool_pre_ping=True)
            if schema:
                if not _SCHEMA_NAME.match(schema):
                    raise ValueError(f"DATABASE_SCHEMA {schema!r} is not a plain identifier")
                kwargs["connect_args"] = {"server_settings": {"search_path": schema}}
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        self._writer: SqliteThread | None = None
        self._reader: SqliteThread | None = None
        if self.is_sqlite:
            _configure_sqlite(self.engine.sync_engine, sqlite_journal_mode, sqlite_synchronous)
            sync_engine = create_engine(make_url(url).set(drivername="sqlite"), echo=echo, **_JSON_CODEC)
            _configure_sqlite(sync_engine, sqlite_journal_mode, sqlite_synchronous)
            self._writer = SqliteThread(sync_engine.execution_options(sqlite_begin="IMMEDIATE"), "sqlite-writer", savepoints=True)
            self._reader = SqliteThread(sync_engine, "sqlite-reader", savepoints=False)

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

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run the sync transaction function ``fn(conn, *args, **kwargs)`` and commit.

        Returns once the transaction is committed (durable); an exception from ``fn`` rolls back
        its own writes only. Keep ``fn`` to database calls and pure computation.
        """
        return await self._run(self._writer, self.engine.begin, fn, args, kwargs)

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run the sync read function ``fn(conn, *args, **kwargs)`` in a read transaction."""
        return await self._run(self._reader, self.engine.connect, fn, args, kwargs)

    @staticmethod
    async def _run(thread: SqliteThread | None, open_conn: Callable[[], Any], fn: Callable[..., T], args: Any, kwargs: Any) -> T:
        def job(conn: Any) -> T:
            return fn(conn, *args, **kwargs)

        if thread is not None:  # SQLite: on the connection thread
            return await thread.submit(job)
        async with open_conn() as conn:  # PostgreSQL: an async connection, the same sync function
            return await conn.run_sync(job)

    async def dispose(self) -> None:
        for thread in (self._writer, self._reader):
            if thread is not None:
                await anyio.to_thread.run_sync(thread.close)
                thread.engine.dispose()
        await self.engine.dispose()
