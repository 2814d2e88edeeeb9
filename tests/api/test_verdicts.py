"""Issue #21: what the board says and verdicts that faults cannot bend.

- rows say what was checked: self-reported unless an operator verified the run (``python -m service.verify``);
- revoking a submitter key stops its open runs at the next request, and they are never released;
- a test run is pinned to the test key it started under: a restart with another key expires it cleanly
  (before: the run mixed both splits' tickets, completed and was released under the old fingerprint; the
  episode in progress answered 422 on step and 500 on resume);
- what the Ladder releases depends only on the runs and their completion order (before: runs A then B,
  a process that died while A completed got B released and A never);
- the dev board is practice, ranked apart from the test board, which is the default.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from datetime import timedelta

import anyio
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from service import env as core
from service.app import create_app
from service.db import run_store
from service.db.models import utcnow
from service.domain.runs.services import RunService, hidden_split_items
from service.settings import Settings
from service.stats import TEST_RUN_BUDGET, ladder, ladder_noise, ladder_noise_sd
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import ALICE_KEY, auth, close_at_once, create_run, play_run
from tests.env.oracles import OracleAgent
from tests.env.store_oracles import GoldOracle

Client = AsyncTestClient[Litestar]
KEY_A, KEY_B = "a" * 40, "b" * 40


def keyed(settings: Settings, key: str = KEY_A) -> Settings:
    return replace(settings, submitter_keys=f"alice:{ALICE_KEY}", test_run_quota=10, test_split_key=key)


async def operator(settings: Settings, module: str, *args: str) -> tuple[int, dict | list]:
    env = {**os.environ, "DATABASE_URL": settings.database_url, "DATABASE_SCHEMA": settings.database_schema or ""}
    done = await anyio.run_process([sys.executable, "-m", module, *args], env=env, check=False)
    out = done.stdout.decode() if done.returncode == 0 else done.stderr.decode()
    return done.returncode, json.loads(out)


async def next_episode(client: Client, run: dict) -> dict:
    resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
    assert resp.status_code == 200, resp.text
    return resp.json()


# ------------------------------------------------------------------------------- verified rows


def oracle_replay(ticket_id: str = "") -> object:
    """Replays the gold of each ticket: what anyone can do on the dev board (its labels are public)."""
    if ticket_id.startswith("st_"):  # the store desk's gold, played with its whole procedure
        return GoldOracle(ticket_id, core.PUBLIC)

    class Replay:
        agent: OracleAgent | None = None

        def act(self, obs: core.Observation) -> core.Action:
            if self.agent is None:
                self.agent = OracleAgent(obs.ticket_id)
            return self.agent.act(obs)

    return Replay()


async def test_rows_are_self_reported_until_an_operator_verifies_the_run(settings: Settings) -> None:
    """#21.1/#21.5: a script replaying the dev labels tops the dev board as "gpt-5": the board says it is
    a practice board and the row self-reported; an operator's check is recorded with who and when."""
    async with AsyncTestClient(app=create_app(settings)) as client:
        top = await create_run(client, split="dev", agent="definitely-a-model", model="gpt-5")
        await play_run(client, top, agent=oracle_replay)
        honest = await create_run(client, split="dev", agent="heuristic")
        await play_run(client, honest)
        board = (await client.get("/leaderboard", params={"split": "dev"})).json()
        assert board["board"] == "practice" and "replays known answers" in board["note"]
        first, second = board["rows"]
        assert first["run_id"] == top["run_id"] and first["resolved"] == 1.0 and first["rank"] == 1
        assert {r["checked"] for r in board["rows"]} == {"self-reported"} and first["verified"] is None
        assert first["vs_next"]["method"] == "paired" and first["vs_next"]["separated"]
        assert (await client.get("/leaderboard")).json()["split"] == "test"  # the default board is the benchmark

    code, out = await operator(
        settings, "service.verify", "verify", honest["run_id"], "--by", "ops@example", "--note", "re-ran it"
    )
    assert code == 0 and out["by"] == "ops@example" and out["at"]
    assert (await operator(settings, "service.verify", "verify", "run_nope", "--by", "ops"))[0] == 1
    async with AsyncTestClient(app=create_app(settings)) as client:
        board = (await client.get("/leaderboard", params={"split": "dev"})).json()
        row = next(r for r in board["rows"] if r["run_id"] == honest["run_id"])
        assert row["checked"] == "verified" and row["verified"]["by"] == "ops@example"
        only = (await client.get("/leaderboard", params={"split": "dev", "verified": "true"})).json()
        assert [r["run_id"] for r in only["rows"]] == [honest["run_id"]] and only["rows"][0]["rank"] == 1
        html = (await client.get("/leaderboard", params={"split": "dev", "format": "html"})).text
        assert "verified by ops@example" in html and "self-reported" in html and 'id="practice-note"' in html
        page = (await client.get(f"/runs/{honest['run_id']}", params={"format": "html"})).text
        assert "Verified by ops@example" in page and "re-ran it" in page
        assert "Self-reported" in (await client.get(f"/runs/{top['run_id']}", params={"format": "html"})).text
    code, listed = await operator(settings, "service.verify", "list")
    assert code == 0 and [r["run_id"] for r in listed] == [honest["run_id"]]
    assert (await operator(settings, "service.verify", "unverify", honest["run_id"]))[0] == 0


