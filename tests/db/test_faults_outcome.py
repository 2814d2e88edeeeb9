"""What faults do to answers (issue 21, findings 16 and 17): an unknown outcome is said to be unknown on
every transport, ``/ready`` fails when a real write fails, a full PostgreSQL disk is a 507, and a jump of
the wall clock ages nothing.

The faults are made in process: SQLite's COMMIT is made to fail as a disk's ``fsync`` does (``EIO``:
SQLite answers ``SQLITE_IOERR_FSYNC``) — after the commit's pages are written, so the step is stored
although the COMMIT failed, as a WAL commit whose frames were written is replayed by the next open — or
before, as a file system gone read-only fails it; ``PRAGMA max_page_count`` makes SQLite full as a full
disk does (tests/system/test_faults_disk.py fills a real one)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient, TestClient
from sqlalchemy import exc as sa_exc
from sqlalchemy import select, text
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from service import env as core
from service.app import create_app
from service.db import clock, models
from service.db.errors import DatabaseFull, DatabaseOutcomeUnknown, classify
from service.db.migrate import upgrade_to_head
from service.db.models import episodes
from service.domain.runs.services import RunService
from service.housekeeping import retention_pass
from service.lib.problems import fault_status
from service.settings import Settings
from tests.db.rows import add_episode
from tests.db.test_sqlite_engine import _bigepisode_row, _limit_file, _unlimit_file

OUTCOME_UNKNOWN = "https://ecomm-support-env.local/problems/outcome-unknown"
WORKFLOW = next(t.id for t in core.TASKS.values() if t.family == "workflow")


def _io_error(code: int, name: str) -> sqlite3.OperationalError:
    err = sqlite3.OperationalError("disk I/O error")
    err.sqlite_errorcode, err.sqlite_errorname = code, name  # what SQLite sets on a failed fsync / write
    return err


class FailingCommit:
    """While armed, a COMMIT of the writer thread that has something to write fails: ``after`` the commit is
    done (fsync EIO after the WAL frames were written: stored), or instead of it (read-only file system: not
    stored). A COMMIT with nothing to write syncs nothing, so it succeeds, as it does on such a disk."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after: bool = True, code: int = 1034) -> None:
        self.armed, self.after, self.code, self.failed = False, after, code, 0
        real = SQLiteDialect_pysqlite.do_commit
        committed: dict[int, int] = {}  # connection → its total_changes at its last COMMIT

        def do_commit(dialect: Any, dbapi_connection: Any) -> None:
            writer = threading.current_thread().name == "sqlite-writer"
            changes = dbapi_connection.total_changes
            wrote = changes != committed.get(id(dbapi_connection), 0)
            committed[id(dbapi_connection)] = changes
            if not (self.armed and writer and wrote):
                return real(dialect, dbapi_connection)
            self.failed += 1
            if self.after:
                real(dialect, dbapi_connection)
            else:
                dbapi_connection.rollback()
            raise _io_error(self.code, "SQLITE_IOERR_FSYNC" if self.code == 1034 else "SQLITE_READONLY")

        monkeypatch.setattr(SQLiteDialect_pysqlite, "do_commit", do_commit)


def _sqlite_settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env(
        {"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'f.db'}", "BASELINE_SEEDS_PER_TASK": "1", **env}
    )


# ---- finding 17: a COMMIT that failed with an I/O error is an unknown outcome ------------------------


async def test_a_commit_failing_with_an_io_error_is_outcome_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _sqlite_settings(tmp_path).database()
    await upgrade_to_head(db)
    fault = FailingCommit(monkeypatch)
    try:
        fault.armed = True
        with pytest.raises(DatabaseOutcomeUnknown) as raised:
            await db.write(add_episode, 1)
        fault.armed = False
        assert raised.value.slug == "outcome-unknown" and "same request_id" in raised.value.detail
        assert await db.read(lambda c: [r[0] for r in c.execute(select(episodes.c.id))]) == ["ep-1"]  # stored
        assert await db.write(add_episode, 2) == 2  # the writer reopened and goes on
    finally:
        await db.dispose()


