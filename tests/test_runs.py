"""Runs, server-side scoring and the leaderboard (in-process, on every configured backend)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import update

from service import env as core
from service.app import create_app
from service.db.models import episodes as ep_table
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.env.agents import HeuristicAgent, play_episode
from service.regrade import regrade
from service.settings import Settings
from service.stats import RESOLVED_THRESHOLD, bootstrap_ci, mean_score, pass_hat_k
from tests.test_api_http import assert_problem

Client = AsyncTestClient[Litestar]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def create_run(client: Client, **body) -> dict:
    resp = await client.post("/runs", json={"agent": "heuristic", "model": "", **body})
    assert resp.status_code == 201, resp.text
    return resp.json()


async def play_run(client: Client, run: dict, stop_after: int | None = None) -> list[dict]:
    """Play the run's episodes with the heuristic agent over HTTP; returns every step response."""
    steps, played = [], 0
    while stop_after is None or played < stop_after:
        resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
        if resp.status_code == 409:
            assert resp.json()["code"] == "run_exhausted"
            break
        assert resp.status_code == 200, resp.text
        body = resp.json()
        agent, episode_id = HeuristicAgent(), body["metadata"]["episode_id"]
        while not body["done"]:
            obs = core.Observation.model_validate({k: v for k, v in body["observation"].items() if k != "episode_id"})
            action = agent.act(obs).model_dump(exclude_defaults=True)
            resp = await client.post("/step", json={"episode_id": episode_id, "action": action}, headers=auth(run["run_token"]))
            assert resp.status_code == 200, resp.text
            body = resp.json()
            steps.append(body)
        played += 1
    return steps


def independent_items(manifest: list[dict], split: str) -> list[list[float]]:
    """Per-ticket trial scores computed from the pure core, without the service."""
    items: dict[tuple[str, int], list[float]] = {}
    for entry in manifest:
        items.setdefault((entry["task_id"], entry["seed"]), []).append(play_episode("heuristic", entry["task_id"], entry["seed"], split)[0])
    return list(items.values())


async def test_a_finished_heuristic_run_is_ranked_with_the_right_numbers(client: Client, settings: Settings) -> None:
    run = await create_run(client, split="dev")
    assert run["episodes_total"] == 400 and len(run["manifest"]) == 400
    await play_run(client, run)
    detail = (await client.get(f"/runs/{run['run_id']}")).json()
    assert detail["status"] == "complete" and detail["episodes_done"] == 400

    values = independent_items(run["manifest"], "dev")  # the same numbers, from the pure core
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    [row] = board["rows"]
    assert row["run_id"] == run["run_id"] and row["rank"] == 1 and row["trials"] == 1
    assert row["mean"] == pytest.approx(mean_score(values), abs=1e-4)
    assert row["ci95"] == pytest.approx(list(bootstrap_ci(values)), abs=1e-4)
    assert row["ci95"][0] <= row["mean"] <= row["ci95"][1]
    assert row["pass_hat_k"] == {"1": pytest.approx(pass_hat_k(values, 1), abs=1e-4)}
    truncated = 0
    for e in run["manifest"]:
        _, actions = play_episode("heuristic", e["task_id"], e["seed"], "dev")
        truncated += core.replay(e["task_id"], e["seed"], "dev", actions).truncated
    assert row["episodes"] == 400 and row["errors"] == truncated
    assert set(row["per_family"]) == {"decision", "workflow"} and set(row["per_difficulty"]) == {"easy", "medium", "hard"}
    assert board["resolved_threshold"] == RESOLVED_THRESHOLD
    assert row["dataset_version"] == core.DATASET_VERSION and row["grader_version"] == core.GRADER_VERSION

    # re-grading an unchanged run reports no differences
    db = settings.database()  # this test's event loop (the app's engine lives on the client's loop)
    try:
        report = await regrade(db, run["run_id"])
    finally:
        await db.dispose()
    assert report == {"episodes": 400, "changed": 0, "grader_version": core.GRADER_VERSION, "changes": []}

    # trajectories: one line per finished episode, ready for training
    resp = await client.get(f"/runs/{run['run_id']}/trajectories.jsonl")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/x-ndjson")
    lines = [__import__("json").loads(line) for line in resp.text.splitlines()]
    assert len(lines) == 400
    for line in lines[:50]:
        assert len(line["observations"]) == len(line["actions"]) + 1 == len(line["rewards"]) + 1
        assert min(1.0, max(0.0, sum(line["rewards"]))) == pytest.approx(line["score"], abs=1e-6)