# --------------------------------------------------------------------------------- revocation


async def test_revoking_a_key_stops_its_open_runs_at_the_next_request(settings: Settings) -> None:
    """#21.7: before, a revoked key's open test run went on, was released (1.00) and ranked."""
    s = keyed(settings)
    async with AsyncTestClient(app=create_app(s)) as client:
        run = await create_run(client, ALICE_KEY, split="test", agent="closer")
        await play_run(client, run, stop_after=2, agent=close_at_once)
        started = (await next_episode(client, run))["metadata"]["episode_id"]
        code, out = await operator(s, "service.submitters", "revoke", "alice")
        assert code == 0 and out["runs_expired"] == 1
        step = await client.post(
            "/step", json={"episode_id": started, "action": {"close_ticket": True}}, headers=auth(run["run_token"])
        )
        assert_problem(step, 409, "revoked")
        assert_problem(await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"])), 409, "revoked")
        resumed = await client.post(
            "/reset", json={"episode_id": started, "resume": True}, headers=auth(run["run_token"])
        )
        assert_problem(resumed, 409, "revoked")
        view = (await client.get(f"/runs/{run['run_id']}")).json()
        assert view["status"] == "expired" and view["status_reason"] == "submitter_revoked"
        assert (await client.get("/leaderboard", params={"split": "test"})).json()["rows"] == []


async def test_a_run_completed_but_not_yet_summarised_is_not_released_once_its_key_is_revoked(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = keyed(settings)
    async with AsyncTestClient(app=create_app(s)) as client:
        run = await create_run(client, ALICE_KEY, split="test", agent="closer")
        with monkeypatch.context() as m:
            m.setattr(RunService, "finish_if_complete", _died)  # the process dies before the summary
            await play_run(client, run, agent=close_at_once)
        assert (await operator(s, "service.submitters", "revoke", "alice"))[0] == 0
        view = (await client.get(f"/runs/{run['run_id']}")).json()  # summarised now, on read
        assert view["status"] == "complete" and view["ladder"]["released"] is None and view["summary"] is None


async def _died(self: RunService, run_id: str) -> str:
    return "complete"


# ----------------------------------------------------------------------------- key pinning


async def test_a_restart_with_another_test_key_expires_its_open_runs_cleanly(settings: Settings) -> None:
    """#21.14: the run stops — 409 on step, resume and next, never 422 or 500 — and never mixes keys,
    even when the old key comes back."""
    async with AsyncTestClient(app=create_app(keyed(settings, KEY_A))) as client:
        run = await create_run(client, ALICE_KEY, split="test", agent="closer")
        await play_run(client, run, stop_after=2, agent=close_at_once)
        in_progress = (await next_episode(client, run))["metadata"]["episode_id"]
    for key in (KEY_B, KEY_A):  # a restart with another key, then back to the first one
        async with AsyncTestClient(app=create_app(keyed(settings, key))) as client:
            token = auth(run["run_token"])
            step = await client.post(
                "/step", json={"episode_id": in_progress, "action": {"lookup": "order"}}, headers=token
            )
            assert_problem(step, 409, "another test key")
            resumed = await client.post("/reset", json={"episode_id": in_progress, "resume": True}, headers=token)
            assert_problem(resumed, 409, "another test key")
            assert_problem(await client.post(f"/runs/{run['run_id']}/next", headers=token), 409, "another test key")
            view = (await client.get(f"/runs/{run['run_id']}")).json()
            assert view["status"] == "expired" and view["status_reason"] == "test_key_changed"
            assert view["episodes_started"] == 3  # nothing more was handed out under the other key
            assert (await client.get("/leaderboard", params={"split": "test"})).json()["rows"] == []


async def test_the_sweep_expires_test_runs_of_another_key(settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(keyed(settings, KEY_A))) as client:
        run = await create_run(client, ALICE_KEY, split="test", agent="idle")
    db = settings.database()  # the sweep's work, as a process started with KEY_B does it
    try:
        sweeper = RunService(db, ttl_s=3600, dataset=core.Dataset(test_key=core.derive_test_key(KEY_B)))
        assert await sweeper.expire_other_key() == 1
        stored = await run_store.get_run(db, run["run_id"])
        assert stored is not None and (stored.status, stored.status_reason) == ("expired", "test_key_changed")
    finally:
        await db.dispose()


# ------------------------------------------------------------------------- Ladder and crashes


async def test_the_ladder_releases_by_completion_order_whatever_process_died(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#21.15: runs A then B complete; the process dies while A completes (A is complete, unsummarised),
    B completes and is summarised first. A is still released as the first of the two, B against it."""
    async with AsyncTestClient(app=create_app(keyed(settings))) as client:
        a = await create_run(client, ALICE_KEY, split="test", agent="closer-a")
        with monkeypatch.context() as m:
            m.setattr(RunService, "finish_if_complete", _died)
            await play_run(client, a, agent=close_at_once)
        b = await create_run(client, ALICE_KEY, split="test", agent="closer-b")
        await play_run(client, b, agent=close_at_once)  # completes B, which summarises A first
    db = settings.database()
    try:
        run_a, run_b = await run_store.get_run(db, a["run_id"]), await run_store.get_run(db, b["run_id"])
    finally:
        await db.dispose()
    assert run_a is not None and run_b is not None and run_a.finished_at <= run_b.finished_at
    assert run_a.summary is not None and run_b.summary is not None
    key = core.derive_test_key(KEY_A)
    sd = run_a.summary["noise_sd"]
    assert sd == run_b.summary["noise_sd"] == ladder_noise_sd(TEST_RUN_BUDGET, hidden_split_items())
    expected_a = ladder(run_a.summary["resolved"], None, ladder_noise(key, run_a.id, sd))
    expected_b = ladder(run_b.summary["resolved"], expected_a, ladder_noise(key, run_b.id, sd))
    assert (run_a.released, run_b.released) == (expected_a, expected_b)


# ---------------------------------------------------------------------- a key's lifetime budget


async def test_a_key_completes_at_most_its_budget_of_test_runs_under_one_test_key_ever(settings: Settings) -> None:
    """#21.2, the repeated probe: before, the quota renewed every 24 h with no lifetime cap, and one key
    probing the same ticket in every run read it (0.77 after 49 runs). Now a key's test runs under one test
    key are capped for good — the daily quota has room (10 a day) and the period long past changes nothing;
    an unfinished run that expired released nothing and does not count; a new test key starts afresh."""
    s = replace(keyed(settings, KEY_A), test_run_quota_period_s=0.001)  # the daily quota never binds
    async with AsyncTestClient(app=create_app(s)) as client:
        runs = [await create_run(client, ALICE_KEY, split="test", agent=f"probe-{i}") for i in range(TEST_RUN_BUDGET)]
        refused = await client.post("/runs", json={"agent": "probe-x", "split": "test"}, headers=auth(ALICE_KEY))
        problem = assert_problem(refused, 403, "for good")
        assert problem["type"].endswith("test-run-budget-spent") and problem["budget"] == TEST_RUN_BUDGET
        assert "retry-after" not in refused.headers
        assert (await client.post("/runs", json={"agent": "dev", "split": "dev"}, headers=auth(ALICE_KEY))).is_success
        view = (await client.get(f"/runs/{runs[0]['run_id']}")).json()
        assert view["ladder"]["test_run_budget"] == TEST_RUN_BUDGET
    db = s.database()
    try:  # one run idles out unfinished: it released nothing, so its place comes back
        assert await run_store.expire_run(db, runs[0]["run_id"], utcnow() + timedelta(hours=1))
    finally:
        await db.dispose()
    async with AsyncTestClient(app=create_app(s)) as client:
        await create_run(client, ALICE_KEY, split="test", agent="probe-again")
        assert_problem(
            await client.post("/runs", json={"agent": "probe-y", "split": "test"}, headers=auth(ALICE_KEY)), 403
        )
    async with AsyncTestClient(app=create_app(replace(s, test_split_key=KEY_B))) as client:
        assert (await create_run(client, ALICE_KEY, split="test", agent="new-key"))["test_key_fingerprint"]
