"""Engine construction. SQLite is configured here and nowhere else.

SQLite: WAL, ``busy_timeout``, ``synchronous=NORMAL``, foreign keys on every connection;
pysqlite's implicit BEGIN is disabled and we emit our own, ``BEGIN IMMEDIATE`` for writers
(so two writers never deadlock upgrading a shared lock) and plain ``BEGIN`` for readers.
Writers inside one process also queue on an asyncio lock, so they wait in order instead of
spinning in SQLite's busy handler.

PostgreSQL: an optional schema is applied through ``search_path`` (used for isolated tests).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

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


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver; see _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


class Database:
    """The engine plus the two ways in: :meth:`reader` and :meth:`writer` transactions."""

    def __init__(self, url: str, schema: str | None = None, echo: bool = False) -> None:
        self.url = url
        self.is_sqlite = make_url(url).drivername.startswith("sqlite")
        self.schema = schema
        kwargs: dict[str, Any] = {"echo": echo}
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
        if self.is_sqlite:
            _configure_sqlite(self.engine)
            self._write_engine = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        else:
            self._write_engine = self.engine
        self._write_lock = asyncio.Lock() if self.is_sqlite else None

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
    async def writer(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed on normal exit, rolled back on an exception."""
        lock = self._write_lock if self._write_lock is not None else nullcontext()
        async with lock:
            async with self._write_engine.begin() as conn:
                yield conn

    async def dispose(self) -> None:
        await self.engine.dispose()