async def test_a_step_whose_commit_failed_says_outcome_unknown_and_a_retry_applies_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = FailingCommit(monkeypatch)
    async with AsyncTestClient(app=create_app(_sqlite_settings(tmp_path))) as client:
        episode = (await client.post("/reset", json={"task_id": WORKFLOW, "seed": 2})).json()["metadata"]["episode_id"]
        step = {"episode_id": episode, "action": {"lookup": "order"}, "request_id": "once"}
        fault.armed = True
        answer = await client.post("/step", json=step)
        fault.armed = False
        assert answer.status_code == 503, answer.text
        assert answer.json()["type"] == OUTCOME_UNKNOWN and "same request_id" in answer.json()["detail"]
        retried = await client.post("/step", json=step)  # as told: the same request_id
        assert retried.status_code == 200, retried.text
        assert retried.json()["metadata"]["replayed"] is True  # it had been stored: not applied twice
        assert (await client.get("/state", params={"episode_id": episode})).json()["step_count"] == 1

        other = (await client.post("/reset", json={"task_id": WORKFLOW, "seed": 5})).json()["metadata"]["episode_id"]
        arguments = {"episode_id": other, "action": {"lookup": "policy"}, "request_id": "mcp-once"}
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "step", "arguments": arguments}}
        fault.armed = True
        answer = (await client.post("/mcp", json=call)).json()
        fault.armed = False
        result = answer["result"]
        assert result["isError"] is True and result["structuredContent"]["type"] == OUTCOME_UNKNOWN, answer
        retried = (await client.post("/mcp", json=call)).json()["result"]
        assert retried["isError"] is False and retried["structuredContent"]["metadata"]["replayed"] is True
        assert (await client.get("/state", params={"episode_id": other})).json()["step_count"] == 1


def test_a_websocket_step_whose_commit_failed_is_outcome_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = FailingCommit(monkeypatch)
    with TestClient(create_app(_sqlite_settings(tmp_path))) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": WORKFLOW, "seed": 3}})
        assert ws.receive_json()["type"] == "observation"
        fault.armed = True
        ws.send_json({"type": "step", "data": {"lookup": "order"}})
        frame = ws.receive_json()["data"]
        fault.armed = False
        assert frame["code"] == "OUTCOME_UNKNOWN" and frame["problem_type"] == OUTCOME_UNKNOWN, frame
        assert "state frame" in frame["message"] and "step_count" in frame["message"], frame
        ws.send_json({"type": "state"})  # as told: check before sending it again
        assert ws.receive_json()["data"]["step_count"] == 1  # it was applied; a client that checks sends the next


def test_a_postgresql_full_disk_is_507_even_when_the_connection_is_dropped() -> None:
    """PostgreSQL answers 53100 and may end the connection (a PANIC writing WAL): SQLAlchemy then reports the
    connection invalidated. The server's answer decides: 507, not 503."""

    class DiskFull(Exception):
        sqlstate = "53100"

    wrapped = sa_exc.OperationalError("INSERT …", {}, DiskFull("could not extend file: No space left on device"))
    wrapped.connection_invalidated = True
    assert classify(wrapped) is DatabaseFull


def test_a_postgresql_that_cannot_write_its_wal_is_a_full_disk() -> None:
    """What a PostgreSQL whose WAL disk is full answers (seen on a private server on a full tmpfs: it PANICs
    and closes every connection, then its restart fails the same way): no SQLSTATE, the OS's ENOSPC text.
    Before: 503 database-unavailable for every step and /ready; now 507, as for any full disk."""
    import asyncpg

    closed = asyncpg.exceptions.ConnectionDoesNotExistError(
        'connection was closed in the middle of operation: could not write to file "pg_wal/xlogtemp.10666": '
        "No space left on device"
    )
    wrapped = sa_exc.DBAPIError("UPDATE episodes …", {}, closed, connection_invalidated=True)
    assert classify(wrapped) is DatabaseFull


# ---- finding 16: /ready fails when a real write fails -----------------------------------------------


async def test_ready_fails_on_a_full_database(tmp_path: Path) -> None:
    app = create_app(_sqlite_settings(tmp_path))
    app.state.readiness.write_confirmed_s = 0.0  # every probe writes
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/ready")).status_code == 200
        db = app.state.database
        await db.write(_limit_file, 2)
        try:
            full = 0
            for i in range(200):  # until writes fail as on a full disk
                try:
                    await db.write(lambda c, i=i: c.execute(episodes.insert().values(**_bigepisode_row(1000 + i))))
                except DatabaseFull:
                    full += 1
                    if full >= 3:
                        break
            assert full >= 3, "the database never filled up"
            resp = await client.get("/ready")
            assert resp.status_code == 507, resp.text
        finally:
            await db.write(_unlimit_file)
        assert (await client.get("/ready")).status_code == 200


@pytest.mark.parametrize(("after", "code"), [(True, 1034), (False, 8)], ids=["fsync-eio", "read-only"])
async def test_ready_fails_when_the_commit_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: bool, code: int
) -> None:
    fault = FailingCommit(monkeypatch, after=after, code=code)
    app = create_app(_sqlite_settings(tmp_path))
    app.state.readiness.write_confirmed_s = 0.0  # every probe writes
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/ready")).status_code == 200
        fault.armed = True
        resp = await client.get("/ready")
        fault.armed = False
        assert resp.status_code == 503, resp.text
        assert fault.failed >= 1  # the probe wrote (a read and an empty transaction never reach COMMIT's sync)
        assert (await client.get("/ready")).status_code == 200


