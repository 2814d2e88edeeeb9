"""Runs strangers can make (issue 13 audit, items 2 and 6): unranked complete runs do not grow the
public board or the database without bound, ``POST /runs`` has its own per-address limit, and every
integer of a run body is a bounded JSON integer (never a 500 on either backend)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import func, select, update

from service.app import create_app
from service.db.models import episodes as ep_table
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.domain.runs.schemas import UNRANKED_SHOWN
from service.settings import Settings
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import auth, close_at_once, create_run, play_run
from tests.db.test_retention import _pass

Client = AsyncTestClient[Litestar]
TASK = "decision-easy"


async def _junk_run(client: Client, i: int) -> dict:
    run = await create_run(client, agent=f"junk{i}", split="dev", task_ids=[TASK], limit_per_task=1)
    await play_run(client, run, agent=close_at_once)
    return run


async def test_unranked_runs_are_capped_on_the_public_board(client: Client) -> None:
    made = [await _junk_run(client, i) for i in range(UNRANKED_SHOWN + 5)]
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert board["unranked_total"] == UNRANKED_SHOWN + 5
    assert len(board["unranked"]) == UNRANKED_SHOWN
    assert [r["run_id"] for r in board["unranked"]] == [r["run_id"] for r in reversed(made)][
        :UNRANKED_SHOWN
    ]  # newest first
    html = await client.get("/leaderboard", params={"split": "dev", "format": "html"})
    assert html.status_code == 200 and html.text.count("junk") == UNRANKED_SHOWN
    assert f"most recent of {UNRANKED_SHOWN + 5}" in html.text


async def _age_run(settings: Settings, run_id: str, by: timedelta) -> None:
    when = utcnow() - by
    db = settings.database()
    try:
        await db.write(
            lambda conn: (
                conn.execute(update(runs_table).where(runs_table.c.id == run_id).values(updated_at=when)),
                conn.execute(update(ep_table).where(ep_table.c.run_id == run_id).values(updated_at=when)),
            )
        )
    finally:
        await db.dispose()


async def test_unranked_complete_runs_are_kept_like_finished_episodes_ranked_ones_forever(
    client: Client, settings: Settings
) -> None:
    old_practice, recent_practice, old_ranked = [await _junk_run(client, i) for i in range(3)]
    db = settings.database()
    try:  # a ranked (full-split) run stands in for one here: the same row, marked as the full split
        await db.write(
            lambda conn: conn.execute(
                update(runs_table).where(runs_table.c.id == old_ranked["run_id"]).values(full_split=True)
            )
        )
    finally:
        await db.dispose()
    for run in (old_practice, old_ranked):
        await _age_run(settings, run["run_id"], timedelta(days=400))
    await _age_run(settings, recent_practice["run_id"], timedelta(days=2))

    purged = await _pass(settings)
    assert (purged.unranked_runs, purged.run_episodes) == (1, 1), purged
    assert (await client.get(f"/runs/{old_practice['run_id']}")).status_code == 404
    for kept in (recent_practice, old_ranked):
        assert (await client.get(f"/runs/{kept['run_id']}")).json()["status"] == "complete"
    db = settings.database()
    try:
        left = await db.read(
            lambda conn: conn.execute(
                select(func.count()).where(ep_table.c.run_id == old_practice["run_id"])
            ).scalar_one()
        )
    finally:
        await db.dispose()
    assert left == 0
    # off (RETAIN_FINISHED_EPISODES_S=off) keeps them, as it keeps finished plain episodes
    await _age_run(settings, recent_practice["run_id"], timedelta(days=400))
    assert not (await _pass(replace(settings, retain_finished_episodes_s=None))).unranked_runs


async def test_post_runs_has_its_own_per_address_limit(settings: Settings) -> None:
    app = create_app(replace(settings, rate_limit_exempt="", rate_limit_per_s=0, rate_limit_runs_per_min=2))
    async with AsyncTestClient(app=app) as client:
        body = {"agent": "a", "split": "dev", "task_ids": [TASK], "limit_per_task": 1}
        codes = [(await client.post("/runs", json=body)).status_code for _ in range(4)]
        assert codes[:2] == [201, 201] and codes[2:] == [429, 429], codes
        resp = await client.post("/runs", json=body)
        assert (
            resp.headers["content-type"].startswith("application/problem+json")
            and int(resp.headers["retry-after"]) >= 1
        )
        assert (await client.get("/tasks")).status_code == 200  # only run creation is limited this way


async def test_every_integer_of_a_run_body_is_a_bounded_json_integer(client: Client) -> None:
    base = {"agent": "ints", "split": "dev", "task_ids": [TASK]}
    for bad in (
        {"limit_per_task": 2147483648},
        {"limit_per_task": 10**24},
        {"limit_per_task": True},
        {"limit_per_task": 1.0},
        {"limit_per_task": "1"},
        {"trials": True},
        {"trials": 1.0},
        {"trials": 10**24},
    ):
        resp = await client.post("/runs", json={**base, **bad})
        field = next(iter(bad))
        assert resp.status_code == 422, (bad, resp.status_code, resp.text)
        assert_problem(resp, 422)
        assert field in str(resp.json()["errors"]), resp.json()
    run = await create_run(client, **base, limit_per_task=1)
    for bad in (
        {"prompt_tokens": 1e26, "completion_tokens": 1},
        {"prompt_tokens": True, "completion_tokens": 1},
        {"prompt_tokens": 10**30, "completion_tokens": 1},
        {"prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 1e300},
        {"prompt_tokens": 1, "completion_tokens": 1, "cost_usd": True},
    ):
        resp = await client.post(f"/runs/{run['run_id']}/usage", json=bad, headers=auth(run["run_token"]))
        assert resp.status_code == 422, (bad, resp.status_code, resp.text)
        assert_problem(resp, 422)
    ok = await client.post(
        f"/runs/{run['run_id']}/usage",
        json={"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.5},
        headers=auth(run["run_token"]),
    )
    assert ok.status_code == 200, ok.text
