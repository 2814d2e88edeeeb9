"""64 concurrent agents over HTTP and over WebSocket; duplicate request ids; racing steps."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient
from openenv.core import GenericEnvClient

from service import env as core
from service.settings import Settings
from tests.system.test_concurrency_support import assert_matches_replay, owner, reset_args, script

AGENTS = 64


async def _http_agent(client: AsyncTestClient[Litestar], agent: int) -> tuple[str, list[dict[str, Any]], list[float]]:
    resp = await client.post("/reset", json=reset_args(agent))
    assert resp.status_code == 200, resp.text
    eid, h = resp.json()["metadata"]["episode_id"], owner(resp.json())
    applied, rewards = [], []
    for action in script(agent):
        resp = await client.post(
            "/step", headers=h, json={"episode_id": eid, "action": action, "request_id": f"{agent}-{len(applied)}"}
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["observation"]["episode_id"] == eid and body["metadata"]["step_index"] == len(applied) + 1
        applied.append(action)
        rewards.append(body["reward"])
        if body["done"]:
            return eid, applied, rewards
    raise AssertionError(f"agent {agent} never finished")


async def test_64_http_agents(client: AsyncTestClient[Litestar], settings: Settings) -> None:
    results = await asyncio.gather(*(_http_agent(client, i) for i in range(AGENTS)))
    db = settings.database()
    try:
        for eid, applied, rewards in results:
            await assert_matches_replay(db, eid, applied, rewards)
    finally:
        await db.dispose()


async def _ws_agent(url: str, agent: int) -> tuple[str, list[dict[str, Any]], list[float]]:
    async with GenericEnvClient(base_url=url) as env:
        first = await env.reset(**reset_args(agent))
        eid = first.observation["episode_id"]
        applied, rewards = [], []
        for action in script(agent):
            result = await env.step(action)
            applied.append(action)
            rewards.append(result.reward)
            state = await env.state()
            assert state["episode_id"] == eid and state["step_count"] == len(applied)
            if result.done:
                return eid, applied, rewards
    raise AssertionError(f"agent {agent} never finished")


async def test_64_ws_agents_on_a_live_server(live_server, settings: Settings) -> None:
    results = await asyncio.gather(*(_ws_agent(live_server.url, i) for i in range(AGENTS)))
    db = settings.database()
    try:
        for eid, applied, rewards in results:
            await assert_matches_replay(db, eid, applied, rewards)
    finally:
        await db.dispose()


async def test_duplicate_request_id_applies_once(client: AsyncTestClient[Litestar], settings: Settings) -> None:
    reset = (await client.post("/reset", json=reset_args(3))).json()
    eid, h = reset["metadata"]["episode_id"], owner(reset)
    body = {"episode_id": eid, "action": {"lookup": "policy"}, "request_id": "same"}
    first = await client.post("/step", headers=h, json=body)
    again = await client.post("/step", headers=h, json=body)
    assert first.status_code == again.status_code == 200
    assert (
        again.json()["observation"] == first.json()["observation"] and again.json()["reward"] == first.json()["reward"]
    )
    assert again.json()["metadata"]["replayed"] is True and first.json()["metadata"]["replayed"] is False
    assert (await client.get("/state", params={"episode_id": eid}, headers=h)).json()["step_count"] == 1
    # concurrent retries of one new request: one applies, the rest get the stored result
    body = {"episode_id": eid, "action": {"lookup": "order"}, "request_id": "burst"}
    burst = await asyncio.gather(*(client.post("/step", headers=h, json=body) for _ in range(8)))
    assert {r.status_code for r in burst} == {200}
    assert {r.json()["metadata"]["step_index"] for r in burst} == {2}
    assert sum(not r.json()["metadata"]["replayed"] for r in burst) == 1
    assert (await client.get("/state", params={"episode_id": eid}, headers=h)).json()["step_count"] == 2
    # reusing a request id for a different action is refused, and applies nothing
    clash = await client.post("/step", headers=h, json={**body, "action": {"lookup": "customer"}})
    assert clash.status_code == 422 and "different action" in clash.json()["detail"]
    assert (await client.get("/state", params={"episode_id": eid}, headers=h)).json()["step_count"] == 2


async def test_racing_steps_never_interleave(client: AsyncTestClient[Litestar], settings: Settings) -> None:
    # a workflow task: replies alone do not end it, so many steps can race
    task = next(t.id for t in core.TASKS.values() if t.family == "workflow")
    reset = (await client.post("/reset", json={**reset_args(5), "task_id": task})).json()
    eid, h = reset["metadata"]["episode_id"], owner(reset)
    winners: list[dict[str, Any]] = []
    conflicts = 0
    for round_ in range(3):
        actions = [{"reply": f"update {round_}-{k}"} for k in range(6)]
        responses = await asyncio.gather(
            *(client.post("/step", headers=h, json={"episode_id": eid, "action": a}) for a in actions)
        )
        for action, resp in zip(actions, responses, strict=True):
            if resp.status_code == 200:
                winners.append({"action": action, **resp.json()})
            else:
                assert resp.status_code == 409, resp.text
                assert (
                    resp.json()["title"]
                    and "GET /state" in resp.json()["detail"]
                    or "finished" in resp.json()["detail"]
                )
                conflicts += 1
    assert conflicts >= 1  # the race really happened
    indices = [w["metadata"]["step_index"] for w in winners]
    assert sorted(indices) == list(range(1, len(winners) + 1))  # exactly one winner per step index
    winners.sort(key=lambda w: w["metadata"]["step_index"])
    db = settings.database()
    try:
        await assert_matches_replay(db, eid, [w["action"] for w in winners], [w["reward"] for w in winners])
    finally:
        await db.dispose()
