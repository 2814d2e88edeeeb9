"""Retention: what the background task deletes, when, and what it never touches (issue 13, Deliver)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import select, update

from service.app import create_app
from service.db.models import episodes as ep_table
from service.db.models import runs as runs_table
from service.db.models import transitions, utcnow
from service.domain.runs.services import RunService
from service.housekeeping import retention_pass
from service.settings import Settings
from tests.api.test_runs import auth, create_run, play_run
from tests.waiting import until_async


async def _is_404(response) -> bool:
    return (await response).status_code == 404


Client = AsyncTestClient[Litestar]
DAY = timedelta(days=1)


async def _age(settings: Settings, *, episode_ids: list[str] = (), run_ids: list[str] = (), by: timedelta) -> None:
    when = utcnow() - by

    def age(conn) -> None:
        if episode_ids:
            conn.execute(update(ep_table).where(ep_table.c.id.in_(episode_ids)).values(updated_at=when))
        for run_id in run_ids:
            conn.execute(update(runs_table).where(runs_table.c.id == run_id).values(updated_at=when))
            conn.execute(update(ep_table).where(ep_table.c.run_id == run_id).values(updated_at=when))

    db = settings.database()
    try:
        await db.write(age)
    finally:
        await db.dispose()


async def _mark_ranked(settings: Settings, run_id: str) -> None:
    db = settings.database()
    try:
        await db.write(
            lambda conn: conn.execute(update(runs_table).where(runs_table.c.id == run_id).values(full_split=True))
        )
    finally:
        await db.dispose()


async def _pass(settings: Settings):
    """One retention pass on its own connection (the app's engine lives on the test client's loop)."""
    db = settings.database()
    try:
        return await retention_pass(db, RunService(db, ttl_s=settings.run_ttl_s), settings)
    finally:
        await db.dispose()


async def _plain(client: Client, task: str, finish: bool) -> str:
    reset = (await client.post("/reset", json={"task_id": task, "seed": 1})).json()
    episode_id = reset["metadata"]["episode_id"]
    action = {"decision": "reject"} if finish else {"lookup": "policy"}
    step = (await client.post("/step", json={"episode_id": episode_id, "action": action})).json()
    assert step["done"] is finish
    return episode_id


async def test_retention_deletes_stale_plain_episodes_and_expired_runs_never_a_ranked_run(
    app: Litestar, settings: Settings
) -> None:
    async with AsyncTestClient(app=app) as client:
        stale_open = await _plain(client, "decision-easy", finish=False)
        fresh_open = await _plain(client, "decision-easy", finish=False)
        stale_done = await _plain(client, "decision-easy", finish=True)
        recent_done = await _plain(client, "decision-easy", finish=True)
        idle = await create_run(client, split="dev", task_ids=["decision-easy"], limit_per_task=2)
        await play_run(client, idle, stop_after=1)
        ranked = await create_run(client, split="dev", task_ids=["decision-easy"], limit_per_task=1)
        await play_run(client, ranked)
        assert (await client.get(f"/runs/{ranked['run_id']}")).json()["status"] == "complete"
        await _mark_ranked(settings, ranked["run_id"])  # stands in for a full-split run (subset runs are practice)
        await _age(settings, episode_ids=[stale_open, recent_done], by=2 * DAY)
        await _age(settings, episode_ids=[stale_done], by=40 * DAY)
        await _age(settings, run_ids=[idle["run_id"]], by=8 * DAY)
        await _age(settings, run_ids=[ranked["run_id"]], by=400 * DAY)

        purged = await _pass(settings)
        assert (purged.unfinished_episodes, purged.finished_episodes, purged.expired_runs, purged.run_episodes) == (
            1,
            1,
            1,
            1,
        )

        for gone in (stale_open, stale_done):
            assert (await client.get("/state", params={"episode_id": gone})).status_code == 404
        for kept in (fresh_open, recent_done):
            assert (await client.get("/state", params={"episode_id": kept})).status_code == 200
        assert (await client.get(f"/runs/{idle['run_id']}")).status_code == 404
        assert (await client.post(f"/runs/{idle['run_id']}/next", headers=auth(idle["run_token"]))).status_code == 404
        # the complete run, its episodes and its leaderboard row are untouched, however old
        page = (await client.get(f"/runs/{ranked['run_id']}")).json()
        assert page["status"] == "complete" and all(e["status"] == "done" for e in page["episodes"])
        db = settings.database()
        try:
            rows = await db.read(lambda conn: conn.execute(select(transitions.c.episode_id)).scalars().all())
        finally:
            await db.dispose()
        assert stale_open not in rows and stale_done not in rows  # their steps went with them
        assert not await _pass(settings)  # a second pass finds nothing


async def test_retention_runs_by_itself_in_the_app_lifespan(settings: Settings) -> None:
    quick = replace(settings, retention_interval_s=0.2)
    async with AsyncTestClient(app=create_app(quick)) as client:
        stale = await _plain(client, "decision-easy", finish=False)
        await _age(settings, episode_ids=[stale], by=2 * DAY)
        gone = lambda: client.get("/state", params={"episode_id": stale})  # noqa: E731 - a one-line local helper
        await until_async(lambda: _is_404(gone()), "the retention loop deleted the stale episode", poll_s=0.1)


def test_retention_settings_come_from_the_environment() -> None:
    s = Settings.from_env(
        {
            "RETAIN_UNFINISHED_EPISODES_S": "3600",
            "RETAIN_FINISHED_EPISODES_S": "off",
            "RETAIN_EXPIRED_RUNS_S": "60",
            "RETENTION_INTERVAL_S": "5",
        }
    )
    assert (
        s.retain_unfinished_episodes_s,
        s.retain_finished_episodes_s,
        s.retain_expired_runs_s,
        s.retention_interval_s,
    ) == (3600.0, None, 60.0, 5.0)
    defaults = Settings.from_env({})
    assert defaults.retain_unfinished_episodes_s == 86400.0 and defaults.retain_finished_episodes_s == 30 * 86400.0


async def test_the_age_scan_of_plain_episodes_is_an_index_search(tmp_path) -> None:
    """Retention's batch query must not filter every episode while it holds the writer: SQLite plans
    it on the partial index of plain episodes by (status, updated_at), not on ix_episodes_run_id or
    a scan (380-550 ms per batch at 200k plain episodes before revision 0006)."""
    from service.db.retention import plain_candidates

    db = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'r.db'}").database()
    try:
        from service.db.migrate import upgrade_to_head

        await upgrade_to_head(db)
        query = plain_candidates("active", utcnow())
        compiled = query.compile(compile_kwargs={"literal_binds": True})

        def plan(conn) -> str:
            return " | ".join(str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}"))

        text = await db.read(plan)
    finally:
        await db.dispose()
    assert "ix_episodes_plain_status_updated_at" in text, text


# ------------------------------------------------------------------ clocks across processes (issue 21)


async def test_a_process_started_after_a_wall_clock_jump_deletes_nothing_another_process_keeps_alive(
    settings: Settings, monkeypatch
) -> None:
    """Each process counts time from the wall clock at its start (service.db.clock). Process A started before
    a +25 h jump of the wall clock, B after it: B's clock is 25 h ahead of A's, so A's live episodes and run,
    stamped by A, looked 25 h old to B, and B's retention deleted them (before: 3 of 3) and its run sweep
    expired the run. Now every process writes its clock into the database at each pass and ages things by the
    slowest live one's: B deletes and expires nothing A keeps alive — and once A is gone (no heartbeat over
    three passes) its stamps age as usual."""
    from service.db import clock

    wall, mono_a, mono_b = [1_800_000_000.0], [0.0], [0.0]
    a = clock.SteadyClock(wall=lambda: wall[0], monotonic=lambda: mono_a[0])
    wall[0] += 25 * 3600  # the jump, then B starts
    b = clock.SteadyClock(wall=lambda: wall[0], monotonic=lambda: mono_b[0])
    monkeypatch.setattr(clock, "PROCESS_CLOCK", a)
    async with AsyncTestClient(app=create_app(settings)) as client:
        ids = [(await client.post("/reset", json={"seed": i})).json()["metadata"]["episode_id"] for i in range(3)]
        run = await create_run(client, split="dev", limit_per_task=1)
    db = settings.database()
    try:
        await retention_pass(db, RunService(db, ttl_s=settings.run_ttl_s), settings)  # A's pass: its heartbeat
        monkeypatch.setattr(clock, "PROCESS_CLOCK", b)
        for _ in range(2):
            mono_a[0] += settings.retention_interval_s
            mono_b[0] += settings.retention_interval_s
            await retention_pass(db, RunService(db, ttl_s=settings.run_ttl_s), settings)  # B's
            monkeypatch.setattr(clock, "PROCESS_CLOCK", a)
            await retention_pass(db, RunService(db, ttl_s=settings.run_ttl_s), settings)  # A goes on beating
            monkeypatch.setattr(clock, "PROCESS_CLOCK", b)
        await RunService(db, ttl_s=settings.run_ttl_s).sweep()  # B's run sweep
        left = await db.read(lambda c: list(c.execute(select(ep_table.c.id).where(ep_table.c.id.in_(ids))).scalars()))
        assert sorted(left) == sorted(ids)
        status = select(runs_table.c.status).where(runs_table.c.id == run["run_id"])
        assert await db.read(lambda c: c.execute(status).scalar()) == "active"
        assert clock.PROCESS_CLOCK is b and b.lag > 24 * 3600
        # A stops for good: B stops counting it after three of its passes without a beat, and ages by its own clock
        for _ in range(4):
            mono_b[0] += settings.retention_interval_s
            await retention_pass(db, RunService(db, ttl_s=settings.run_ttl_s), settings)
        assert b.lag == 0.0
        left = await db.read(lambda c: list(c.execute(select(ep_table.c.id).where(ep_table.c.id.in_(ids))).scalars()))
        assert left == []  # 25 h old by B's clock: past RETAIN_UNFINISHED_EPISODES_S
    finally:
        await db.dispose()
