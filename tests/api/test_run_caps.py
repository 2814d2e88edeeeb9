"""What runs may store (issue 21, finding 9): the episodes a run hands out count against the same
per-address storage caps as plain ones (before: 300 of 300 ``/next`` after the 64-episode cap), and
complete ranked runs are bounded by a retention rule the operator sets (before: kept forever)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select, update

from service.app import create_app
from service.db.models import episodes as ep_table
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.settings import Settings
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import auth, close_at_once, create_run, play_run
from tests.db.test_retention import _pass

Client = AsyncTestClient[Litestar]


def limited(settings: Settings, **caps: int) -> Settings:
    """The test client counted as any visitor (not exempt), with only the storage caps on."""
    return replace(settings, rate_limit_exempt="", rate_limit_per_s=0, rate_limit_heavy_reads_per_min=0, **caps)


async def test_run_episodes_count_against_the_unfinished_cap(settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(limited(settings, max_active_episodes_per_client=3))) as client:
        run = await create_run(client, split="dev", limit_per_task=2)
        for _ in range(3):
            assert (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).is_success
        over = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
        assert_problem(over, 429, "unfinished episodes", "MAX_ACTIVE_EPISODES_PER_CLIENT")
        assert_problem(await client.post("/reset", json={}), 429, "unfinished")  # one cap for both kinds
        ws_reset = {"run_id": run["run_id"], "run_token": run["run_token"]}
        assert_problem(await client.post("/reset", json=ws_reset), 429, "unfinished")  # /reset with a run_id too
        assert (await client.get(f"/runs/{run['run_id']}")).json()["episodes_started"] == 3  # nothing handed out


async def test_run_episodes_count_against_the_daily_cap_and_carry_their_address(settings: Settings) -> None:
    capped = limited(settings, max_episodes_per_client_per_day=4, max_active_episodes_per_client=0)
    async with AsyncTestClient(app=create_app(capped)) as client:
        run = await create_run(client, split="dev", limit_per_task=2)
        await play_run(client, run, stop_after=4, agent=close_at_once)
        over = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
        assert_problem(over, 429, "MAX_EPISODES_PER_CLIENT_PER_DAY")
    db = settings.database()
    try:
        addresses = await db.read(
            lambda c: set(
                c.execute(select(ep_table.c.client_address).where(ep_table.c.run_id == run["run_id"])).scalars()
            )
        )
    finally:
        await db.dispose()
    assert addresses == {"testclient"}


async def _ranked(settings: Settings, run_id: str, resolved: float, finished_days_ago: float) -> None:
    when = utcnow() - timedelta(days=finished_days_ago)
    summary = {"resolved": resolved, "mean": resolved, "resolved_ci95": [resolved, resolved], "ci95": [0, 1]}
    db = settings.database()
    try:
        await db.write(
            lambda c: c.execute(
                update(runs_table)
                .where(runs_table.c.id == run_id)
                .values(full_split=True, summary=summary, finished_at=when, updated_at=when)
            )
        )
        await db.write(lambda c: c.execute(update(ep_table).where(ep_table.c.run_id == run_id).values(updated_at=when)))
    finally:
        await db.dispose()


async def _exists(settings: Settings, run_id: str) -> tuple[bool, int]:
    db = settings.database()
    try:
        row = await db.read(lambda c: c.execute(select(runs_table.c.id).where(runs_table.c.id == run_id)).first())
        left = await db.read(lambda c: c.execute(select(func.count()).where(ep_table.c.run_id == run_id)).scalar_one())
    finally:
        await db.dispose()
    return row is not None, left


@pytest.mark.parametrize("keep", [3, 0])
async def test_ranked_runs_beyond_what_an_entrant_keeps_are_deleted(
    client: Client, settings: Settings, keep: int
) -> None:
    """One entrant's five ranked runs, all finished long ago: its best and its two most recent stay, the
    other two go with their episodes. Another entrant's only run stays. ``0`` keeps them all."""
    runs = []
    for i in range(5):
        run = await create_run(client, agent="Same Agent", model="m", split="dev", task_ids=["decision-easy"],
                               limit_per_task=1)  # fmt: skip
        await play_run(client, run, agent=close_at_once)
        await _ranked(settings, run["run_id"], resolved=0.9 if i == 0 else 0.1 * i, finished_days_ago=400 - i)
        runs.append(run["run_id"])
    other = await create_run(
        client, agent="Other", model="m", split="dev", task_ids=["decision-easy"], limit_per_task=1
    )
    await play_run(client, other, agent=close_at_once)
    await _ranked(settings, other["run_id"], resolved=0.0, finished_days_ago=400)

    purged = await _pass(replace(settings, retain_ranked_runs_per_entrant=keep))
    gone = {runs[1], runs[2]} if keep else set()
    assert purged.ranked_runs == len(gone), purged
    for run_id in [*runs, other["run_id"]]:
        stored, episodes = await _exists(settings, run_id)
        assert stored is (run_id not in gone) and (episodes == 0) is (run_id in gone), run_id
