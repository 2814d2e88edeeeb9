"""Seed clients' task names (issue 20, item 7): seed A's ``easy|medium|hard`` name the decision tasks
(its episodes are all refund decisions); seed B's names name the workflow tasks seed B describes
(``workflow-easy``: tag and close; ``workflow-medium`` and seed B's ``triage``: escalate with a holding
reply — our routing; ``workflow-hard``: a policy-grounded denial — our resolution). Each is accepted
wherever a task id is: the in-process core, OpenEnv's in-memory environment, HTTP, WebSocket, MCP,
runs; and GET /tasks lists them. A request without an episode id on a default server names the two
settings seed A's client needs."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from service import env as core
from service.app import create_app
from service.env.tasks import TASK_ALIASES
from service.settings import Settings

Client = AsyncTestClient[Litestar]

EXPECTED = {
    "easy": "decision-easy",
    "medium": "decision-medium",
    "hard": "decision-hard",
    "workflow-easy": "workflow-triage",
    "workflow-medium": "workflow-routing",
    "triage": "workflow-routing",
    "workflow-hard": "workflow-resolution",
}


def test_the_alias_table_is_the_one_the_issue_describes() -> None:
    assert TASK_ALIASES == EXPECTED
    assert all(alias not in core.TASKS for alias in TASK_ALIASES)  # an alias never shadows a task id
    # seed B's tasks as seed B describes them: easy tags and closes, medium escalates with a holding
    # reply, hard denies under the policy
    assert core.TASKS[TASK_ALIASES["workflow-easy"]].family == "workflow"
    assert "reassign" in core.TASKS[TASK_ALIASES["triage"]].instructions
    assert "policy" in core.TASKS[TASK_ALIASES["workflow-hard"]].instructions


@pytest.mark.parametrize(("alias", "task_id"), sorted(EXPECTED.items()))
def test_the_in_process_core_takes_every_alias(alias: str, task_id: str) -> None:
    state, obs = core.reset(alias, 3, "dev")
    assert state.task_id == obs.task_id == task_id and core.get_task(alias).id == task_id
    assert core.reset(alias.upper().replace("-", "_"), 3, "dev")[0].task_id == task_id  # seed B's spellings


def test_openenvs_in_memory_environment_takes_them_too() -> None:
    from server.environment import SupportEnvironment

    env = SupportEnvironment()
    assert env.reset(seed=1, task_id="triage", split="dev").task_id == "workflow-routing"
    assert env.reset(seed=1, task_id="hard", split="dev").task_id == "decision-hard"


async def test_openenvs_in_memory_environment_chooses_tasks_as_the_service_does(client: Client) -> None:
    """Issue 23.4: one choice of task for a reset, the core's (``service.env.choose_task``) — by difficulty
    (seed A's names), by seed among the ticket tasks, or the one named."""
    from server.environment import SupportEnvironment

    env = SupportEnvironment()
    for seed, kwargs in [(s, {}) for s in range(7)] + [(4, {"difficulty": d}) for d in ("easy", "medium", "hard")]:
        served = (await client.post("/reset", json={"seed": seed, "split": "dev", **kwargs})).json()
        assert env.reset(seed=seed, split="dev", **kwargs).task_id == served["observation"]["task_id"], kwargs
    assert env.reset(seed=2, difficulty="hard", split="dev").task_id == "decision-hard"


async def test_http_mcp_and_runs_take_them(client: Client) -> None:
    for alias, task_id in EXPECTED.items():
        body = (await client.post("/reset", json={"task_id": alias, "seed": 1, "split": "dev"})).json()
        assert body["observation"]["task_id"] == task_id, (alias, body)
    got = (await client.get("/reset", params={"task_id": "workflow-medium", "seed": 2, "split": "dev"})).json()
    assert got["observation"]["task_id"] == "workflow-routing"
    tasks = {t["id"]: t for t in (await client.get("/tasks")).json()["tasks"]}
    assert tasks["workflow-routing"]["aliases"] == ["workflow-medium", "triage"]
    assert tasks["decision-easy"]["aliases"] == ["easy"]
    run = await client.post(
        "/runs", json={"agent": "a", "model": "m", "split": "dev", "task_ids": ["triage"], "limit_per_task": 1}
    )
    assert run.status_code in (200, 201), run.text
    assert {e["task_id"] for e in run.json()["manifest"]} == {"workflow-routing"} if "manifest" in run.json() else True
    mcp = await client.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "reset", "arguments": {"task_id": "workflow-hard", "seed": 1, "split": "dev"}},
        },
    )
    assert "workflow-resolution" in mcp.text, mcp.text


def test_the_websocket_takes_them(settings: Settings) -> None:
    """Its own app: a second lifespan on the async client's app would start in another event loop and
    reuse a database pool bound to the first (PostgreSQL refuses that)."""
    with TestClient(create_app(settings)) as sync, sync.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": "workflow-easy", "seed": 1, "split": "dev"}})
        assert ws.receive_json()["data"]["observation"]["task_id"] == "workflow-triage"


async def test_an_unknown_task_lists_every_alias(client: Client) -> None:
    resp = await client.post("/reset", json={"task_id": "nope", "seed": 1})
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert all(alias in detail for alias in EXPECTED), detail


async def test_a_request_without_an_episode_id_names_both_settings(client: Client) -> None:
    """Seed A's client sends no episode id and keeps no cookie: the 422 names the exact settings its
    server needs — SINGLE_SESSION=1 alone would put 4 of 6 of its resets in workflow tasks."""
    resp = await client.post("/step", json={"action_type": "reject"})
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert "SINGLE_SESSION=1" in detail and "DEFAULT_TASKS=easy,medium,hard" in detail, detail


def test_single_session_without_default_tasks_is_warned_at_start(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("service.app")
    logger.addHandler(caplog.handler)  # Litestar's logging config replaces the root's handlers
    try:
        with TestClient(create_app(replace(settings, single_session=True))):
            pass
        with TestClient(create_app(replace(settings, single_session=True, default_tasks=("easy",)))):
            pass
    finally:
        logger.removeHandler(caplog.handler)
    warned = [r.getMessage() for r in caplog.records if "without DEFAULT_TASKS" in r.getMessage()]
    assert len(warned) == 1 and "DEFAULT_TASKS=easy,medium,hard" in warned[0], warned
