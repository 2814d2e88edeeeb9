"""SQLite configuration and the group-commit writer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError

from service.db.engine import Database
from service.db.migrate import upgrade_to_head
from service.db.models import episodes, utcnow
from service.settings import Settings


async def _db(tmp_path: Path, **kw) -> Database:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'e.db'}", **kw)
    await upgrade_to_head(db)
    return db


def _episode(i: int) -> dict:
    now = utcnow()
    return dict(id=f"ep-{i}", task_id="decision-easy", split="dev", seed=i, ticket_id="dev-200000", run_id=None,
                status="active", step_count=0, state={}, version=1, created_at=now, updated_at=now)


async def test_pragmas_are_applied_on_every_connection(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    try:
        pragmas = await db.read(lambda c: [c.execute(text(f"PRAGMA {p}")).scalar() for p in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")])
        assert pragmas == ["wal", 2, 1, 10_000]  # synchronous=FULL is 2: fsync at every commit
    finally:
        await db.dispose()


async def test_network_file_system_settings(tmp_path: Path) -> None:
    settings = Settings.from_env({"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'n.db'}", "SQLITE_JOURNAL_MODE": "delete", "SQLITE_SYNCHRONOUS": "full"})
    db = settings.database()
    try:
        await upgrade_to_head(db)
        assert await db.read(lambda c: c.execute(text("PRAGMA journal_mode")).scalar()) == "delete"
        assert await db.read(lambda c: c.execute(text("PRAGMA synchronous")).scalar()) == 2  # FULL
    finally:
        await db.dispose()
    with pytest.raises(ValueError, match="unsupported SQLite"):
        Database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", sqlite_journal_mode="MEMORY")


async def test_concurrent_writes_share_commits_and_a_failing_job_rolls_back_alone(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    try:
        writer = db._writer
        assert writer is not None
        before = (writer.batches, writer.jobs)

        def add(conn, i: int) -> int:
            conn.execute(insert(episodes).values(**_episode(i)))
            return i

        def add_twice(conn, i: int) -> None:  # writes, then fails: its first insert must not survive
            conn.execute(insert(episodes).values(**_episode(i)))
            conn.execute(insert(episodes).values(**_episode(i)))

        results = await asyncio.gather(
            *(db.write(add, i) for i in range(64)), db.write(add_twice, 1000), return_exceptions=True
        )
        assert results[:64] == list(range(64))
        assert isinstance(results[64], IntegrityError)
        batches, jobs = writer.batches - before[0], writer.jobs - before[1]
        assert jobs == 65 and batches < jobs  # group commit: several jobs per COMMIT
        ids = await db.read(lambda c: {r[0] for r in c.execute(select(episodes.c.id))})
        assert ids == {f"ep-{i}" for i in range(64)}
    finally:
        await db.dispose()


async def test_acknowledged_writes_survive_a_new_database_object(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    await db.write(lambda c: c.execute(insert(episodes).values(**_episode(7))))
    await db.dispose()
    again = Database(f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    try:
        assert await again.read(lambda c: c.execute(select(episodes.c.id)).scalar()) == "ep-7"
    finally:
        await again.dispose()
