"""``GET /ready``: the database answers, no connection thread is stalled, the schema is this version's,
and a real write commits.

The write check stores a row about the size of a step's (:data:`PROBE_BYTES` of random text, in an episode
row under an id no client may use) and deletes it in the same transaction: the COMMIT writes pages and
syncs them, so a full disk (507), a file system gone read-only or an I/O error on ``fsync`` (503) fails
``/ready`` as it fails steps — a read and an empty transaction (what this used to check) succeed on all
three — and nothing is left behind, whatever fails. Probes that arrive together share one write, and a
write that succeeded is trusted for :data:`WRITE_CONFIRMED_S`, so polling ``/ready`` costs at most one
small write per second per worker.

The revision check reads ``alembic_version`` (one indexed row); a confirmed head is remembered for
:data:`HEAD_CONFIRMED_S` seconds and until a SQLite connection thread reconnects (a reconnect may
have opened another file).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from typing import Any

from alembic.runtime.migration import MigrationContext
from sqlalchemy import delete, insert
from sqlalchemy.engine import Connection

from service.db.engine import Database
from service.db.errors import DatabaseNotMigrated, DatabaseOutcomeUnknown, DatabaseUnavailable
from service.db.migrate import head_revision
from service.db.models import episodes, utcnow

HEAD_CONFIRMED_S = 10.0
WRITE_CONFIRMED_S = 1.0
PROBE_BYTES = 16 * 1024  # a step with long replies stores about 9 kB
PROBE_ID_PREFIX = "run_ready-probe-"  # clients may not choose ids starting with run_; run episodes never look so


def _write_probe(conn: Connection) -> None:
    """Store and delete, in one transaction, an episode-sized row no one else can see."""
    probe_id = PROBE_ID_PREFIX + secrets.token_hex(8)
    now = utcnow()
    conn.execute(
        insert(episodes).values(
            id=probe_id,
            task_id="ready-probe",
            split="probe",
            seed=0,
            ticket_id="ready-probe",
            run_id=None,
            status="done",
            step_count=0,
            state={"probe": os.urandom(PROBE_BYTES // 2).hex()},  # incompressible: PostgreSQL stores it whole
            version=1,
            created_at=now,
            updated_at=now,
        )
    )
    conn.execute(delete(episodes).where(episodes.c.id == probe_id))


def _current_revision(conn: Any) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


class Readiness:
    """What ``GET /ready`` checks, for one database."""

    def __init__(self, database: Database, head: str | None = None) -> None:
        self.database = database
        self.head = head if head is not None else head_revision()
        self._confirmed: tuple[int, float] | None = None  # (connection generation, monotonic time)
        self.write_confirmed_s = WRITE_CONFIRMED_S
        self._written_at: float | None = None  # monotonic time of the last write probe that committed
        self._writing: asyncio.Future[None] | None = None

    async def check(self) -> None:
        """Raise a :class:`~service.db.errors.DatabaseFault` unless the service can serve: 503
        ``database-unavailable`` (or 507) when the database does not answer, a thread is stalled or a real
        write fails, 503 ``database-not-migrated`` when it is not at this version's migration head."""
        await self.database.ping()
        await self._revision()
        await self._written()

    async def _written(self) -> None:
        """A real write committed within :data:`WRITE_CONFIRMED_S`, or one now (shared by concurrent probes)."""
        written = self._written_at
        if written is not None and time.monotonic() - written < self.write_confirmed_s:
            return
        if self._writing is None or self._writing.done():
            self._writing = asyncio.ensure_future(self._write_once())
        await asyncio.shield(self._writing)

    async def _write_once(self) -> None:
        try:
            await self.database.write(_write_probe)
        except DatabaseOutcomeUnknown as exc:  # for /ready, a write that cannot be confirmed failed
            raise DatabaseUnavailable(f"a write probe was not confirmed: {exc.reason}") from exc
        self._written_at = time.monotonic()

    async def _revision(self) -> None:
        generation = self.database.connection_generation()
        confirmed = self._confirmed
        if confirmed is not None and confirmed[0] == generation and time.monotonic() - confirmed[1] < HEAD_CONFIRMED_S:
            return
        current = await self.database.read(_current_revision)
        if current != self.head:
            self._confirmed = None
            raise DatabaseNotMigrated(f"the database is at revision {current}, this version needs {self.head}")
        self._confirmed = (generation, time.monotonic())
