"""Runs, server-side scoring and the leaderboard (in-process, on every configured backend)."""

from __future__ import annotations

import json
from collections.abc import Callable
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
from service.env.agents import make_agent, play
from service.env.policy import evaluate
from service.regrade import regrade
from service.settings import Settings
from service.stats import Trial, bootstrap_ci, ladder, mean_of_items, pass_hat_k, published_release, rounded
from tests.api.test_api_http import assert_problem

Client = AsyncTestClient[Litestar]
ALICE_KEY = "sk_alice_" + "a" * 40
BOB_KEY = "sk_bob_" + "b" * 40


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def create_run(client: Client, key: str | None = None, **body) -> dict:
    resp = await client.post(
        "/runs", json={"agent": "heuristic", "model": "", **body}, headers=auth(key) if key else {}
    )
    assert resp.status_code == 201, resp.text
    return resp.json()


async def manifest_of(client: Client, run: dict) -> list[dict]:
    """Every manifest entry of a run, through its paged manifest endpoint."""
    entries, url = [], run["manifest_url"]
    while url:
        page = (await client.get(url)).json()
        entries += page["entries"]
        url = page["next_url"]
    assert len(entries) == run["episodes_total"]
    return entries


def close_at_once(ticket_id: str = "") -> object:
    class Closer:
        def act(self, obs: core.Observation) -> core.Action:
            if core.get_task(obs.task_id).family == "store":
                return core.Action(tool="end_conversation", arguments={})
            return core.Action(close_ticket=True)

    return Closer()


DEV_EPISODES = len(core.run_manifest("dev"))  # every task: the six ticket tasks' 400 and the store desk's 150
TEST_EPISODES = len(core.run_manifest("test"))


def heuristic(ticket_id: str) -> object:
    """The heuristic reference agent of the ticket's family (the store desk has its own)."""
    return make_agent("heuristic", 0, ticket_id)


async def play_run(
    client: Client, run: dict, stop_after: int | None = None, agent: Callable[[str], object] = heuristic
) -> list[dict]:
    """Play the run's episodes over HTTP (the heuristic agent by default); returns every step response."""
    steps, played = [], 0
    while stop_after is None or played < stop_after:
        resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
        if resp.status_code == 409:
            assert resp.json()["code"] == "run_exhausted"
            break
        assert resp.status_code == 200, resp.text
        body = resp.json()
        player, episode_id = agent(body["observation"]["ticket_id"]), body["metadata"]["episode_id"]
        while not body["done"]:
            fields = core.Observation.model_fields
            obs = core.Observation.model_validate({k: v for k, v in body["observation"].items() if k in fields})
            action = player.act(obs).model_dump(exclude_defaults=True)
            resp = await client.post(
                "/step", json={"episode_id": episode_id, "action": action}, headers=auth(run["run_token"])
            )
            assert resp.status_code == 200, resp.text
            body = resp.json()
            steps.append(body)
        played += 1
    return steps


def independent_items(manifest: list[dict], split: str) -> list[list[Trial]]:
    """Per-ticket trials computed from the pure core, without the service."""
    items: dict[tuple[str, int], list[Trial]] = {}
    for entry in manifest:
        ticket_id = core.reset(entry["task_id"], entry["seed"], split)[0].ticket_id
        grade, _ = play(heuristic(ticket_id), entry["task_id"], entry["seed"], split)  # type: ignore[arg-type]
        items.setdefault((entry["task_id"], entry["seed"]), []).append(Trial(grade.score, grade.resolved))
    return list(items.values())


