"""Bring the database to Alembic head at startup, under a lock, so several workers can start at once.

The lock is a file lock next to the SQLite file, or ``pg_advisory_lock`` on PostgreSQL; the
upgrade runs on the same connection that holds the PostgreSQL lock. Migrations run without the
request wait bounds (``DB_*_TIMEOUT_S``): waiting for another worker's migration is expected.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

import anyio
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from service.db.engine import Database, sqlite_path

log = logging.getLogger("service.db.migrate")

ROOT = Path(__file__).resolve().parents[2]
# A fixed 63-bit key: "ecomm-support-env migrations".
PG_MIGRATION_LOCK_KEY = 0x3E_C0_55_E7_00_00_00_01


def alembic_config() -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade_on(connection: Connection) -> str | None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")
    return MigrationContext.configure(connection).get_current_revision()


def _lock_file(path: Path) -> int:

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the other worker's migration is done
    return fd


def _unlock_file(fd: int) -> None:

    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


async def upgrade_to_head(database: Database) -> str | None:
    """Run ``alembic upgrade head``; returns the revision the database is at afterwards."""
    if database.is_sqlite:
        path = sqlite_path(database.url)
        fd = None
        if path is not None:
            fd = await anyio.to_thread.run_sync(_lock_file, path.with_name(path.name + ".migrate.lock"))
        try:
            revision = await database.write_unbounded(_upgrade_on)  # a migration may take longer than a request
        finally:
            if fd is not None:
                _unlock_file(fd)
    else:
        async with database.unbounded_connection() as conn:  # the lock wait and DDL may take longer than a request
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PG_MIGRATION_LOCK_KEY})
            await conn.commit()
            try:
                async with conn.begin():
                    revision = await conn.run_sync(_upgrade_on)
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_MIGRATION_LOCK_KEY})
                await conn.commit()
    log.info("database at revision %s (%s)", revision, database.describe())
    return revision
