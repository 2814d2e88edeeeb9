"""The writer's edges: a write whose outcome cannot be known, jobs that raise anything, a closed
database, a stalled connection thread, and PostgreSQL's retryable failures (deadlock, serialization).

- A write whose caller stopped waiting after it had *started* may still commit: it is answered
  ``outcome-unknown`` (503), whose detail says how to find out, not a plain "retry" — a WebSocket step
  has no request_id, so a blind retry would apply it twice. One that never started is a plain 503 and
  is never run.
- A job that raises a ``BaseException`` costs only itself; the connection thread lives on.
- After ``close`` every job is answered at once (503), none waits for its bound, no thread restarts.
- ``GET /ready`` answers 503 while a connection thread has been running one batch for longer than the
  statement timeout, at once (not after the caller's wait bound).
- PostgreSQL 40P01/40001: classified 503 (retryable), and a write is run once more before that.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest
from litestar.testing import AsyncTestClient, TestClient
from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app
from service.db import repository
from service.db.engine import Database
from service.db.errors import DatabaseOutcomeUnknown, DatabaseUnavailable, classify
from service.db.migrate import upgrade_to_head
from service.db.models import episodes
from service.settings import Settings
from tests.db.rows import add_episode
from tests.db.test_sqlite_engine import _one_batch
from tests.waiting import until_async

WORKFLOW = next(t.id for t in core.TASKS.values() if t.family == "workflow")


def _ids(conn) -> set[int]:
    return {int(r[0][3:]) for r in conn.execute(select(episodes.c.id))}


async def _db(tmp_path: Path, **kw: Any) -> Database:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", **kw)
    await upgrade_to_head(db)
    return db


class Gate:
    """A job that holds the connection thread until released."""

    def __init__(self) -> None:
        self.running, self.open = threading.Event(), threading.Event()

    def job(self, conn, then=None) -> Any:
        self.running.set()
        self.open.wait(STALLED_AFTER_S)  # a safety net: the test opens it
        return then(conn) if then is not None else None

    async def until_running(self) -> None:
        await until_async(self.running.is_set, "the gate job started")


# ---- item: a write that started before its wait ran out ---------------------------------------


async def test_a_write_that_had_started_when_its_wait_ran_out_is_answered_outcome_unknown(tmp_path: Path) -> None:
    db = await _db(tmp_path, pool_timeout_s=0.2, statement_timeout_s=0.2)
    gate = Gate()
    try:
        started = asyncio.ensure_future(
            db.write(gate.job, lambda c: add_episode(c, 1))
        )  # starts, then outlives its bound
        await gate.until_running()
        queued = asyncio.ensure_future(db.write(add_episode, 2))  # behind it: never starts within its bound
        # the gate stays shut until both are answered: an answer at all is one at the bound
        done, _ = await asyncio.wait([started, queued], timeout=STALLED_AFTER_S)
        assert len(done) == 2, "a write waited past its bound"
        assert isinstance(started.exception(), DatabaseOutcomeUnknown), repr(started.exception())
        assert started.exception().slug == "outcome-unknown" and "GET /state" in started.exception().detail
        assert type(queued.exception()) is DatabaseUnavailable, repr(queued.exception())
        gate.open.set()
        await db.write(add_episode, 3)  # the writer carries on, and the started write did commit after all
        assert await db.read(_ids) == {1, 3}, "the started write was not committed, or the queued one ran"
    finally:
        gate.open.set()
        await db.dispose()


def test_a_websocket_step_whose_outcome_is_unknown_says_how_to_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's write runs past the wait bound (its COMMIT comes later): the error frame says it may
    have been applied and to send a state frame; the state frame then shows it was."""
    settings = Settings.from_env(
        {
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'ws.db'}",
            "BASELINE_SEEDS_PER_TASK": "1",
            "DB_POOL_TIMEOUT_S": "0.3",
            "DB_STATEMENT_TIMEOUT_S": "0.3",
        }
    )
    gate = Gate()
    record_step = repository._record_step
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": WORKFLOW, "seed": 1}})
        assert ws.receive_json()["type"] == "observation"
        monkeypatch.setattr(repository, "_record_step", lambda conn, *a: gate.job(conn, lambda c: record_step(c, *a)))
        ws.send_json({"type": "step", "data": {"lookup": "policy"}})
        frame = ws.receive_json()
        gate.open.set()
        monkeypatch.undo()
        assert frame["type"] == "error" and frame["data"].get("status") == 503, frame
        message = frame["data"]["message"]
        assert "may still be applied" in message and "state frame" in message and "step_count" in message, message
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the write commits once the gate opens
        while True:
            ws.send_json({"type": "state"})
            state = ws.receive_json()["data"]
            if state["step_count"] == 1:
                break
            assert time.monotonic() < deadline, f"the step was never applied: {state}"
            time.sleep(0.05)
        ws.send_json({"type": "step", "data": {"lookup": "order"}})  # the session goes on from the applied step
        frame = ws.receive_json()
        assert frame["type"] == "observation", frame


# ---- item: jobs that raise anything; a closed database --------------------------------------------


class Boom(BaseException):
    """Not an Exception: what KeyboardInterrupt, SystemExit or a stray CancelledError look like to the writer."""


def _boom(_conn) -> None:
    raise Boom("from a transaction function")