async def test_a_finished_heuristic_run_is_ranked_on_resolved_with_the_right_numbers(
    client: Client, settings: Settings
) -> None:
    run = await create_run(client, split="dev")
    manifest = await manifest_of(client, run)
    assert run["episodes_total"] == DEV_EPISODES and len(manifest) == DEV_EPISODES
    steps = await play_run(client, run)
    # during the run nothing per episode leaks: no step reward (the agent cannot probe), and no verdict on
    # the final observation (trial-major play would let an agent carry it into later trials)
    assert all(s["reward"] == 0.0 for s in steps)
    finals = [s for s in steps if s["done"]]
    assert len(finals) == DEV_EPISODES and all(o["observation"]["final"] for o in finals)
    assert all(o["observation"]["score"] is None and o["observation"]["resolved"] is None for o in finals)
    detail = (await client.get(f"/runs/{run['run_id']}")).json()
    assert detail["status"] == "complete" and detail["episodes_done"] == DEV_EPISODES
    # once it is complete, every episode's verdict is served, and it is what the core computes
    last = finals[-1]["observation"]
    grade = (await client.get("/grader", params={"episode_id": last["episode_id"]})).json()
    assert isinstance(grade["resolved"], bool) and 0.0 <= grade["score"] <= 1.0

    items = independent_items(manifest, "dev")  # the same numbers, from the pure core
    resolved = [[float(t.resolved) for t in v] for v in items]
    scores = [[t.score for t in v] for v in items]
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    [row] = board["rows"]
    assert row["run_id"] == run["run_id"] and row["rank"] == 1 and row["trials"] == 1
    assert row["resolved"] == pytest.approx(mean_of_items(resolved), abs=1e-4)
    assert row["resolved_ci95"] == pytest.approx(list(bootstrap_ci(resolved)), abs=1e-4)
    assert row["mean"] == pytest.approx(mean_of_items(scores), abs=1e-4)
    assert row["ci95"] == pytest.approx(list(bootstrap_ci(scores)), abs=1e-4)
    assert row["pass_hat_k"] == {"1": pytest.approx(pass_hat_k([[t.resolved for t in v] for v in items], 1), abs=1e-4)}
    assert row["episodes"] == DEV_EPISODES
    assert set(row["per_family"]) == {"decision", "workflow", "store"} and set(row["per_difficulty"]) == {
        "easy",
        "medium",
        "hard",
    }
    assert set(row["per_task"]) == set(core.TASKS)
    assert row["dataset_version"] == core.DATASET_VERSION and row["grader_version"] == core.GRADER_VERSION
    assert "resolved rate" in board["method"]

    # re-grading an unchanged run reports no differences
    db = settings.database()  # this test's event loop (the app's engine lives on the client's loop)
    try:
        report = await regrade(db, run["run_id"])
    finally:
        await db.dispose()
    assert report == {"episodes": DEV_EPISODES, "changed": 0, "grader_version": core.GRADER_VERSION, "changes": []}

    # once the run is complete, its trajectories carry the real rewards
    resp = await client.get(f"/runs/{run['run_id']}/trajectories.jsonl")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in resp.text.splitlines()]
    assert len(lines) == DEV_EPISODES
    for line in lines[:50]:
        assert len(line["observations"]) == len(line["actions"]) + 1 == len(line["rewards"]) + 1
        assert min(1.0, max(0.0, sum(line["rewards"]))) == pytest.approx(line["score"], abs=1e-6)


async def test_pass_hat_k_over_trials_matches_an_independent_computation(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=2, trials=3, agent="heuristic-k3")
    await play_run(client, run)
    board = (await client.get("/leaderboard", params={"split": "dev"})).json()
    assert board["rows"] == []  # a subset run is listed, never ranked
    [row] = board["unranked"]
    items = [[t.resolved for t in v] for v in independent_items(await manifest_of(client, run), "dev")]
    assert row["pass_hat_k"] == {str(k): pytest.approx(pass_hat_k(items, k), abs=1e-4) for k in (1, 2, 3)}
    assert row["trials"] == 3 and row["episodes"] == 2 * 3 * len(core.TASKS)


