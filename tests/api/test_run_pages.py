"""Runs store their manifest's parameters; POST /runs is a summary; run pages are paged and
revalidated with ETags (issue 13: storage, and pages that were cheap to ask for and costly to serve)."""

from __future__ import annotations

from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from service import env as core
from service.db.models import runs as runs_table
from service.settings import Settings
from tests.api.test_runs import auth, create_run, manifest_of, play_run

Client = AsyncTestClient[Litestar]


async def test_a_run_stores_its_parameters_and_returns_a_summary_with_a_paged_manifest(
    client: Client, settings: Settings
) -> None:
    resp = await client.post("/runs", json={"agent": "a", "split": "dev", "trials": 8})
    assert resp.status_code == 201
    run = resp.json()
    total = len(core.run_manifest("dev", None, 8))  # 8 trials of every dev ticket of every task
    assert run["episodes_total"] == total and "manifest" not in run
    assert len(resp.content) < 2_000  # was ~201 kB: the whole manifest, stored and returned
    db = settings.database()
    try:
        stored = await db.read(
            lambda conn: conn.execute(
                select(runs_table.c.manifest, runs_table.c.trials, runs_table.c.limit_per_task).where(
                    runs_table.c.id == run["run_id"]
                )
            ).one()
        )
    finally:
        await db.dispose()
    assert stored.manifest is None and stored.trials == 8 and stored.limit_per_task is None
    # the manifest is derived from the parameters: exactly what the core's run_manifest makes
    expected = [e.model_dump() for e in core.run_manifest("dev", list(core.TASKS), 8, None)]
    assert await manifest_of(client, run) == expected
    page = (await client.get(run["manifest_url"].split("?")[0], params={"offset": total - 10, "limit": 50})).json()
    assert [e["index"] for e in page["entries"]] == list(range(total - 10, total)) and page["next_url"] is None
    # and it is what the run hands out, in order
    for entry in expected[:3]:
        meta = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()["metadata"]
        assert (meta["task_id"], meta["seed"], meta["trial"], meta["index"]) == (
            entry["task_id"],
            entry["seed"],
            entry["trial"],
            entry["index"],
        )
    assert (await client.get(f"/runs/{run['run_id']}/manifest", params={"limit": 5000})).status_code == 422


async def test_run_pages_are_paged(client: Client) -> None:
    run = await create_run(client, split="dev", trials=2)
    total = len(core.run_manifest("dev", None, 2))
    pages = -(-total // 200)
    await play_run(client, run, stop_after=2)
    first = (await client.get(f"/runs/{run['run_id']}")).json()
    assert len(first["episodes"]) == 200 and first["page"] == {
        "number": 1,
        "per_page": 200,
        "pages": pages,
        "first_index": 0,
        "prev_url": None,
        "next_url": f"/runs/{run['run_id']}?page=2&per_page=200",
    }
    assert [e["status"] for e in first["episodes"][:3]] == ["done", "done", "pending"]
    last = (await client.get(f"/runs/{run['run_id']}", params={"page": pages, "per_page": 200})).json()
    assert [e["index"] for e in last["episodes"]] == list(range((pages - 1) * 200, total))
    assert last["page"]["next_url"] is None
    html = await client.get(f"/runs/{run['run_id']}", params={"page": 2, "format": "html"})
    assert html.status_code == 200 and 'rel="next"' in html.text and 'rel="prev"' in html.text
    assert (await client.get(f"/runs/{run['run_id']}", params={"per_page": 5000})).status_code == 422


async def test_run_pages_answer_304_until_the_run_changes(client: Client) -> None:
    run = await create_run(client, split="dev", task_ids=["decision-easy"], limit_per_task=3)
    url = f"/runs/{run['run_id']}"
    for params in ({}, {"format": "html"}):
        first = await client.get(url, params=params)
        etag = first.headers["etag"]
        assert first.status_code == 200 and first.headers["cache-control"] == "no-cache"
        again = await client.get(url, params=params, headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    json_etag = (await client.get(url)).headers["etag"]
    html_etag = (await client.get(url, params={"format": "html"})).headers["etag"]
    assert json_etag != html_etag  # one per representation
    # a step of one of its episodes changes the page: the old ETag no longer matches
    await play_run(client, run, stop_after=1)
    changed = await client.get(url, headers={"If-None-Match": json_etag})
    assert changed.status_code == 200 and changed.headers["etag"] != json_etag
    assert changed.json()["episodes"][0]["status"] == "done"
    html = await client.get(url, params={"format": "html"}, headers={"If-None-Match": html_etag})
    assert html.status_code == 200 and html.headers["etag"] != html_etag


# ------------------------------------------------------------------ finding 9: names and rank 1


async def test_an_agent_name_run_with_a_submitter_key_is_that_submitters(settings: Settings) -> None:
    from dataclasses import replace

    from service.app import create_app
    from tests.api.test_api_http import assert_problem
    from tests.api.test_runs import ALICE_KEY, BOB_KEY

    app = create_app(replace(settings, submitter_keys=f"alice:{ALICE_KEY},bob:{BOB_KEY}"))
    async with AsyncTestClient(app=app) as client:
        body = {"agent": "Acme Agent", "split": "dev", "task_ids": ["decision-easy"], "limit_per_task": 1}
        free = await client.post("/runs", json={**body, "agent": "free-name"})
        assert free.status_code == 201 and free.json()["submitter"] is None  # anonymous runs: free text
        mine = await client.post("/runs", json=body, headers=auth(ALICE_KEY))
        assert mine.status_code == 201 and mine.json()["submitter"] == "alice"
        for impostor, headers in ((" acme  AGENT", auth(BOB_KEY)), ("ACME agent", {})):
            problem = assert_problem(
                await client.post("/runs", json={**body, "agent": impostor}, headers=headers),
                409,
                "belongs to submitter 'alice'",
            )
            assert problem["owner"] == "alice"
        assert (await client.post("/runs", json=body, headers=auth(ALICE_KEY))).status_code == 201
        assert_problem(await client.post("/runs", json=body, headers=auth("sk_not_a_key_" + "x" * 30)), 403)


async def test_one_entrant_is_one_leaderboard_row(client: Client, settings: Settings) -> None:
    """Two finished full runs of one agent/model (any spelling) no longer take rank 1 twice."""
    from datetime import timedelta

    from service.db import run_store
    from service.db.models import utcnow

    db = settings.database()
    try:
        now = utcnow()
        for i, (agent, resolved) in enumerate((("twice", 0.9), ("Twice ", 0.8), ("other", 0.5))):
            await run_store.insert_run(
                db,
                id=f"run_fake{i}",
                token_sha256="0" * 64,
                agent=agent,
                model="m",
                split="dev",
                trials=1,
                task_ids=list(core.TASKS),
                full_split=True,
                limit_per_task=None,
                manifest=None,
                episodes_total=400,
                dataset_version=core.DATASET_VERSION,
                grader_version=core.GRADER_VERSION,
                status="complete",
                finished_at=now - timedelta(minutes=i),
                summary={"resolved": resolved, "resolved_ci95": [resolved - 0.01, resolved + 0.01], "mean": resolved},
            )
    finally:
        await db.dispose()
    rows = (await client.get("/leaderboard", params={"split": "dev"})).json()["rows"]
    assert [(r["run_id"], r["rank"], r["entrant_runs"]) for r in rows] == [("run_fake0", 1, 2), ("run_fake2", 2, 1)]
