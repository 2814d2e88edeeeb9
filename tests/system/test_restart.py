"""Restart: a new app (or a new process after a kill) on the same database has everything and continues."""

from __future__ import annotations

import signal

import httpx
from litestar.testing import AsyncTestClient

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app
from service.settings import Settings
from tests.conftest import LiveServer
from tests.db.rows import count_rows
from tests.system.test_concurrency_support import assert_matches_replay, owner, reset_args

WORKFLOW = next(t.id for t in core.TASKS.values() if t.family == "workflow")
DECISION = next(t.id for t in core.TASKS.values() if t.family == "decision")


async def test_restart_keeps_everything_and_continues(settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(settings)) as client:
        finished = (await client.post("/reset", json={"task_id": DECISION, "seed": 1, "episode_id": "fin"})).json()
        fin = owner(finished)
        r = await client.post("/step", json={"episode_id": "fin", "action": {"decision": "reject"}}, headers=fin)
        assert r.json()["done"] is True
        grade_before = (await client.get("/grader", params={"episode_id": "fin"}, headers=fin)).json()
        h = owner((await client.post("/reset", json={"task_id": WORKFLOW, "seed": 2, "episode_id": "open"})).json())
        first = await client.post(
            "/step", json={"episode_id": "open", "action": {"lookup": "policy"}, "request_id": "r1"}, headers=h
        )
        assert first.status_code == 200
    assert finished["metadata"]["episode_id"] == "fin"

    async with AsyncTestClient(app=create_app(settings)) as client:
        assert (await client.get("/grader", params={"episode_id": "fin"}, headers=fin)).json() == grade_before
        state = (await client.get("/state", params={"episode_id": "open"}, headers=h)).json()
        assert state["step_count"] == 1 and state["episode_status"] == "active"
        # the retried request is still recognised after the restart
        again = await client.post(
            "/step", json={"episode_id": "open", "action": {"lookup": "policy"}, "request_id": "r1"}, headers=h
        )
        assert (
            again.json()["metadata"]["replayed"] is True and again.json()["observation"] == first.json()["observation"]
        )
        applied, rewards = [{"lookup": "policy"}], [first.json()["reward"]]
        for action in ({"add_tag": "Refund"}, {"close_ticket": True, "reply": "Closing this, thank you."}):
            resp = await client.post("/step", json={"episode_id": "open", "action": action}, headers=h)
            assert resp.status_code == 200 and resp.json()["metadata"]["step_index"] == len(applied) + 1
            applied.append(action)
            rewards.append(resp.json()["reward"])
            if resp.json()["done"]:
                break
    db = settings.database()
    try:
        await assert_matches_replay(db, "open", applied, rewards)
        assert await count_rows(db) == {
            "episodes": 2,
            "transitions": 1 + len(applied),
            "grades": 1 + int(resp.json()["done"]),
        }
    finally:
        await db.dispose()


async def test_acknowledged_steps_survive_a_killed_server(settings: Settings, tmp_path) -> None:
    server = LiveServer(settings, tmp_path / "one.log")
    acked = []
    try:
        args = reset_args(9)
        reset = httpx.post(server.url + "/reset", json=args, timeout=STALLED_AFTER_S)
        reset.raise_for_status()
        h = owner(reset.json())
        for action in ({"lookup": "order"}, {"lookup": "customer"}):
            resp = httpx.post(
                server.url + "/step",
                json={"episode_id": args["episode_id"], "action": action},
                headers=h,
                timeout=STALLED_AFTER_S,
            )
            resp.raise_for_status()
            acked.append((action, resp.json()["reward"]))
        server.proc.send_signal(signal.SIGKILL)  # a crash: no shutdown hooks run
        server.proc.wait(timeout=STALLED_AFTER_S)
    finally:
        server.stop()
    server = LiveServer(settings, tmp_path / "two.log")
    try:
        state = httpx.get(
            server.url + "/state", params={"episode_id": args["episode_id"]}, headers=h, timeout=STALLED_AFTER_S
        ).json()
        assert state["step_count"] == len(acked)
        resp = httpx.post(
            server.url + "/step",
            json={"episode_id": args["episode_id"], "action": {"lookup": "policy"}},
            headers=h,
            timeout=STALLED_AFTER_S,
        )
        assert resp.status_code == 200 and resp.json()["metadata"]["step_index"] == 3
        acked.append(({"lookup": "policy"}, resp.json()["reward"]))
    finally:
        server.stop()
    db = settings.database()
    try:
        await assert_matches_replay(db, args["episode_id"], [a for a, _ in acked], [r for _, r in acked])
    finally:
        await db.dispose()