async def test_pass_hat_k_over_trials_matches_an_independent_computation(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=2, trials=3, agent="random-ish")
    await play_run(client, run)
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert board["rows"] == []  # a subset run is listed, never ranked
    [row] = board["unranked"]
    values = independent_items(run["manifest"], "dev")
    assert row["pass_hat_k"] == {str(k): pytest.approx(pass_hat_k(values, k), abs=1e-4) for k in (1, 2, 3)}
    assert row["trials"] == 3 and row["episodes"] == 36


async def test_unfinished_and_expired_runs_are_not_ranked(client: Client, settings: Settings) -> None:
    unfinished = await create_run(client, split="dev", task_ids=list(core.TASKS), limit_per_task=None)
    await play_run(client, unfinished, stop_after=3)
    idle = await create_run(client, split="dev")
    await play_run(client, idle, stop_after=1)
    month_ago = utcnow() - timedelta(days=30)  # past any TTL

    def age(conn) -> None:
        conn.execute(update(runs_table).where(runs_table.c.id == idle["run_id"]).values(updated_at=month_ago))
        conn.execute(update(ep_table).where(ep_table.c.run_id == idle["run_id"]).values(updated_at=month_ago))

    db = settings.database()
    try:
        await db.write(age)
    finally:
        await db.dispose()
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert board["rows"] == [] and board["unranked"] == []
    assert (await client.get(f"/runs/{idle['run_id']}")).json()["status"] == "expired"
    assert (await client.get(f"/runs/{unfinished['run_id']}")).json()["status"] == "active"
    resp = await client.post(f"/runs/{idle['run_id']}/next", headers=auth(idle["run_token"]))
    assert_problem(resp, 409, "expired")


