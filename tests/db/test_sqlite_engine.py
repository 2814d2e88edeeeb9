"""SQLite configuration and the group-commit writer."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError, OperationalError

from bench.harness import STALLED_AFTER_S
from service.db.engine import Database
from service.db.errors import DatabaseFault, DatabaseUnavailable
from service.db.migrate import upgrade_to_head
from service.db.models import episodes
from service.lib.problems import fault_status
from service.settings import Settings
from tests.db.rows import episode_row


async def _db(tmp_path: Path, **kw) -> Database:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'e.db'}", **kw)
    await upgrade_to_head(db)
    return db


async def test_pragmas_are_applied_on_every_connection(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    try:
        pragmas = await db.read(
            lambda c: [
                c.execute(text(f"PRAGMA {p}")).scalar()
                for p in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            ]
        )
        assert pragmas == ["wal", 2, 1, 10_000]  # synchronous=FULL is 2: fsync at every commit
    finally:
        await db.dispose()


async def test_network_file_system_settings(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'n.db'}",
            "SQLITE_JOURNAL_MODE": "delete",
            "SQLITE_SYNCHRONOUS": "full",
        }
    )
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
            conn.execute(insert(episodes).values(**episode_row(i)))
            return i

        def add_twice(conn, i: int) -> None:  # writes, then fails: its first insert must not survive
            conn.execute(insert(episodes).values(**episode_row(i)))
            conn.execute(insert(episodes).values(**episode_row(i)))

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
    await db.write(lambda c: c.execute(insert(episodes).values(**episode_row(7))))
    await db.dispose()
    again = Database(f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    try:
        assert await again.read(lambda c: c.execute(select(episodes.c.id)).scalar()) == "ep-7"
    finally:
        await again.dispose()


# ---- faults inside the writer: SQLITE_FULL rolls the whole transaction back ------------------------
#
# PRAGMA max_page_count makes SQLite fail with SQLITE_FULL exactly as a full disk does, on any machine
# (tests/system/test_faults_disk.py fills a real small disk). On SQLITE_FULL mid-transaction SQLite usually
# rolls the *whole* transaction back by itself; the writer must notice and fail the whole batch.


def _bigepisode_row(i: int, size: int = 3000) -> dict:
    return {**episode_row(i), "state": {"pad": "x" * size}}


def _limit_file(conn, extra_pages: int) -> None:
    pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    conn.exec_driver_sql(f"PRAGMA max_page_count={pages + extra_pages}")


def _unlimit_file(conn) -> None:
    conn.exec_driver_sql("PRAGMA max_page_count=4294967294")


async def _one_batch(db: Database, jobs: list) -> list:
    """Run ``jobs`` (db.write coroutines) as one writer batch: hold the writer until all are queued.

    Every job must be answered (each caller's wait is bounded; STALLED_AFTER_S only keeps a wedged
    writer from hanging the test); an unanswered one is returned as ``"unanswered"``."""
    started, gate = threading.Event(), threading.Event()

    def hold(_conn) -> None:
        started.set()
        gate.wait(STALLED_AFTER_S)  # a safety net: opened once every job is queued behind this one

    blocker = asyncio.ensure_future(db.write(hold))
    deadline = time.monotonic() + STALLED_AFTER_S
    while not started.is_set():
        assert time.monotonic() < deadline, "the writer never ran the holding job"
        await asyncio.sleep(0.01)
    tasks = [asyncio.ensure_future(job) for job in jobs]
    assert db._writer is not None
    while db._writer._queue.qsize() < len(jobs):  # all of them wait behind the held job: the next batch
        assert time.monotonic() < deadline, "the jobs never reached the writer's queue"
        await asyncio.sleep(0.005)
    gate.set()
    await blocker
    done, pending = await asyncio.wait(tasks, timeout=STALLED_AFTER_S)
    for task in pending:
        task.cancel()
    return [(t.exception() or t.result()) if t in done else "unanswered" for t in tasks]


@pytest.fixture
async def loop_errors() -> list[dict]:
    """Errors the event loop reported (a future resolved twice shows up here as InvalidStateError)."""
    seen: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: seen.append(context))
    return seen


@pytest.mark.parametrize("journal_mode", ["WAL", "DELETE"])
async def test_a_batch_sqlite_rolled_back_is_never_acknowledged(
    tmp_path: Path, journal_mode: str, loop_errors: list[dict]
) -> None:
    db = await _db(tmp_path, sqlite_journal_mode=journal_mode)
    try:
        await db.write(_limit_file, 8)

        def add(conn, i: int) -> int:
            conn.execute(insert(episodes).values(**_bigepisode_row(i)))
            return i

        outcomes = await _one_batch(db, [db.write(add, i) for i in range(40)])
        assert "unanswered" not in outcomes, "a job of the batch was never answered"
        acked = {o for o in outcomes if isinstance(o, int)}
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        assert failed, "the file limit was never reached: the fault did not happen"
        stored = await db.read(lambda c: {int(r[0][3:]) for r in c.execute(select(episodes.c.id))})
        assert acked - stored == set(), f"acknowledged but not stored: {sorted(acked - stored)} of {len(acked)}"
        assert stored - acked == set(), f"reported failed but stored: {sorted(stored - acked)}"
        assert {fault_status(e) if isinstance(e, DatabaseFault) else None for e in failed} == {507}, {
            repr(e)[:120] for e in failed
        }
        assert not loop_errors, loop_errors[:2]

        await db.write(_unlimit_file)  # space returns: the same writer stores again
        assert await db.write(add, 1000) == 1000
        assert (
            await db.read(lambda c: c.execute(select(episodes.c.id).where(episodes.c.id == "ep-1000")).scalar())
            == "ep-1000"
        )
    finally:
        await db.dispose()


async def test_a_job_that_hides_a_rolled_back_transaction_is_never_acknowledged(
    tmp_path: Path, loop_errors: list[dict]
) -> None:
    """A job catches the database's error itself, so nothing raises — but SQLite has already rolled the
    transaction back (and the savepoint RELEASE after it fails). Every job is answered exactly once, that
    job fails (the others run again without it), none is reported committed unless it is stored, and the
    writer keeps working."""
    db = await _db(tmp_path)
    try:
        await db.write(_limit_file, 4)

        def add(conn, i: int) -> int:
            conn.execute(insert(episodes).values(**_bigepisode_row(i, size=100)))
            return i

        def add_and_swallow(conn, i: int) -> str:
            try:
                conn.execute(insert(episodes).values(**_bigepisode_row(i, size=200_000)))  # far past the limit
            except OperationalError:
                pass
            return "swallowed"

        def add_twice(conn, i: int) -> None:  # its own IntegrityError: the batch is re-run with savepoints
            conn.execute(insert(episodes).values(**_bigepisode_row(i, size=100)))
            conn.execute(insert(episodes).values(**_bigepisode_row(i, size=100)))

        jobs = [
            db.write(add, 0),
            db.write(add, 1),
            db.write(add_and_swallow, 2),
            db.write(add, 3),
            db.write(add_twice, 4),
            db.write(add, 5),
        ]
        outcomes = await _one_batch(db, jobs)
        assert not [c for c in loop_errors if "InvalidStateError" in repr(c)], "a job was resolved twice"
        assert "unanswered" not in outcomes, f"jobs left unanswered: {outcomes}"
        acked = {o for o in outcomes if isinstance(o, int)}
        stored = await db.read(lambda c: {int(r[0][3:]) for r in c.execute(select(episodes.c.id))})
        assert acked <= stored, f"acknowledged but not stored: {sorted(acked - stored)}"
        assert outcomes[2] != "swallowed", "a job whose transaction was rolled back was reported committed"

        await db.write(_unlimit_file)
        assert await db.write(add, 7) == 7
    finally:
        await db.dispose()


# ---- a connection thread whose first connect fails ---------------------------------------------------


async def test_a_connection_thread_survives_a_failed_first_connect(tmp_path: Path) -> None:
    """The database file is behind a directory that is renamed away when the threads first connect
    (the path is a symlink into ``volume/``). Reads and writes fail fast while it is gone and work
    again — same Database object, no restart — once it is back. "Fast" without a clock: every bound a
    call could wait out is set longer than the safety net that fails a call that does not answer."""
    volume = tmp_path / "volume"
    volume.mkdir()
    real = Database(f"sqlite+aiosqlite:///{volume / 'e.db'}")
    await upgrade_to_head(real)
    await real.write(lambda c: c.execute(insert(episodes).values(**episode_row(1))))
    await real.dispose()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "e.db").symlink_to(volume / "e.db")
    volume.rename(tmp_path / "volume.away")

    never = 2 * STALLED_AFTER_S
    db = Database(
        f"sqlite+aiosqlite:///{tmp_path / 'data' / 'e.db'}",
        connect_timeout_s=never,
        pool_timeout_s=never,
        statement_timeout_s=never,
    )
    try:
        for attempt in (
            lambda: db.read(lambda c: c.execute(select(episodes.c.id)).scalar()),
            lambda: db.write(lambda c: c.execute(insert(episodes).values(**episode_row(2)))),
        ):
            with pytest.raises(Exception) as failed:  # noqa: PT011 - the class is checked below
                await asyncio.wait_for(attempt(), STALLED_AFTER_S)
            assert not isinstance(failed.value, TimeoutError), "a database call hung while the file was unreachable"
            assert fault_status(failed.value) == 503, repr(failed.value)

        (tmp_path / "volume.away").rename(volume)  # the file is back
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the loop ends when the threads reconnect
        while True:
            try:
                read = db.read(lambda c: c.execute(select(episodes.c.id)).scalar())
                assert await asyncio.wait_for(read, STALLED_AFTER_S) == "ep-1"
                write = db.write(lambda c: c.execute(insert(episodes).values(**episode_row(2))))
                await asyncio.wait_for(write, STALLED_AFTER_S)
                break
            except TimeoutError:
                pytest.fail("a database call hung after the file came back")
            except Exception:  # noqa: BLE001 - still reconnecting (backoff)
                assert time.monotonic() < deadline, "the connection threads never reconnected"
                await asyncio.sleep(0.1)
        assert await db.read(lambda c: {r[0] for r in c.execute(select(episodes.c.id))}) == {"ep-1", "ep-2"}
    finally:
        await asyncio.wait_for(db.dispose(), 15)


async def test_a_caller_waits_at_most_the_bound_and_a_job_given_up_on_never_runs(tmp_path: Path) -> None:
    """The writer is stuck (here: a job that blocks it) past pool + statement timeout: callers get a
    503 fault at the bound instead of waiting, and a job whose caller gave up before it started is
    never run — so a failed answer means "not applied". The writer stays stuck until the test has its
    answer: an answer at all is one given at the bound, which it names."""
    db = await _db(tmp_path, pool_timeout_s=0.2, statement_timeout_s=0.2)
    running, gate = threading.Event(), threading.Event()

    def block(_conn) -> None:
        running.set()
        gate.wait(STALLED_AFTER_S)  # a safety net: the test opens the gate

    try:
        stuck = asyncio.ensure_future(db.write(block))
        while not running.is_set():
            await asyncio.sleep(0.01)
        with pytest.raises(Exception) as waited:  # noqa: PT011 - checked below
            await db.write(lambda c: c.execute(insert(episodes).values(**episode_row(1))))
        assert fault_status(waited.value) == 503, repr(waited.value)
        assert "no answer within 0.4s" in str(waited.value), str(waited.value)  # pool + statement timeout
        gate.set()
        with pytest.raises(DatabaseUnavailable):  # the stuck job's caller gave up too
            await stuck
        await db.write(lambda c: c.execute(insert(episodes).values(**episode_row(2))))  # the writer carries on
        assert await db.read(lambda c: {r[0] for r in c.execute(select(episodes.c.id))}) == {"ep-2"}
    finally:
        gate.set()
        await db.dispose()