async def test_a_job_raising_a_base_exception_costs_only_itself(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    try:
        outcomes = await _one_batch(db, [db.write(add_episode, 1), db.write(_boom), db.write(add_episode, 2)])
        assert "unanswered" not in outcomes, f"the connection thread died: {outcomes}"
        assert outcomes[0] == 1 and outcomes[2] == 2, outcomes
        assert isinstance(outcomes[1], Exception) and isinstance(outcomes[1].__cause__, Boom), repr(outcomes[1])
        assert await asyncio.wait_for(db.write(add_episode, 3), 5) == 3
        assert await db.read(_ids) == {1, 2, 3}
    finally:
        await db.dispose()


async def test_after_close_every_job_is_answered_at_once_and_no_thread_restarts(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    writer = db._writer
    assert writer is not None
    try:
        await anyio.to_thread.run_sync(writer.close)
        with pytest.raises(DatabaseUnavailable):
            await asyncio.wait_for(db.write_unbounded(add_episode, 1), 5)  # unbounded: only an answer ends it
        assert writer._thread is None, "submit() after close() started a new connection thread"
    finally:
        await db.dispose()


async def test_a_job_queued_behind_the_stop_sentinel_is_answered(tmp_path: Path) -> None:
    db = await _db(tmp_path)
    writer = db._writer
    assert writer is not None
    gate = Gate()
    try:
        held = asyncio.ensure_future(db.write(gate.job))
        await gate.until_running()
        writer._queue.put(None)  # the thread stops at this, as it does at close()
        behind = asyncio.ensure_future(db.write_unbounded(add_episode, 1))
        await until_async(lambda: writer._queue.qsize() == 2, "the job queued behind the stop sentinel")
        gate.open.set()
        await held
        with pytest.raises(DatabaseUnavailable):
            await asyncio.wait_for(behind, STALLED_AFTER_S)
    finally:
        gate.open.set()
        await db.dispose()


# ---- item: a stalled connection thread is "not ready" -----------------------------------------------


async def test_ready_reports_a_stalled_writer_at_once(tmp_path: Path) -> None:
    """Statement timeout 0.2 s, pool timeout longer than the test's safety net: a caller would wait that
    long for the stuck writer (so an answer at all is one that did not wait), but readiness says
    "stalled" as soon as its batch has run longer than the statement timeout."""
    settings = Settings.from_env(
        {
            "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'r.db'}",
            "BASELINE_SEEDS_PER_TASK": "1",
            "DB_POOL_TIMEOUT_S": str(2 * STALLED_AFTER_S),
            "DB_STATEMENT_TIMEOUT_S": "0.2",
        }
    )
    gate = Gate()
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/ready")).status_code == 200
        database: Database = app.state.database
        held = asyncio.ensure_future(database.write(gate.job))
        try:
            await gate.until_running()
            await until_async(lambda: database._writer.running_for() > 0.2, "the batch outran the statement timeout")
            try:
                resp = await asyncio.wait_for(client.get("/ready"), STALLED_AFTER_S)
            except TimeoutError:
                pytest.fail("GET /ready waited for the stalled writer instead of reporting it")
            assert resp.status_code == 503 and resp.headers["retry-after"].isdigit(), resp.text
            with pytest.raises(DatabaseUnavailable, match="stalled"):
                await asyncio.wait_for(database.ping(), STALLED_AFTER_S)
        finally:
            gate.open.set()
        await asyncio.wait_for(held, STALLED_AFTER_S)  # within its caller's bound: it simply finishes
        assert (await client.get("/ready")).status_code == 200


# ---- item: PostgreSQL deadlock and serialization failures ------------------------------------------


def test_deadlock_and_serialization_failure_are_retryable_faults() -> None:
    assert classify(asyncpg.exceptions.DeadlockDetectedError("deadlock detected")) is DatabaseUnavailable
    assert classify(asyncpg.exceptions.SerializationError("could not serialize access")) is DatabaseUnavailable


async def test_a_postgresql_deadlock_is_run_once_more(settings: Settings) -> None:
    """The service's write and another connection lock two rows in opposite orders; PostgreSQL aborts the
    service's transaction (its deadlock check fires first). The write is run again and succeeds."""
    if settings.is_sqlite:
        pytest.skip("PostgreSQL only: SQLite has one writer and no deadlocks")
    db = settings.database()
    other: asyncpg.Connection | None = None
    try:
        await upgrade_to_head(db)
        await db.write(lambda c: [add_episode(c, 1), add_episode(c, 2)])
        dsn = make_url(settings.database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        other = await asyncpg.connect(dsn, server_settings={"search_path": settings.database_schema or "public"})
        await other.execute("SET deadlock_timeout = '30s'")  # so PostgreSQL picks the service's transaction
        tx = other.transaction()
        await tx.start()
        await other.execute("UPDATE episodes SET seed = seed + 100 WHERE id = 'ep-1'")
        attempts: list[int] = []

        def cross(conn) -> int:
            attempts.append(1)
            conn.execute(update(episodes).where(episodes.c.id == "ep-2").values(seed=episodes.c.seed + 10))
            conn.execute(
                update(episodes).where(episodes.c.id == "ep-1").values(seed=episodes.c.seed + 10)
            )  # waits for `other`
            return len(attempts)

        write = asyncio.ensure_future(db.write(cross))
        other_pid = await other.fetchval("SELECT pg_backend_pid()")

        async def blocked_by_other() -> bool:  # this test's sessions only: others may wait on locks of their own
            query = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
            return bool(await other.fetchval(query, other_pid))

        await until_async(blocked_by_other, "the service's write waited for the other connection's lock on ep-1")
        await other.execute("UPDATE episodes SET seed = seed + 100 WHERE id = 'ep-2'")  # the deadlock; ours is aborted
        await tx.commit()
        assert await asyncio.wait_for(write, STALLED_AFTER_S) == 2, f"{attempts}"
        seeds = await db.read(lambda c: dict(c.execute(select(episodes.c.id, episodes.c.seed)).all()))
        assert seeds == {"ep-1": 111, "ep-2": 112}, seeds
    finally:
        if other is not None:
            await other.close()
        await db.dispose()