async def test_rewards_are_withheld_until_a_dev_run_completes(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    steps = await play_run(client, run, stop_after=5)
    assert steps and all(s["reward"] == 0.0 for s in steps)
    first = (await client.get(f"/runs/{run['run_id']}")).json()["episodes"][0]["episode_id"]
    # a finished episode of a run in progress shows nothing of itself (tests/api/test_run_privacy.py: every surface)
    assert_problem(await client.get(f"/episodes/{first}"), 409, "in progress")
    assert_problem(await client.get("/grader", params={"episode_id": first}), 409, "in progress")
    assert_problem(await client.get(f"/runs/{run['run_id']}/trajectories.jsonl"), 401)
    await play_run(client, run)
    grade = (await client.get("/grader", params={"episode_id": first})).json()
    assert isinstance(grade["resolved"], bool)  # the run is complete: dev episodes open up (dev labels are public)
    page = (await client.get(f"/episodes/{first}")).json()
    assert not page["rewards_hidden"] and sum(s["reward"] for s in page["steps"]) == pytest.approx(
        grade["raw"], abs=1e-6
    )
    # plain episodes keep dense rewards for RL
    body = (await client.post("/reset", json={"task_id": "workflow-triage", "seed": 0, "split": "dev"})).json()
    expected_tag = evaluate(core.PUBLIC.ticket(body["observation"]["ticket_id"])).tag
    step = await client.post(
        "/step", json={"episode_id": body["metadata"]["episode_id"], "action": {"add_tag": expected_tag}}
    )
    assert step.json()["reward"] == pytest.approx(0.6)


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
    # Pages only read; idle runs expire on a timer (tests/api/test_growth.py), or when asked for more episodes.
    resp = await client.post(f"/runs/{idle['run_id']}/next", headers=auth(idle["run_token"]))
    assert_problem(resp, 409, "expired")
    assert (await client.get(f"/runs/{idle['run_id']}")).json()["status"] == "expired"
    assert (await client.get(f"/runs/{unfinished['run_id']}")).json()["status"] == "active"


async def test_run_episodes_need_the_run_token(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    assert_problem(await client.post(f"/runs/{run['run_id']}/next"), 401, "Authorization: Bearer")
    assert_problem(
        await client.post(f"/runs/{run['run_id']}/next", headers=auth("not-the-token")), 403, "not the token"
    )
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
    run = await create_run(
        client, split="dev", task_ids=["decision-easy", "workflow-triage"], limit_per_task=2, trials=2
    )
    assert run["ranked"] is False and run["episodes_total"] == 8
    got = []
    for _ in range(8):
        body = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
        got.append((body["metadata"]["task_id"], body["metadata"]["seed"], body["metadata"]["trial"]))
    assert got == [(e["task_id"], e["seed"], e["trial"]) for e in await manifest_of(client, run)]
    resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
    assert assert_problem(resp, 409, "handed out")["code"] == "run_exhausted"


# --------------------------------------------------------------------------------- test split


@pytest.fixture
async def secret_client(settings: Settings) -> Client:
    """A deployment with submitter keys preloaded and a quota of 3 test runs a day."""
    app = create_app(replace(settings, submitter_keys=f"alice:{ALICE_KEY},bob:{BOB_KEY}", test_run_quota=3))
    async with AsyncTestClient(app=app) as c:
        yield c


async def test_test_runs_need_a_submitter_key_and_the_whole_split(secret_client: Client) -> None:
    client = secret_client
    assert_problem(await client.post("/reset", json={"split": "test"}), 403, "POST /runs")
    body = {"agent": "a", "split": "test"}
    assert_problem(await client.post("/runs", json=body), 401, "submitter key")
    assert_problem(await client.post("/runs", json=body, headers=auth("sk_wrong_" + "x" * 30)), 403, "not valid")
    assert_problem(
        await client.post("/runs", json={**body, "limit_per_task": 2}, headers=auth(ALICE_KEY)), 422, "whole test split"
    )
    assert_problem(
        await client.post("/runs", json={**body, "task_ids": ["decision-easy"]}, headers=auth(ALICE_KEY)),
        422,
        "whole test split",
    )
    # the agent name is free text; the quota belongs to the key
    for i in range(3):
        run = await create_run(client, ALICE_KEY, split="test", agent=f"alias-{i}")
        assert run["submitter"] == "alice" and run["test_key_fingerprint"] and run["episodes_total"] == TEST_EPISODES
    resp = await client.post("/runs", json={**body, "agent": "yet-another-name"}, headers=auth(ALICE_KEY))
    problem = assert_problem(resp, 429, "test run")
    assert 0 < int(resp.headers["retry-after"]) <= 24 * 3600 and problem["retry_after_s"] == int(
        resp.headers["retry-after"]
    )
    assert (
        await client.post("/runs", json=body, headers=auth(BOB_KEY))
    ).status_code == 201  # another key, its own quota


async def test_a_test_run_publishes_one_released_number_and_only_through_the_ladder(secret_client: Client) -> None:
    client = secret_client
    first = await create_run(client, ALICE_KEY, split="test", agent="closer")
    steps = await play_run(client, first, stop_after=3, agent=close_at_once)
    assert steps and all(s["reward"] == 0.0 for s in steps)
    assert all(s["observation"]["score"] is None and s["observation"]["resolved"] is None for s in steps if s["done"])
    detail = (await client.get(f"/runs/{first['run_id']}", headers=auth(first["run_token"]))).json()
    done_id = next(e["episode_id"] for e in detail["episodes"] if e["status"] == "done")
    assert all("score" not in e and "resolved" not in e for e in detail["episodes"])

    def private(resp) -> None:
        assert_problem(resp, 403, "test split")

    private(await client.get("/grader", params={"episode_id": done_id}))
    private(await client.get(f"/episodes/{done_id}"))
    private(await client.get(f"/runs/{first['run_id']}/trajectories.jsonl", headers=auth(first["run_token"])))
    await play_run(client, first, agent=close_at_once)
    detail = (await client.get(f"/runs/{first['run_id']}")).json()
    assert detail["status"] == "complete" and detail["ladder"]["released"] is not None
    # resolved 0.0, plus the run's keyed draw (more than four sd above: never, for practical purposes)
    assert detail["ladder"]["released"] <= 4 * detail["ladder"]["noise_scale"]
    assert detail["summary"]["resolved"] == detail["ladder"]["released"]
    assert detail["summary"]["episodes"] == TEST_EPISODES
    # still nothing per episode, not even after completion, not even to the owner
    private(await client.get("/grader", params={"episode_id": done_id}))
    private(await client.get(f"/episodes/{done_id}"))
    private(await client.get(f"/runs/{first['run_id']}/trajectories.jsonl", headers=auth(first["run_token"])))

    better = await create_run(client, ALICE_KEY, split="test", agent="heuristic")
    await play_run(client, better)
    detail = (await client.get(f"/runs/{better['run_id']}")).json()
    released = detail["ladder"]["released"]
    assert released is not None and released > 0.5 and rounded(released, 2) == released
    summary = detail["summary"]
    # one number, and what follows from it and the run's size: no breakdown, no mean, no pass^k (#21.2)
    assert set(summary) == {"resolved", "resolved_ci95", "items", "episodes", "errors", "noise_scale"}
    assert summary["resolved"] == released and summary["resolved_ci95"][0] < released < summary["resolved_ci95"][1]

    worse = await create_run(client, ALICE_KEY, split="test", agent="closer-again")
    await play_run(client, worse, agent=close_at_once)
    detail = (await client.get(f"/runs/{worse['run_id']}")).json()
    assert detail["status"] == "complete" and detail["ladder"]["released"] is None and detail["summary"] is None
    assert detail["ladder"]["submitter_best"] == released  # the Ladder: the best stands, nothing new leaks

    board = (await client.get("/leaderboard", params={"split": "test"})).json()
    [row] = board["rows"]  # one row per submitter: its best released run
    assert row["run_id"] == better["run_id"] and row["submitter"] == "alice" and row["resolved"] == released
    assert row["test_key_fingerprint"] == board["test_key_fingerprint"] and board["board"] == "benchmark"
    assert all(row[k] is None for k in ("mean", "ci95", "pass_hat_k", "per_task", "per_family", "per_difficulty"))
    grade = (await client.get("/grader", params={"run_id": worse["run_id"]})).json()
    assert grade["summary"] is None and grade["per_episode_results"] is False


def test_a_test_rows_numbers_follow_from_what_the_ladder_released() -> None:
    """A test row shows the released number, and nothing computed from the run's tickets beyond it."""
    from service.db.run_store import BoardRun
    from service.domain.runs.services import RunService

    summary = {"resolved": 0.885, "mean": 0.9, "resolved_ci95": [0.8, 0.95], "items": 400, "episodes": 400, "errors": 0}
    now = utcnow()
    run = BoardRun(
        id="run_x",
        agent="a",
        model="",
        split=core.HIDDEN_SPLIT,
        trials=1,
        full_split=True,
        dataset_version=core.DATASET_VERSION,
        grader_version=core.GRADER_VERSION,
        usage=None,
        summary=summary,
        finished_at=now,
        submitter="alice",
        key_fingerprint="f",
        released=ladder(0.885, None, noise=-0.004),
        created_at=now,
        outcomes=[1.0] * 354 + [0.0] * 46,
        verified_by=None,
        verified_at=None,
        verification_note=None,
    )
    row = RunService._row(None, run, 1)  # type: ignore[arg-type]  # uses nothing of the service
    assert row["resolved"] == run.released == 0.88 and row["mean"] is None and row["checked"] == "self-reported"
    assert row["resolved_ci95"] == published_release(0.88, 400, 400, 0, 0.01 * 2**0.5)["resolved_ci95"]


async def test_the_test_split_comes_from_the_deployment_key(settings: Settings, tmp_path) -> None:
    """TEST_SPLIT_KEY=a and =b serve different test tickets; the same key serves the same ones after a
    restart; with no key configured, a random one is kept in the database."""

    async def first_test_ticket(s: Settings) -> tuple[str, str]:
        app = create_app(replace(s, submitter_keys=f"alice:{ALICE_KEY}", test_run_quota=10))
        async with AsyncTestClient(app=app) as c:
            run = await create_run(c, ALICE_KEY, split="test")
            body = (await c.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
            return body["observation"]["ticket"], run["test_key_fingerprint"]

    a1 = await first_test_ticket(replace(settings, test_split_key="a" * 32))
    b1 = await first_test_ticket(replace(settings, test_split_key="b" * 32))
    a2 = await first_test_ticket(replace(settings, test_split_key="a" * 32))  # a restart with the same key
    assert a1 == a2 and a1[0] != b1[0] and a1[1] != b1[1]
    r1 = await first_test_ticket(settings)  # no TEST_SPLIT_KEY: a random key, created once and kept
    r2 = await first_test_ticket(settings)
    assert r1 == r2 and r1 not in (a1, b1)


async def test_submitter_keys_from_the_operator_command(settings: Settings) -> None:
    """`python -m service.submitters create|revoke|list`, run as an operator would."""
    import os
    import sys

    import anyio

    env = {**os.environ, "DATABASE_URL": settings.database_url, "DATABASE_SCHEMA": settings.database_schema or ""}

    async def command(*args: str) -> tuple[int, str, str]:
        done = await anyio.run_process([sys.executable, "-m", "service.submitters", *args], env=env, check=False)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    code, out, _ = await command("create", "carol", "--quota", "1")
    created = json.loads(out)
    assert code == 0 and created["name"] == "carol" and created["key"].startswith("sk_") and created["quota"] == 1
    code, _, err = await command("create", "carol")
    assert code == 1 and "exists" in err
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        await create_run(client, created["key"], split="test")
        assert_problem(
            await client.post("/runs", json={"agent": "c", "split": "test"}, headers=auth(created["key"])), 429
        )
        assert (await command("revoke", "carol"))[0] == 0
        assert_problem(
            await client.post("/runs", json={"agent": "c", "split": "test"}, headers=auth(created["key"])),
            403,
            "revoked",
        )
    code, out, _ = await command("list")
    listed = json.loads(out)
    assert code == 0 and listed[0]["name"] == "carol" and listed[0]["revoked_at"] and "key" not in listed[0]
    # re-issuing gives the name a new key; the revoked one stays dead
    code, out, _ = await command("reissue", "carol")
    reissued = json.loads(out)
    assert code == 0 and reissued["key"] != created["key"]
    assert (await command("reissue", "nobody"))[0] == 1
    dev = {"agent": "c", "split": "dev", "limit_per_task": 1}  # carol's one test run is used: a dev run checks the key
    async with AsyncTestClient(app=create_app(settings)) as client:
        assert_problem(await client.post("/runs", json=dev, headers=auth(created["key"])), 403, "revoked")
        assert (await client.post("/runs", json=dev, headers=auth(reissued["key"]))).status_code == 201
    assert json.loads((await command("list"))[1])[0]["revoked_at"] is None


async def test_self_reported_usage_is_shown_as_such(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    resp = await client.post(
        f"/runs/{run['run_id']}/usage",
        json={"prompt_tokens": 1200, "completion_tokens": 300},
        headers=auth(run["run_token"]),
    )
    assert resp.status_code == 200 and resp.json()["usage"] == {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "cost_usd": None,
        "self_reported": True,
    }
    assert_problem(
        await client.post(
            f"/runs/{run['run_id']}/usage",
            json={"prompt_tokens": -1, "completion_tokens": 0},
            headers=auth(run["run_token"]),
        ),
        422,
        "prompt_tokens",
    )


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
        assert detail["status"] == "complete" and detail["episodes_done"] == len(core.TASKS)


async def test_grader_by_run_id(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    body = (await client.get("/grader", params={"run_id": run["run_id"]})).json()
    assert body["status"] == "active" and body["summary"] is None and body["episodes_total"] == len(core.TASKS)
    await play_run(client, run)
    body = (await client.get("/grader", params={"run_id": run["run_id"]})).json()
    assert body["status"] == "complete" and 0.0 <= body["summary"]["resolved"] <= 1.0
    assert body["episodes_done"] == len(core.TASKS)
    assert body["per_episode_results"] is True
    assert_problem(await client.get("/grader", params={"run_id": "run_nope"}), 404, "POST /runs")


async def test_dev_runs_with_a_submitter_key_leave_its_test_quota_alone(secret_client: Client) -> None:
    """The quota counts test runs: dev runs made with the key (to bind the agent name) are free."""
    client = secret_client
    for i in range(4):  # more than the quota of 3
        run = await create_run(client, ALICE_KEY, split="dev", limit_per_task=1, agent=f"dev-{i}")
        assert run["submitter"] == "alice"
    for i in range(3):
        await create_run(client, ALICE_KEY, split="test", agent=f"test-{i}")
    assert_problem(
        await client.post("/runs", json={"agent": "t", "split": "test"}, headers=auth(ALICE_KEY)), 429, "test run"
    )
    assert (
        await client.post(
            "/runs", json={"agent": "dev-more", "split": "dev", "limit_per_task": 1}, headers=auth(ALICE_KEY)
        )
    ).status_code == 201  # dev runs stay open


def test_settings_repr_shows_no_secret() -> None:
    settings = Settings(
        test_split_key="split-key-" + "s" * 32,
        submitter_keys=f"alice:{ALICE_KEY}",
        database_url="postgresql+asyncpg://ecomm:hunter2-db-password@db.internal:5432/ecomm",
    )
    text = repr(settings)
    for secret in ("split-key-", ALICE_KEY, "hunter2-db-password"):
        assert secret not in text and secret not in str(settings)
    assert "db.internal" in text and "test_run_quota=3" in text  # the rest is still shown
    assert settings.test_split_key and settings.submitter_keys  # hidden from repr only


async def test_a_revoked_preloaded_key_stays_revoked_across_restarts(settings: Settings) -> None:
    """SUBMITTER_KEYS is read at every start; a key the operator revoked must not come back with it.
    A different key for the name in SUBMITTER_KEYS (or `reissue`) is the operator re-issuing it."""
    from service.db import run_store

    preloaded = replace(settings, submitter_keys=f"alice:{ALICE_KEY}")
    body = {"agent": "a", "split": "test"}
    async with AsyncTestClient(app=create_app(preloaded)) as client:
        assert (await client.post("/runs", json=body, headers=auth(ALICE_KEY))).status_code == 201
    db = settings.database()
    try:
        assert (await run_store.revoke_submitter(db, "alice"))[0]
    finally:
        await db.dispose()
    for _ in range(2):  # restarts with the same SUBMITTER_KEYS
        async with AsyncTestClient(app=create_app(preloaded)) as client:
            assert_problem(await client.post("/runs", json=body, headers=auth(ALICE_KEY)), 403, "revoked")
    new_key = "sk_alice_new_" + "n" * 40
    async with AsyncTestClient(app=create_app(replace(settings, submitter_keys=f"alice:{new_key}"))) as client:
        assert_problem(await client.post("/runs", json=body, headers=auth(ALICE_KEY)), 403, "revoked")
        assert (await client.post("/runs", json=body, headers=auth(new_key))).status_code == 201
