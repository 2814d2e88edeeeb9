"""The database file that DATABASE_URL names is deleted or replaced while the service runs.

An acknowledged write must be in the file the path names — not in an unlinked inode that SQLite (in
WAL mode) happily keeps writing, and not in a new empty database that a reconnect created in its place.
So: while the file is missing every read and write fails (503) and nothing is acknowledged, the missing
file is never created again after the first start, ``ping`` (``GET /ready``) fails, and once a file is
back at the path the same ``Database`` serves from *that* file. ``GET /ready`` also answers 503 while
the database is not at this version's migration head.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from bench.harness import STALLED_AFTER_S
from service.app import create_app
from service.db.engine import Database
from service.db.errors import DatabaseFault
from service.db.migrate import upgrade_to_head
from service.db.models import episodes
from service.lib.problems import fault_status
from service.settings import Settings
from tests.db.rows import add_episode

JOURNAL_MODES = ["WAL", "DELETE"]


def ids_in_file(path: Path) -> set[int]:
    """The episodes stored in the file at ``path``, read with plain SQL (never through the service)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {int(r[0][3:]) for r in conn.execute("SELECT id FROM episodes")}
    finally:
        conn.close()


def backup(path: Path, to: Path) -> None:
    """A consistent copy of the database (WAL content included), as an operator's backup is."""
    src, dst = sqlite3.connect(path), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


async def _fails(call, what: str) -> DatabaseFault:
    try:
        result = await asyncio.wait_for(call(), STALLED_AFTER_S)  # a safety net against a hang
    except DatabaseFault as fault:
        return fault
    except TimeoutError:
        pytest.fail(f"{what} hung")
    pytest.fail(f"{what} succeeded ({result!r}): it was acknowledged, but the database file is not at its path")


async def _until_answered(call, what: str):
    """The answer once the threads have reconnected (STALLED_AFTER_S: a safety net, not a budget)."""
    deadline = time.monotonic() + STALLED_AFTER_S
    while True:
        try:
            return await asyncio.wait_for(call(), STALLED_AFTER_S)
        except DatabaseFault:
            assert time.monotonic() < deadline, f"{what}: still failing long after the file came back"
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
async def test_writes_after_the_file_is_deleted_are_never_acknowledged(tmp_path: Path, journal_mode: str) -> None:
    path = tmp_path / "data" / "x.db"
    db = Database(f"sqlite+aiosqlite:///{path}", sqlite_journal_mode=journal_mode)
    acked: set[int] = set()
    try:
        await upgrade_to_head(db)
        acked.add(await db.write(add_episode, 1))
        backup(path, tmp_path / "backup.db")

        for f in path.parent.glob("x.db*"):  # the operator deletes the database (or its volume goes away)
            f.unlink()
        for i in range(2, 6):
            fault = await _fails(lambda i=i: db.write(add_episode, i), f"write {i} after the file was deleted")
            assert fault_status(fault) == 503, repr(fault)
        fault = await _fails(db.ping, "ping (GET /ready) after the file was deleted")
        assert fault_status(fault) == 503
        await _fails(
            lambda: db.read(lambda c: c.execute(select(episodes.c.id)).all()), "a read after the file was deleted"
        )
        assert not path.exists(), "a reconnect created a new (empty) database where the deleted one was"

        os.replace(tmp_path / "backup.db", path)  # the backup is restored
        acked.add(await _until_answered(lambda: db.write(add_episode, 6), "a write once the backup is restored"))
        await db.ping()
        read = await db.read(lambda c: {int(r[0][3:]) for r in c.execute(select(episodes.c.id))})
    finally:
        await db.dispose()
    stored = ids_in_file(path)
    print(
        f"\nfile deleted [{journal_mode}]: {len(acked)} acknowledged, "
        f"{len(acked & stored)} of them in the file at the path; "
        f"4 writes while it was missing all answered 503"
    )
    assert acked == {1, 6} and acked <= stored, f"acknowledged {sorted(acked)}, in the file {sorted(stored)}"
    assert read == stored


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
async def test_a_replaced_file_is_the_one_read_and_written(tmp_path: Path, journal_mode: str) -> None:
    """The database at the path is replaced by another one (an older backup restored: the file, and
    the old file's ``-wal``/``-shm`` removed, since they belong to it): from then on reads answer from
    that file and acknowledged writes are stored in it."""
    path = tmp_path / "data" / "x.db"
    db = Database(f"sqlite+aiosqlite:///{path}", sqlite_journal_mode=journal_mode)
    try:
        await upgrade_to_head(db)
        await db.write(add_episode, 1)
        backup(path, tmp_path / "backup.db")
        await db.write(add_episode, 2)  # only in the file about to be replaced

        os.replace(tmp_path / "backup.db", path)
        for stale in (path.with_name("x.db-wal"), path.with_name("x.db-shm")):
            stale.unlink(missing_ok=True)
        read = await _until_answered(
            lambda: db.read(lambda c: {int(r[0][3:]) for r in c.execute(select(episodes.c.id))}),
            "a read after the file was replaced",
        )
        acked = await _until_answered(lambda: db.write(add_episode, 3), "a write after the file was replaced")
    finally:
        await db.dispose()
    stored = ids_in_file(path)
    assert read == {1}, (
        f"read {sorted(read)} after the replace: that is the old file's content, not the file at the path"
    )
    assert acked == 3 and 3 in stored, f"write 3 was acknowledged but the file at the path holds {sorted(stored)}"


async def test_ready_says_not_ready_while_the_database_is_not_at_the_migration_head(empty_settings: Settings) -> None:
    app = create_app(replace(empty_settings, migrate_on_start=False, test_split_key="k" * 40))
    async with AsyncTestClient(app=app) as client:
        resp = await client.get("/ready")
        assert resp.status_code == 503, f"/ready answered {resp.status_code} on an unmigrated database: {resp.text}"
        assert (
            resp.json()["type"].endswith("/database-not-migrated") and "alembic upgrade head" in resp.json()["detail"]
        )
        assert resp.headers["retry-after"].isdigit()
        await upgrade_to_head(app.state.database)  # the operator migrates: ready without a restart
        resp = await client.get("/ready")
        assert resp.status_code == 200, resp.text
