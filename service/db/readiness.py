"""``GET /ready``: the database answers, no connection thread is stalled, and the schema is this version's.

The revision check reads ``alembic_version`` (one indexed row); a confirmed head is remembered for
:data:`HEAD_CONFIRMED_S` seconds and until a SQLite connection thread reconnects (a reconnect may
have opened another file), so an orchestrator polling ``/ready`` costs one trivial read and write.
"""

from __future__ import annotations

import time
from typing import Any

from alembic.runtime.migration import MigrationContext

from service.db.engine import Database
from service.db.errors import DatabaseNotMigrated
from service.db.migrate import head_revision

HEAD_CONFIRMED_S = 10.0


def _current_revision(conn: Any) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


class Readiness:
    """What ``GET /ready`` checks, for one database."""

    def __init__(self, database: Database, head: str | None = None) -> None:
        self.database = database
        self.head = head if head is not None else head_revision()
        self._confirmed: tuple[int, float] | None = None  # (connection generation, monotonic time)

    async def check(self) -> None:
        """Raise a :class:`~service.db.errors.DatabaseFault` unless the service can serve: 503
        ``database-unavailable`` (or 507) when the database does not answer or a thread is stalled,
        503 ``database-not-migrated`` when it is not at this version's migration head."""
        await self.database.ping()
        generation = self.database.connection_generation()
        confirmed = self._confirmed
        if confirmed is not None and confirmed[0] == generation and time.monotonic() - confirmed[1] < HEAD_CONFIRMED_S:
            return
        current = await self.database.read(_current_revision)
        if current != self.head:
            self._confirmed = None
            raise DatabaseNotMigrated(f"the database is at revision {current}, this version needs {self.head}")
        self._confirmed = (generation, time.monotonic())
