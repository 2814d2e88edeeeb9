"""The store desk over every transport: a whole conversation played with tool calls over HTTP, the
WebSocket and MCP, persisted, graded by the server as the core grades it; tool errors are observations
(200, nothing changed), while a body the protocol cannot accept is still a 422."""

from __future__ import annotations

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from service import env as core
from service.app import create_app
from service.settings import Settings
from tests.env.store_oracles import gold_plan

Client = AsyncTestClient[Litestar]
TASKS = [t.id for t in core.TASKS.values() if t.family == "store"]


def _plan(task_id: str, seed: int) -> list[tuple[str, dict]]:
    state, _ = core.reset(task_id, seed, "dev")
    return gold_plan(core.PUBLIC.store_ticket(state.ticket_id))


@pytest.mark.parametrize("task_id", TASKS)
async def test_a_store_conversation_over_http_is_persisted_and_resolved(client: Client, task_id: str) -> None:
    reset = (await client.post("/reset", json={"task_id": task_id, "seed": 4, "split": "dev"})).json()
    eid = reset["metadata"]["episode_id"]
    assert reset["observation"]["ticket"].startswith("Support request st_")
    assert "tool" in reset["observation"]["instructions"]
    body = reset
    for name, arguments in _plan(task_id, 4):
        resp = await client.post("/step", json={"episode_id": eid, "action": {"tool": name, "arguments": arguments}})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["observation"]["tool_result"]["ok"] is True, body["observation"]["tool_result"]
    assert body["done"] is True
    grade = (await client.get("/grader", params={"episode_id": eid})).json()
    assert grade["resolved"] is True and grade["score"] == 1.0
    assert {c["name"] for c in grade["components"]} >= {"final_state", "identity", "confirmed", "told"}
    state = (await client.get("/state", params={"episode_id": eid})).json()
    assert state["step_count"] == len(_plan(task_id, 4)) and state["tool_calls"] == state["step_count"]


async def test_a_refused_tool_call_is_an_observation_and_changes_nothing(client: Client) -> None:
    eid = (await client.post("/reset", json={"task_id": "store-easy", "seed": 1, "split": "dev"})).json()["metadata"][
        "episode_id"
    ]
    bad_calls = [
        {"tool": "refund", "arguments": {"order_id": "ORD-00000", "amounts": [{"to": "store_credit", "amount": 5}]}},
        {"tool": "teleport", "arguments": {}},
        {"tool": "get_order", "arguments": {"order": "ORD-1"}},
        {"decision": "approve_refund"},  # the ticket tasks' field: this desk takes tool calls
    ]
    for action in bad_calls:
        resp = await client.post("/step", json={"episode_id": eid, "action": action})
        assert resp.status_code == 200, resp.text
        obs = resp.json()["observation"]
        assert obs["tool_result"]["ok"] is False and obs["last_action_error"], obs
    state = (await client.get("/state", params={"episode_id": eid})).json()
    assert state["step_count"] == len(bad_calls) and state["changes"] == 0
    # a body the protocol cannot accept is still refused before anything is applied
    resp = await client.post("/step", json={"episode_id": eid, "action": {"tool": "refund", "decision": "reject"}})
    assert resp.status_code == 422 and "tool call is an action of its own" in resp.json()["detail"]
    resp = await client.post("/step", json={"episode_id": eid, "action": {"tool": 5}})
    assert resp.status_code == 422


def test_a_store_conversation_over_the_websocket(settings: Settings) -> None:
    plan = _plan("store-medium", 2)
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": "store-medium", "seed": 2, "split": "dev"}})
        frame = ws.receive_json()
        assert frame["type"] == "observation" and frame["data"]["observation"]["task_id"] == "store-medium"
        for name, arguments in plan:
            ws.send_json({"type": "step", "data": {"tool": name, "arguments": arguments}})
            frame = ws.receive_json()
            assert frame["type"] == "observation", frame
        assert frame["data"]["done"] is True
        assert frame["data"]["observation"]["resolved"] is True


async def test_a_store_conversation_over_mcp(client: Client) -> None:
    async def call(name: str, arguments: dict) -> dict:
        resp = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
        )
        assert resp.status_code == 200
        return resp.json()["result"]

    reset = await call("reset", {"task_id": "store-hard", "seed": 5, "split": "dev"})
    eid = reset["structuredContent"]["metadata"]["episode_id"]
    for name, arguments in _plan("store-hard", 5):
        step = await call("step", {"episode_id": eid, "action": {"tool": name, "arguments": arguments}})
        assert step["isError"] is False
    assert step["structuredContent"]["done"] is True
    grade = await call("grade", {"episode_id": eid})
    assert grade["structuredContent"]["resolved"] is True