async def test_run_episodes_need_the_run_token(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    assert_problem(await client.post(f"/runs/{run['run_id']}/next"), 401, "Authorization: Bearer")
    assert_problem(await client.post(f"/runs/{run['run_id']}/next", headers=auth("not-the-token")), 403, "not the token")
    first = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
    episode_id = first["metadata"]["episode_id"]
    step = {"episode_id": episode_id, "action": {"lookup": "policy"}}
    assert_problem(await client.post("/step", json=step), 401, "run_token")
    assert_problem(await client.post("/step", json=step, headers=auth("x" * 43)), 403)
    assert (await client.post("/step", json={**step, "run_token": run["run_token"]})).status_code == 200
    assert (await client.post("/step", json=step, headers=auth(run["run_token"]))).status_code == 200
    # nothing was applied by the refused steps
    assert (await client.get("/state", params={"episode_id": episode_id})).json()["step_count"] == 2
    # an agent can neither choose a run's ticket nor repeat it
    resp = await client.post("/reset", json={"run_id": run["run_id"], "task_id": "decision-easy", "seed": 0})
    assert_problem(resp, 401)
    again = (await client.post("/reset", json={"run_id": run["run_id"], "run_token": run["run_token"]})).json()
    assert again["metadata"]["index"] == 1 and again["metadata"]["episode_id"] != episode_id


async def test_the_manifest_is_handed_out_once_in_order(client: Client) -> None:
    run = await create_run(client, split="dev", task_ids=["decision-easy", "workflow-triage"], limit_per_task=2, trials=2)
    assert run["ranked"] is False and run["episodes_total"] == 8
    got = []
    for _ in range(8):
        body = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
        got.append((body["metadata"]["task_id"], body["metadata"]["seed"], body["metadata"]["trial"]))
    assert got == [(e["task_id"], e["seed"], e["trial"]) for e in run["manifest"]]
    resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
    assert assert_problem(resp, 409, "handed out")["code"] == "run_exhausted"


async def test_a_test_split_run_leaks_no_reward_before_it_completes(client: Client) -> None:
    assert_problem(await client.post("/reset", json={"split": "test"}), 403, "POST /runs")
    run = await create_run(client, split="test", limit_per_task=2)
    steps = await play_run(client, run, stop_after=11)
    assert steps and all(s["reward"] == 0.0 for s in steps)
    detail = (await client.get(f"/runs/{run['run_id']}")).json()
    assert detail["results_hidden"] and detail["summary"] is None
    assert all(e["score"] is None for e in detail["episodes"])
    done_id = next(e["episode_id"] for e in detail["episodes"] if e["status"] == "done")
    assert_problem(await client.get("/grader", params={"episode_id": done_id}), 409, "hidden")
    page = (await client.get(f"/episodes/{done_id}")).json()
    assert page["grade"] is None and all(s["reward"] is None for s in page["steps"])
    assert_problem(await client.get(f"/runs/{run['run_id']}/trajectories.jsonl", headers=auth(run["run_token"])), 409)

    await play_run(client, run)  # the last episode
    detail = (await client.get(f"/runs/{run['run_id']}")).json()
    assert detail["status"] == "complete" and detail["summary"]["episodes"] == 12
    grade = (await client.get("/grader", params={"episode_id": done_id})).json()
    assert 0.0 <= grade["score"] <= 1.0 and grade["clauses"] == []
    assert all(set(c) == {"name", "earned", "weight"} for c in grade["components"])  # no gold in details


async def test_self_reported_usage_is_shown_as_such(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    resp = await client.post(f"/runs/{run['run_id']}/usage", json={"prompt_tokens": 1200, "completion_tokens": 300}, headers=auth(run["run_token"]))
    assert resp.status_code == 200 and resp.json()["usage"] == {"prompt_tokens": 1200, "completion_tokens": 300, "cost_usd": None, "self_reported": True}
    assert_problem(await client.post(f"/runs/{run['run_id']}/usage", json={"prompt_tokens": -1, "completion_tokens": 0}, headers=auth(run["run_token"])), 422, "prompt_tokens")


async def test_bad_run_requests_get_problem_details(client: Client) -> None:
    assert_problem(await client.post("/runs", json={"agent": "a", "trials": 9}), 422, "trials")
    assert_problem(await client.post("/runs", json={"agent": "a", "task_ids": ["nope"]}), 422, "unknown task_id")
    assert_problem(await client.post("/runs", json={"agent": "a", "bogus": 1}), 422)
    assert_problem(await client.get("/runs/run_missing"), 404, "POST /runs")
    assert_problem(await client.get("/leaderboard", params={"split": "holdout"}), 422, "split")


async def test_pages_escape_what_clients_sent(client: Client) -> None:
    run = await create_run(client, split="dev", agent="<script>alert(1)</script>", limit_per_task=1)
    await play_run(client, run)
    html = (await client.get(f"/runs/{run['run_id']}", headers={"Accept": "text/html"})).text
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    board = (await client.get("/leaderboard", params={"split": "dev", "format": "html"})).text
    assert "<script>alert(1)</script>" not in board and "&lt;script&gt;" in board


async def test_state_and_runs_survive_a_restart(settings: Settings) -> None:
    app1 = create_app(settings)
    async with AsyncTestClient(app=app1) as c1:
        run = await create_run(c1, split="dev", limit_per_task=1)
        await play_run(c1, run, stop_after=2)
    app2 = create_app(replace(settings))
    async with AsyncTestClient(app=app2) as c2:
        await play_run(c2, run)
        detail = (await c2.get(f"/runs/{run['run_id']}")).json()
        assert detail["status"] == "complete" and detail["episodes_done"] == 6


async def test_grader_by_run_id(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    body = (await client.get("/grader", params={"run_id": run["run_id"]})).json()
    assert body["status"] == "active" and body["summary"] is None and body["episodes_total"] == 6
    await play_run(client, run)
    body = (await client.get("/grader", params={"run_id": run["run_id"]})).json()
    assert body["status"] == "complete" and 0.0 <= body["summary"]["mean"] <= 1.0 and body["episodes_done"] == 6
    assert_problem(await client.get("/grader", params={"run_id": "run_nope"}), 404, "POST /runs")
