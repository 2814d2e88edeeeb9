"""What the episodes of a run show, and to whom, on every surface (HTTP, WebSocket, MCP).

Run episode ids are guessable (``run_<id>-<index>``) and run episodes have no episode token. ``GET
/state`` of a dev run's episode is open to anyone but carries only the episode's progress — id, step
count, status, task and run — never the agent's actions (tags, queue, ticket status), the ticket or the
seed, while its run is in progress; the run's own agent gets no more either. A **test** episode's
progress is its run token holder's only, while the run is active, and nobody's afterwards: its step
count says whether the ticket needed the customer's answer (issue #21.3).

While a run is in progress nothing per episode is revealed (trials are played trial-major, so an
adaptive agent would use trial 0's verdict in later trials): no final score, no grade, no episode
page, no per-episode score on the run page, no trajectories. After a dev run completes its episodes
open up; a test run's never do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from service import env as core
from service.app import create_app
from service.settings import Settings
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import ALICE_KEY, auth, close_at_once, create_run, play_run

Client = AsyncTestClient[Litestar]

# What /state of a private episode carries: enough for OpenEnv's state contract (episode_id,
# step_count), nothing an answer could be read from.
PROGRESS = {"episode_id", "step_count", "episode_status", "done", "task_id", "run_id"}
ACTIONS = [{"add_tag": "Refund"}, {"reassign_queue": "Billing"}]


@pytest.fixture
def keyed(settings: Settings) -> Settings:
    return replace(settings, submitter_keys=f"alice:{ALICE_KEY}", test_run_quota=5)


@pytest.fixture
async def keyed_client(keyed: Settings) -> Client:
    async with AsyncTestClient(app=create_app(keyed)) as c:
        yield c


async def start_and_act(client: Client, run: dict) -> str:
    """The run's next episode, with a tag and a queue chosen (what a copier would want to read)."""
    body = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
    episode_id = body["metadata"]["episode_id"]
    for action in ACTIONS:
        resp = await client.post(
            "/step", json={"episode_id": episode_id, "action": action}, headers=auth(run["run_token"])
        )
        assert resp.status_code == 200, resp.text
        if resp.json()["done"]:
            break
    return episode_id


async def finish(client: Client, run: dict, episode_id: str) -> dict[str, Any]:
    """Play the episode to its end (reject and close until done); returns the last step's body."""
    body: dict[str, Any] = {"done": False}
    while not body["done"]:
        resp = await client.post(
            "/step",
            json={"episode_id": episode_id, "action": {"decision": "reject", "close_ticket": True}},
            headers=auth(run["run_token"]),
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
    return body


def progress_only(state: dict[str, Any], episode_id: str, run: dict) -> None:
    assert set(state) == PROGRESS, state
    assert state["episode_id"] == episode_id and state["run_id"] == run["run_id"]
    assert isinstance(state["step_count"], int) and state["step_count"] >= 1
    assert "Refund" not in str(state) and "Billing" not in str(state)


async def mcp(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert resp.status_code == 200, resp.text
    return resp.json()


async def mcp_tool(
    client: Client, name: str, arguments: dict[str, Any], session_id: str | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if session_id is not None:
        params["session_id"] = session_id
    result = (await mcp(client, "tools/call", params))["result"]
    assert result["isError"] is False, result
    return result["structuredContent"]


def ws_states(settings: Settings, episode_id: str, run: dict) -> list[dict[str, Any]]:
    """Over /ws: a session that resumed the episode with the run token asks for its state; a session
    without the token cannot attach to it at all."""
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"episode_id": episode_id, "resume": True}})
        refused = ws.receive_json()
        assert refused["type"] == "error" and refused["data"]["status"] == 401, refused
        ws.send_json(
            {"type": "reset", "data": {"episode_id": episode_id, "resume": True, "run_token": run["run_token"]}}
        )
        assert ws.receive_json()["type"] == "observation"
        ws.send_json({"type": "state"})
        frame = ws.receive_json()
        assert frame["type"] == "state", frame
        return [frame["data"]]


