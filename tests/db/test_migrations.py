"""Migrations reach head on an empty database and match the models; concurrent startups are safe."""

from __future__ import annotations

import asyncio

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from service.app import create_app
from service.db.engine import Database
from service.db.migrate import head_revision, upgrade_to_head
from service.db.models import Base
from service.settings import Settings


def _diff(connection) -> list:
    ctx = MigrationContext.configure(connection, opts={"compare_type": True})
    return compare_metadata(ctx, Base.metadata)


async def test_upgrade_reaches_head_and_matches_models(empty_settings: Settings) -> None:
    db = empty_settings.database()
    try:
        assert await upgrade_to_head(db) == head_revision()
        async with db.reader() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            assert {"episodes", "transitions", "grades", "alembic_version"} <= tables
            diff = await conn.run_sync(_diff)
        assert diff == [], diff
        # idempotent: a second start changes nothing
        assert await upgrade_to_head(db) == head_revision()
    finally:
        await db.dispose()


async def test_sqlite_connections_are_configured(tmp_path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'x' / 'p.db'}")
    try:
        async with db.reader() as conn:
            pragmas = {
                name: (await conn.execute(text(f"PRAGMA {name}"))).scalar_one()
                for name in ("journal_mode", "busy_timeout", "synchronous", "foreign_keys")
            }
        assert pragmas == {"journal_mode": "wal", "busy_timeout": 10_000, "synchronous": 2, "foreign_keys": 1}
        assert (tmp_path / "x").is_dir()  # the data folder is created
    finally:
        await db.dispose()


async def test_several_workers_can_start_together(empty_settings: Settings) -> None:
    """Four apps on one empty database migrate at once: exactly one creates the tables, none fails."""
    from litestar.testing import AsyncTestClient

    apps = [create_app(empty_settings) for _ in range(4)]
    clients = [AsyncTestClient(app=a) for a in apps]
    await asyncio.gather(*(c.__aenter__() for c in clients))
    try:
        responses = await asyncio.gather(*(c.post("/reset", json={}) for c in clients))
        assert [r.status_code for r in responses] == [200] * 4
    finally:
        await asyncio.gather(*(c.__aexit__(None, None, None) for c in clients))