async def test_ready_writes_on_postgresql_too(settings: Settings) -> None:
    if settings.is_sqlite:
        pytest.skip("PostgreSQL: a trigger in the test's own schema refuses the probe's row")
    app = create_app(settings)
    app.state.readiness.write_confirmed_s = 0.0  # every probe writes
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/ready")).status_code == 200
        db = settings.database()  # the app's own runs on the client's event loop
        try:
            await db.write(
                lambda c: [
                    c.execute(
                        text(
                            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'read-only' "
                            "USING ERRCODE = '25006'; END $$ LANGUAGE plpgsql"
                        )
                    ),
                    c.execute(
                        text("CREATE TRIGGER refuse BEFORE INSERT ON episodes FOR EACH ROW EXECUTE FUNCTION refuse()")
                    ),
                ]
            )
            assert (await client.get("/ready")).status_code == 503
            assert await db.read(lambda c: c.execute(select(episodes.c.id)).all()) == []  # no probe left behind
        finally:
            await db.dispose()


# ---- finding 17: a jump of the wall clock ages nothing ---------------------------------------------


@pytest.fixture
def wall_clock_jump(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Makes the wall clock (time.time, datetime.now as the models module sees it) jump by ``hours``."""

    def jump(hours: float) -> None:
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + hours * 3600)

        class Jumped(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                return datetime.now(tz) + timedelta(hours=hours)

        monkeypatch.setattr(models, "datetime", Jumped)

    yield jump


async def test_a_wall_clock_jump_deletes_no_live_episode(settings: Settings, wall_clock_jump: Any) -> None:
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        ids = [(await client.post("/reset", json={"seed": i})).json()["metadata"]["episode_id"] for i in range(3)]
        run = (
            await client.post("/runs", json={"agent": "a", "model": "m", "split": "dev", "limit_per_task": 1})
        ).json()
        wall_clock_jump(25)
        db = settings.database()  # the app's own runs on the client's event loop
        try:
            await retention_pass(db, RunService(db, ttl_s=settings.run_ttl_s), settings)
        finally:
            await db.dispose()
        for episode_id in ids:
            assert (await client.get("/state", params={"episode_id": episode_id})).status_code == 200, episode_id
        assert (await client.get(f"/runs/{run['run_id']}")).json()["status"] == "active"


def test_the_steady_clock_ignores_wall_clock_jumps_and_says_how_far_they_went() -> None:
    wall, mono = [1_000_000.0], [50.0]
    steady = clock.SteadyClock(wall=lambda: wall[0], monotonic=lambda: mono[0])
    start = steady.now()
    assert start == datetime.fromtimestamp(1_000_000.0, UTC)
    mono[0] += 10
    wall[0] += 10 + 25 * 3600  # 10 s pass, and the wall clock jumps 25 h ahead
    assert steady.now() - start == timedelta(seconds=10)
    assert round(steady.drift()) == 25 * 3600


async def test_a_postgresql_full_disk_at_commit_is_outcome_unknown_not_507() -> None:
    """The one exception to "a full disk is 507": a COMMIT answered by a dropped connection and the OS's ENOSPC
    text, no SQLSTATE. The server PANICs when *any* backend cannot write WAL, so this COMMIT's record may
    have been flushed before it did — the step may be stored. Saying 507 ("not stored, retry later") would be
    a guess; the answer is 503 outcome-unknown, which says to check the state or retry with the same
    request_id (docs/reliability-faults.md). A refusal the server answered (53100) is still 507."""
    import asyncpg

    from service.db.engine import _pg_transaction

    def dropped() -> Exception:
        closed = asyncpg.exceptions.ConnectionDoesNotExistError(
            'connection was closed in the middle of operation: could not write to file "pg_wal/xlogtemp.1": '
            "No space left on device"
        )
        return sa_exc.DBAPIError("COMMIT", {}, closed, connection_invalidated=True)

    class Refused(Exception):
        sqlstate = "53100"

    class Conn:
        def __init__(self, commit_error: Exception) -> None:
            self.commit_error = commit_error

        async def __aenter__(self) -> Conn:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def begin(self) -> None:
            return None

        async def run_sync(self, job: Any) -> Any:
            return job(None)

        async def commit(self) -> None:
            raise self.commit_error

    with pytest.raises(DatabaseOutcomeUnknown):
        await _pg_transaction(lambda: Conn(dropped()), lambda conn: 1, True)
    refused = sa_exc.OperationalError("COMMIT", {}, Refused("could not extend file: No space left on device"))
    with pytest.raises(sa_exc.OperationalError) as raised:
        await _pg_transaction(lambda: Conn(refused), lambda conn: 1, True)
    assert classify(raised.value) is DatabaseFull  # the caller turns it into 507
    assert classify(dropped()) is DatabaseFull  # before the COMMIT (a statement of the job): 507
    problem = DatabaseOutcomeUnknown("the COMMIT was not confirmed")
    assert fault_status(problem) == 503 and fault_status(DatabaseFull("full")) == 507