async def states_everywhere(
    client: Client, settings: Settings, episode_id: str, run: dict, anonymous: bool = True
) -> list[dict[str, Any]]:
    """The episode's state as HTTP, MCP and WS serve it, with the run token (and without it: anonymous)."""
    token = run["run_token"]
    states = []
    for headers in ({}, auth(token)) if anonymous else (auth(token),):
        resp = await client.get("/state", params={"episode_id": episode_id}, headers=headers)
        assert resp.status_code == 200, resp.text
        states.append(resp.json())
    if anonymous:
        states.append(await mcp_tool(client, "state", {"episode_id": episode_id}))  # stateless, no token
    session = (await mcp(client, "openenv/session/create", {}))["result"]["session_id"]
    await mcp_tool(client, "reset", {"episode_id": episode_id, "resume": True, "run_token": token}, session)
    states.append(await mcp_tool(client, "state", {}, session))  # the session holds the run token
    states += await anyio.to_thread.run_sync(ws_states, settings, episode_id, run)
    return states


def mcp_error(body: dict[str, Any]) -> str:
    result = body.get("result") or {}
    assert result.get("isError") is True or "error" in body, body
    return str(body)


async def anonymous_reads(client: Client, episode_id: str, run: dict) -> None:
    """What someone without the run token gets of a test run and its episode: no episode's progress."""
    assert_problem(await client.get("/state", params={"episode_id": episode_id}), 401, "token")
    assert_problem(await client.get("/grader", params={"episode_id": episode_id}), 403, "test split")
    stateless = await mcp(
        client, "tools/call", {"name": "state", "arguments": {"episode_id": episode_id}}
    )  # no session, no token
    assert "step_count" not in mcp_error(stateless)
    page = (await client.get(f"/runs/{run['run_id']}")).json()
    assert page["episodes"] == [] and page["episodes_listed"] is False
    html = (await client.get(f"/runs/{run['run_id']}", params={"format": "html"})).text
    assert 'id="episodes-hidden"' in html and episode_id not in html
    grade = (await client.get("/grader", params={"run_id": run["run_id"]})).json()
    assert "episodes" not in grade or grade.get("episodes") in (None, [])


async def test_a_test_episode_shows_its_progress_to_its_run_token_holder_only_while_the_run_is_active(
    keyed_client: Client, keyed: Settings
) -> None:
    """#21.3: a test run's per-episode step counts were public (run page, /state): they showed which
    tickets needed request_info (200 of 200 decision tickets, no key needed). Now only the holder of the
    run token sees an episode's progress, and only while the run is active."""
    client = keyed_client
    run = await create_run(client, ALICE_KEY, split="test", agent="closer")
    episode_id = await start_and_act(client, run)
    for state in await states_everywhere(client, keyed, episode_id, run, anonymous=False):
        progress_only(state, episode_id, run)
    await anonymous_reads(client, episode_id, run)
    view = (await client.get(f"/runs/{run['run_id']}")).json()
    assert view["episodes_started"] is None and view["episodes_done"] is None  # counters would time the steps
    mine = (await client.get(f"/runs/{run['run_id']}", headers=auth(run["run_token"]))).json()
    assert mine["episodes_listed"] and mine["episodes"][0]["step_count"] >= 1 and mine["episodes_started"] == 1
    # the page a stranger reads does not change with a step (its ETag would time each ticket's steps)
    etag = (await client.get(f"/runs/{run['run_id']}")).headers["etag"]
    await client.post(
        "/step", json={"episode_id": episode_id, "action": {"lookup": "order"}}, headers=auth(run["run_token"])
    )
    assert (await client.get(f"/runs/{run['run_id']}")).headers["etag"] == etag


async def test_once_a_test_run_is_over_nothing_per_episode_is_shown_to_anyone(keyed_client: Client) -> None:
    client = keyed_client
    run = await create_run(client, ALICE_KEY, split="test", agent="closer")
    episode_id = await start_and_act(client, run)
    last = await finish(client, run, episode_id)
    await play_run(client, run, agent=close_at_once)
    assert (await client.get(f"/runs/{run['run_id']}")).json()["status"] == "complete"
    token = auth(run["run_token"])
    assert_problem(await client.get("/state", params={"episode_id": episode_id}, headers=token), 403, "over")
    resumed = await client.post("/reset", json={"episode_id": episode_id, "resume": True}, headers=token)
    assert_problem(resumed, 403, "over")
    replay = await client.post(
        "/step",
        json={"episode_id": episode_id, "action": {"decision": "reject"}, "request_id": "again"},
        headers=token,
    )
    assert_problem(replay, 403, "over")
    assert "step" not in (await client.get("/grader", params={"episode_id": episode_id})).json()["detail"]
    page = (await client.get(f"/runs/{run['run_id']}", headers=token)).json()
    assert page["episodes"] == [] and page["episodes_listed"] is False
    # the one released number and what follows from it and the run's size: no count of anything per episode
    assert set(page["summary"] or {}) <= {"resolved", "resolved_ci95", "items", "episodes", "errors", "noise_scale"}
    assert last["metadata"]["step_count"] not in (page["summary"] or {}).values()
    await anonymous_reads(client, episode_id, run)


