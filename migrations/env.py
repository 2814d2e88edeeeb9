"""Alembic environment (async).

Two entry points: the app's startup migration passes its own open connection in
``config.attributes["connection"]`` (so the migration lock and the upgrade share it); the
``alembic`` command line builds an async engine from ``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from service.db.engine import Database
from service.db.models import Base
from service.settings import Settings

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    settings = Settings.from_env()
    database = Database(settings.database_url, schema=settings.database_schema)
    try:
        await database.write_unbounded(_run)  # the same way in as the app's startup migration
    finally:
        await database.dispose()


def _run_offline() -> None:
    context.configure(
        url=Settings.from_env().database_url,
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _run_offline()
else:
    shared = context.config.attributes.get("connection")
    if shared is not None:
        _run(shared)
    else:
        asyncio.run(_run_online())