async def test_a_dev_run_reveals_nothing_per_episode_until_it_completes(client: Client, settings: Settings) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    episode_id = await start_and_act(client, run)
    for state in await states_everywhere(client, settings, episode_id, run):
        progress_only(state, episode_id, run)

    # one finished episode of the run, played to its end: its final observation has no verdict
    finished = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()["metadata"][
        "episode_id"
    ]
    body = await finish(client, run, finished)
    final = body["observation"]
    assert final["final"] is True and final["score"] is None and final["resolved"] is None and body["reward"] == 0.0
    for headers in ({}, auth(run["run_token"])):  # not even for the run's own agent
        assert_problem(
            await client.get("/grader", params={"episode_id": finished}, headers=headers), 409, "in progress"
        )
        assert_problem(await client.get(f"/episodes/{finished}", headers=headers), 409, "in progress")
    assert_problem(
        await client.get(f"/runs/{run['run_id']}/trajectories.jsonl", headers=auth(run["run_token"])),
        409,
        "in progress",
    )
    resumed = (
        await client.post("/reset", json={"episode_id": finished, "resume": True}, headers=auth(run["run_token"]))
    ).json()
    assert resumed["observation"]["score"] is None and resumed["observation"]["resolved"] is None
    detail = (await client.get(f"/runs/{run['run_id']}")).json()
    assert detail["per_episode_results"] is False
    assert all(e.get("score") is None and e.get("resolved") is None for e in detail["episodes"])
    mcp_grade = (await mcp(client, "tools/call", {"name": "grade", "arguments": {"episode_id": finished}}))["result"]
    assert mcp_grade["isError"] is True and mcp_grade["structuredContent"]["status"] == 409

    await finish(client, run, episode_id)
    await play_run(client, run)
    detail = (await client.get(f"/runs/{run['run_id']}")).json()
    assert detail["status"] == "complete" and detail["per_episode_results"] is True
    assert all(isinstance(e["resolved"], bool) for e in detail["episodes"])
    grade = (await client.get("/grader", params={"episode_id": finished})).json()
    assert isinstance(grade["resolved"], bool) and grade["episode_id"] == finished
    assert (await client.get(f"/episodes/{finished}")).status_code == 200
    after = (
        await client.post("/reset", json={"episode_id": finished, "resume": True}, headers=auth(run["run_token"]))
    ).json()
    assert after["observation"]["score"] == grade["score"] and after["observation"]["resolved"] == grade["resolved"]
    state = (await client.get("/state", params={"episode_id": episode_id})).json()
    assert {"seed", "ticket_id", "tags", "queue"} <= set(state) and state["run_id"] == run["run_id"]  # now public


async def test_plain_episodes_keep_their_state_and_score(client: Client) -> None:
    """Outside runs nothing changes: the full state, and the score on the final observation."""
    body = (await client.post("/reset", json={"task_id": "workflow-triage", "seed": 1, "split": "dev"})).json()
    episode_id = body["metadata"]["episode_id"]
    await client.post("/step", json={"episode_id": episode_id, "action": {"add_tag": "Refund"}})
    state = (await client.get("/state", params={"episode_id": episode_id})).json()
    assert state["tags"] == ["Refund"] and state["seed"] == 1 and state["run_id"] is None
    done = (await client.post("/step", json={"episode_id": episode_id, "action": {"close_ticket": True}})).json()
    assert done["done"] and done["observation"]["final"] is True and done["observation"]["score"] is not None
    assert core.TASKS["workflow-triage"].family == "workflow"
