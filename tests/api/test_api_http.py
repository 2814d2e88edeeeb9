"""HTTP API: every endpoint and every error path, on each configured database backend."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from service import env as core
from service.app import create_app
from service.settings import Settings

Client = AsyncTestClient[Litestar]
PROBLEM = "application/problem+json"


def assert_problem(resp, status: int, *needles: str) -> dict:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith(PROBLEM)
    body = resp.json()
    assert body["status"] == status and body["title"] and body["type"].startswith("https://")
    for needle in needles:
        assert needle in body["detail"], body
    return body


async def play_until_done(client: Client, episode_id: str) -> list[dict]:
    """Request info once, then reject, then close, until the core says done."""
    actions = [{"lookup": "policy"}, {"decision": "reject", "reply": "Sorry, we cannot help.", "close_ticket": True}]
    results = []
    for i in range(50):
        action = actions[min(i, len(actions) - 1)]
        resp = await client.post("/step", json={"episode_id": episode_id, "action": action})
        assert resp.status_code == 200, resp.text
        results.append(resp.json())
        if resp.json()["done"]:
            return results
    raise AssertionError("episode never finished")


async def test_reset_with_empty_body_and_empty_object(client: Client) -> None:
    for kwargs in ({"content": b""}, {"json": {}}):
        resp = await client.post("/reset", **kwargs)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["reward"] is None and body["done"] is False
        meta = body["metadata"]
        assert body["observation"]["episode_id"] == meta["episode_id"]
        assert meta["task_id"] in core.TASKS and meta["split"] == "train" and isinstance(meta["seed"], int)
        assert "reward" not in body["observation"] and "done" not in body["observation"]


async def test_reset_is_deterministic_for_task_and_seed(client: Client) -> None:
    task = list(core.TASKS)[0]
    a = (await client.post("/reset", json={"task_id": task, "seed": 11})).json()
    b = (await client.post("/reset", json={"task_id": task, "seed": 11})).json()
    assert a["metadata"]["episode_id"] != b["metadata"]["episode_id"]
    strip = lambda o: {k: v for k, v in o.items() if k != "episode_id"}  # noqa: E731 - a one-line local helper
    assert strip(a["observation"]) == strip(b["observation"])
    _, expected = core.reset(task, 11, "train")
    assert strip(a["observation"]) == expected.model_dump(mode="json", exclude={"reward", "done"})


async def test_reset_via_get_with_query_parameters(client: Client) -> None:
    task = list(core.TASKS)[-1]
    resp = await client.get("/reset", params={"seed": 5, "task_id": task, "split": "dev", "episode_id": "get-ep"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"] == {
        **resp.json()["metadata"],
        "episode_id": "get-ep",
        "task_id": task,
        "seed": 5,
        "split": "dev",
    }
    assert_problem(await client.get("/reset", params={"seed": -1}), 400 if False else 422)
    assert_problem(await client.get("/reset", params={"split": "nope"}), 422, "split")


async def test_reset_difficulty_and_default_task_choice(client: Client) -> None:
    difficulty = next(iter(core.TASKS.values())).difficulty
    body = (await client.post("/reset", json={"difficulty": difficulty, "seed": 3})).json()
    assert core.TASKS[body["metadata"]["task_id"]].difficulty == difficulty
    chosen = {
        (await client.post("/reset", json={"seed": s})).json()["metadata"]["task_id"]
        for s in range(len(core.TICKET_TASKS))
    }
    # the seed spreads default resets over every ticket task; the store desk is reset by name
    assert chosen == set(core.TICKET_TASKS)
    assert_problem(await client.post("/reset", json={"difficulty": "impossible"}), 422, "difficulty")


async def test_reset_errors(client: Client) -> None:
    assert_problem(await client.post("/reset", json={"task_id": "no-such-task"}), 422, "unknown task_id", "GET /tasks")
    assert_problem(await client.post("/reset", json={"seed": -3}), 422, "seed")
    assert_problem(await client.post("/reset", json={"seed": "abc"}), 422, "seed")
    assert_problem(await client.post("/reset", json={"episode_id": "x" * 256}), 422, "episode_id")
    assert_problem(await client.post("/reset", json={"split": "holdout"}), 422, "split")
    assert_problem(await client.post("/reset", json=[1, 2]), 422)
    resp = await client.post("/reset", content=b"{not json", headers={"content-type": "application/json"})
    assert 400 <= resp.status_code < 500 and resp.headers["content-type"].startswith(PROBLEM)
    ok = await client.post("/reset", json={"episode_id": "dup"})
    assert ok.status_code == 200
    body = assert_problem(await client.post("/reset", json={"episode_id": "dup"}), 409, "is taken", "omit episode_id")
    assert body["episode_id"] == "dup"


async def test_step_applies_to_its_episode_only(client: Client) -> None:
    a = (await client.post("/reset", json={"seed": 1})).json()["metadata"]["episode_id"]
    b = (await client.post("/reset", json={"seed": 1})).json()["metadata"]["episode_id"]
    resp = await client.post("/step", json={"episode_id": a, "action": {"lookup": "order"}})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert isinstance(body["reward"], float) and body["done"] is False
    assert body["metadata"]["step_index"] == 1 and body["observation"]["episode_id"] == a
    assert (await client.get("/state", params={"episode_id": a})).json()["step_count"] == 1
    assert (await client.get("/state", params={"episode_id": b})).json()["step_count"] == 0


async def test_step_result_matches_the_pure_core(client: Client) -> None:
    task = list(core.TASKS)[0]
    eid = (await client.post("/reset", json={"task_id": task, "seed": 21})).json()["metadata"]["episode_id"]
    state, _ = core.reset(task, 21, "train")
    for action in ({"lookup": "customer"}, {"decision": "approve_refund"}):
        body = (await client.post("/step", json={"episode_id": eid, "action": action})).json()
        result = core.step(state, core.Action.model_validate(action))
        state = result.state
        assert body["reward"] == result.reward and body["done"] == result.done
        assert {k: v for k, v in body["observation"].items() if k != "episode_id"} == result.observation.model_dump(
            mode="json", exclude={"reward", "done"}
        )
        if result.done:
            break


async def test_step_error_paths(client: Client) -> None:
    eid = (await client.post("/reset", json={"seed": 2})).json()["metadata"]["episode_id"]
    client.cookies.clear()  # with the reset's cookie, an id-less step means that episode
    assert_problem(await client.post("/step", json={"action": {"decision": "reject"}}), 422, "POST /reset")
    assert_problem(
        await client.post("/step", json={"episode_id": "ghost", "action": {"decision": "reject"}}), 404, "POST /reset"
    )
    assert_problem(await client.post("/step", json={"episode_id": eid}), 422, "action")
    body = assert_problem(await client.post("/step", json={"episode_id": eid, "action": {"decision": "maybe"}}), 422)
    assert any(e["field"] == "action.decision" for e in body["errors"])
    body = assert_problem(await client.post("/step", json={"episode_id": eid, "action": {"colour": "red"}}), 422)
    assert any(e["field"] == "action.colour" for e in body["errors"])
    assert_problem(await client.post("/step", json={"episode_id": eid, "action": {}}), 422, "at least one")
    assert_problem(await client.post("/step", json={"episode_id": eid, "action": "reject"}), 422)
    assert_problem(await client.post("/step", json={"episode_id": eid, "action": {"reply": "x" * 5000}}), 422, "reply")
    assert_problem(
        await client.post("/step", json={"episode_id": eid, "action": {"decision": "reject"}, "timeout_s": 0}), 422
    )
    # nothing above was applied
    assert (await client.get("/state", params={"episode_id": eid})).json()["step_count"] == 0


async def test_action_type_alias_is_accepted(client: Client) -> None:
    eid = (await client.post("/reset", json={"task_id": list(core.TASKS)[0], "seed": 4})).json()["metadata"][
        "episode_id"
    ]
    resp = await client.post("/step", json={"episode_id": eid, "action": {"action_type": "reject"}})
    assert resp.status_code == 200, resp.text


async def test_steps_after_done_are_refused_and_grader_reports(client: Client) -> None:
    eid = (await client.post("/reset", json={"seed": 8})).json()["metadata"]["episode_id"]
    assert_problem(await client.get("/grader", params={"episode_id": eid}), 409, "not finished")
    results = await play_until_done(client, eid)
    steps = len(results)
    assert_problem(
        await client.post("/step", json={"episode_id": eid, "action": {"decision": "reject"}}),
        409,
        "finished",
        "/grader",
    )
    resp = await client.get("/grader", params={"episode_id": eid})
    assert resp.status_code == 200, resp.text
    grade = resp.json()
    assert 0.0 <= grade["score"] <= 1.0 and grade["components"] and grade["grader_version"] == core.GRADER_VERSION
    state = (await client.get("/state", params={"episode_id": eid})).json()
    assert state["step_count"] == steps and state["episode_status"] == "done"
    # the stored grade is the core's grade of the stored final state
    again = await client.get("/grader", params={"episode_id": eid})
    assert again.json()["score"] == grade["score"] and again.json()["graded_at"] == grade["graded_at"]
    assert_problem(await client.get("/grader", params={"episode_id": "ghost"}), 404)
    client.cookies.clear()  # with the reset's cookie, an id-less /grader means that episode
    assert_problem(await client.get("/grader"), 422, "episode_id")


async def test_state_endpoint(client: Client) -> None:
    stateless = (await client.get("/state")).json()
    assert stateless["episode_id"] is None and stateless["step_count"] == 0
    reset = (await client.post("/reset", json={"seed": 9, "episode_id": "state-ep"})).json()
    eid, token = reset["metadata"]["episode_id"], reset["metadata"]["episode_token"]
    body = (await client.get("/state", params={"episode_id": eid}, headers={"X-Episode-Token": token})).json()
    assert body["episode_id"] == "state-ep" and body["step_count"] == 0 and body["episode_status"] == "active"
    assert_problem(await client.get("/state", params={"episode_id": "ghost"}), 404, "POST /reset")


async def test_health_metadata_schema_tasks(client: Client) -> None:
    assert (await client.get("/health")).json() == {"status": "healthy"}
    meta = (await client.get("/metadata")).json()
    assert meta["name"] == "ecomm-support-env" and meta["description"] and meta["grader_version"] == core.GRADER_VERSION
    schema = (await client.get("/schema")).json()
    assert schema["action"]["properties"].keys() == {
        *core.Action.model_json_schema()["properties"],
        "action_type",
        "metadata",
    }
    assert {"action", "observation", "state"} <= set(schema)
    tasks = (await client.get("/tasks")).json()
    assert [t["id"] for t in tasks["tasks"]] == list(core.TASKS)
    assert tasks["action_schema"]["properties"].keys() >= {"decision", "reply", "close_ticket"}


async def test_openapi_document(client: Client) -> None:
    doc = (await client.get("/openapi.json")).json()
    assert doc["info"]["version"].startswith("1.")
    assert {"/reset", "/step", "/state", "/health", "/tasks", "/grader", "/baseline", "/mcp"} <= set(doc["paths"])


async def test_baseline_runs_the_heuristic_agent(client: Client) -> None:
    resp = await client.get("/baseline")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["agent"] == "heuristic" and set(body["tasks"]) == set(core.TASKS)
    from service.env.agents import evaluate_agent

    assert body["overall"] == evaluate_agent("heuristic", "dev", 1)["overall"]
    assert (await client.get("/baseline")).json() == body


async def test_unknown_route_wrong_method_and_oversized_body(client: Client) -> None:
    assert_problem(await client.get("/no/such/route"), 404)
    assert_problem(await client.delete("/reset"), 405)
    big = json.dumps({"episode_id": "x", "action": {"reply": "a" * (70 * 1024)}})
    assert_problem(await client.post("/step", content=big, headers={"content-type": "application/json"}), 413)


async def test_malformed_inputs_never_cause_5xx(client: Client) -> None:
    eid = (await client.post("/reset", json={})).json()["metadata"]["episode_id"]
    deep = "[" * 5000 + "]" * 5000
    bodies = [
        b"",
        b"null",
        b"[]",
        b"\xff\xfe",
        b'{"action": null}',
        deep.encode(),
        b'{"episode_id": 5, "action": {}}',
        json.dumps({"episode_id": eid, "action": {"decision": ["reject"]}}).encode(),
        json.dumps({"episode_id": eid, "action": {"close_ticket": "maybe"}}).encode(),
        json.dumps({"episode_id": eid, "request_id": "", "action": {"decision": "reject"}}).encode(),
    ]
    for path in ("/reset", "/step", "/mcp"):
        for body in bodies:
            resp = await client.post(path, content=body, headers={"content-type": "application/json"})
            assert resp.status_code < 500, (path, body[:40], resp.text)


async def test_the_name_and_version_have_one_source(client: Client) -> None:
    """Issue 23.4: the package's name and version (pyproject.toml), which openenv.yaml repeats, are what
    GET /metadata, the OpenAPI document and MCP's serverInfo say (service.env.about reads them)."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    manifest = (root / "openenv.yaml").read_text()
    assert (project["name"], project["version"]) == (core.ENV_NAME, core.ENV_VERSION)
    assert re.search(rf"^name: {re.escape(core.ENV_NAME)}$", manifest, re.M), "openenv.yaml's name"
    assert re.search(rf"^version: {re.escape(core.ENV_VERSION)}$", manifest, re.M), "openenv.yaml's version"
    meta = (await client.get("/metadata")).json()
    assert (meta["name"], meta["version"]) == (core.ENV_NAME, core.ENV_VERSION)
    info = (await client.get("/openapi.json")).json()["info"]
    assert (info["title"], info["version"]) == (core.ENV_NAME, core.ENV_VERSION)
    init = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})).json()
    assert init["result"]["serverInfo"] == {"name": core.ENV_NAME, "version": core.ENV_VERSION}


async def test_mcp_jsonrpc(client: Client) -> None:
    empty = await client.post("/mcp", json={})
    assert empty.status_code == 200 and empty.json()["jsonrpc"] == "2.0" and empty.json()["error"]["code"] == -32600
    parse = await client.post("/mcp", content=b"{", headers={"content-type": "application/json"})
    assert parse.status_code == 200 and parse.json()["error"]["code"] == -32700
    init = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})).json()
    assert init["result"]["serverInfo"]["name"] == "ecomm-support-env"
    tools = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).json()
    listed = [t["name"] for t in tools["result"]["tools"]]
    # the session tools, then every task's action tools (no session, so no episode to narrow them to)
    assert listed[:4] == ["reset", "step", "state", "grade"]
    assert listed[4:] == [t.name for family in ("decision", "store") for t in core.tools_for(family)]

    async def call(name: str, arguments: dict, id_: int = 2) -> dict:
        resp = await client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": id_,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            },
        )
        assert resp.status_code == 200 and resp.json()["id"] == id_
        return resp.json()["result"]

    reset = await call("reset", {"seed": 3, "task_id": list(core.TASKS)[0]})
    eid = reset["structuredContent"]["metadata"]["episode_id"]
    step = await call("step", {"episode_id": eid, "action": {"decision": "reject"}})
    assert step["isError"] is False and step["structuredContent"]["done"] is True
    state = await call("state", {"episode_id": eid})
    assert state["structuredContent"]["step_count"] == 1
    grade = await call("grade", {"episode_id": eid})
    assert 0.0 <= grade["structuredContent"]["score"] <= 1.0
    # the MCP step went through the same store as HTTP
    assert (await client.get("/state", params={"episode_id": eid})).json()["step_count"] == 1
    bad = await call("step", {"episode_id": "ghost", "action": {"decision": "reject"}})
    assert bad["isError"] is True and bad["structuredContent"]["status"] == 404
    unknown = (
        await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        )
    ).json()
    assert unknown["error"]["code"] == -32602
    missing = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 6, "method": "nope"})).json()
    assert missing["error"]["code"] == -32601


# ------------------------------------------------------------------ clients of other conventions
# Seed A's client (AdhiShak3008/ecomm-openenv) posts {"action_type": ...} at the top level, sends
# no episode_id anywhere, asks GET /grader without an id and knows tasks as easy|medium|hard.
# tests/client/test_clients_seed_a.py replays its whole call sequence against a live server.

DECISION_TASKS = {t.difficulty: t.id for t in core.TASKS.values() if t.family == "decision"}


async def test_step_accepts_the_action_at_the_top_level(client: Client) -> None:
    task = DECISION_TASKS["easy"]
    wrapped, top, seed_a = [
        (await client.post("/reset", json={"task_id": task, "seed": 6})).json()["metadata"]["episode_id"]
        for _ in range(3)
    ]
    first = (await client.post("/step", json={"episode_id": wrapped, "action": {"lookup": "order"}})).json()
    flat = await client.post("/step", json={"episode_id": top, "lookup": "order"})
    assert flat.status_code == 200, flat.text
    strip = lambda o: {k: v for k, v in o.items() if k != "episode_id"}  # noqa: E731 - a one-line local helper
    assert strip(flat.json()["observation"]) == strip(first["observation"]) and flat.json()["reward"] == first["reward"]
    last = (await client.post("/step", json={"episode_id": wrapped, "action": {"decision": "reject"}})).json()
    resp = await client.post("/step", json={"episode_id": seed_a, "action_type": "reject"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (
        body["done"] is True
        and body["reward"] == core.step(core.reset(task, 6, "train")[0], core.Action(decision="reject")).reward
    )
    assert body["observation"]["final"] is True and last["done"] is True
    # bad input is still a 422 problem, and nothing is applied
    eid = (await client.post("/reset", json={"task_id": task, "seed": 6})).json()["metadata"]["episode_id"]
    body = assert_problem(await client.post("/step", json={"episode_id": eid, "action_type": "refund_please"}), 422)
    assert any(e["field"] == "action.action_type" for e in body["errors"]), body
    assert_problem(
        await client.post("/step", json={"episode_id": eid, "action_type": "reject", "action": {"lookup": "order"}}),
        422,
        "not both",
    )
    assert_problem(
        await client.post("/step", json={"episode_id": eid, "action_type": "reject", "decision": "approve_refund"}),
        422,
        "action_type",
    )
    assert_problem(await client.post("/step", json={"episode_id": eid, "colour": "red"}), 422, "action")
    assert_problem(await client.post("/step", json={"episode_id": eid, "action_type": None}), 422)
    assert (await client.get("/state", params={"episode_id": eid})).json()["step_count"] == 0


async def test_schema_allows_what_step_accepts(client: Client) -> None:
    from jsonschema import Draft202012Validator

    schema = (await client.get("/schema")).json()["action"]
    validator = Draft202012Validator(schema)
    for action in ({"action_type": "approve_refund"}, {"decision": "reject", "reply": "Sorry."}, {"lookup": "policy"}):
        assert not list(validator.iter_errors(action)), action
    assert list(validator.iter_errors({"action_type": "refund_please"})) and list(
        validator.iter_errors({"colour": "red"})
    )
    tasks = (await client.get("/tasks")).json()
    assert tasks["action_schema"] == schema and all(t["action_schema"] == schema for t in tasks["tasks"])


async def test_task_aliases_name_the_decision_tasks(client: Client) -> None:
    for alias, task in DECISION_TASKS.items():
        body = (await client.post("/reset", json={"task_id": alias, "seed": 2})).json()
        assert body["metadata"]["task_id"] == task and body["observation"]["task_id"] == task
        got = (await client.get("/reset", params={"task_id": alias, "seed": 2})).json()
        assert got["metadata"]["task_id"] == task
    listed = {t["id"]: t.get("aliases", []) for t in (await client.get("/tasks")).json()["tasks"]}
    listed_aliases = {alias: task for task, aliases in listed.items() for alias in aliases}
    assert {
        a: t for a, t in listed_aliases.items() if a in DECISION_TASKS
    } == DECISION_TASKS  # seed B's: test_task_aliases.py
    assert_problem(await client.post("/reset", json={"task_id": "expert"}), 422, "easy", "decision-easy")
    assert_problem(await client.post("/reset", json={"task_id": "easy", "difficulty": "hard"}), 422, "difficulty")


class OwnJar:
    """A client of the app with its own cookie jar, over a shared test client (the app, its
    lifespan and its event loop run once; only the jars differ)."""

    def __init__(self, client: Client) -> None:
        self.client, self.cookies = client, httpx.Cookies()

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        self.client.cookies = self.cookies  # copied in ...
        try:
            return await self.client.request(method, url, **kwargs)
        finally:
            self.cookies = self.client.cookies  # ... and back, with what the response set

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", url, **kwargs)

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", url, **kwargs)


@asynccontextmanager
async def two_clients(app: Litestar) -> AsyncIterator[tuple[OwnJar, OwnJar]]:
    async with AsyncTestClient(app=app) as client:
        yield OwnJar(client), OwnJar(client)


async def test_reset_sets_a_cookie_that_no_other_client_shares(app: Litestar) -> None:
    """A client with a cookie jar may leave episode_id out after its reset; a client without the
    cookie is never given that episode (it gets the usual 422, or the stateless /state answer)."""
    async with two_clients(app) as (a, b):
        reset = await a.post("/reset", json={"task_id": "easy", "seed": 6})
        mine = reset.json()["metadata"]["episode_id"]
        assert "ecomm_episode" in reset.cookies
        step = await a.post("/step", json={"lookup": "order"})
        assert step.status_code == 200, step.text
        assert step.json()["observation"]["episode_id"] == mine
        assert (await a.get("/state")).json()["episode_id"] == mine
        assert_problem(await a.get("/grader"), 409, "not finished")
        # b has no cookie: it cannot step, read or grade a's episode by leaving the id out
        assert_problem(await b.post("/step", json={"action_type": "reject"}), 422, "episode_id", "cookie")
        assert (await b.get("/state")).json()["episode_id"] is None
        assert_problem(await b.get("/grader"), 422, "episode_id")
        theirs = (await b.get("/reset", params={"task_id": "hard", "seed": 1})).json()["metadata"]["episode_id"]
        assert (await b.post("/step", json={"action_type": "reject"})).json()["observation"]["episode_id"] == theirs
        assert (await a.get("/state")).json() == (await a.get("/state", params={"episode_id": mine})).json()
        assert (await a.get("/state")).json()["step_count"] == 1  # b's step went to b's episode
        # an explicit id wins over the cookie
        assert (await a.get("/state", params={"episode_id": theirs})).json()["episode_id"] == theirs
        done = (await a.post("/step", json={"action_type": "reject"})).json()
        assert done["done"] is True and done["observation"]["episode_id"] == mine
        grade = (await a.get("/grader")).json()
        assert grade["episode_id"] == mine and grade["score"] == done["observation"]["score"]
        # a cookie naming no episode is a 404 problem, not another episode
        a.cookies.set("ecomm_episode", "ghost")
        assert_problem(await a.post("/step", json={"action_type": "reject"}), 404)


async def test_single_session_mode_serves_a_client_without_id_or_cookie(settings: Settings) -> None:
    """SINGLE_SESSION=1 (an operator's choice, off by default): a request that names no episode
    and has no cookie means the episode of the latest reset that named none either."""
    off = create_app(settings)
    async with AsyncTestClient(app=off) as c:
        await c.get("/reset")
        c.cookies.clear()  # a client like `requests.post(...)`: no cookie jar
        assert_problem(await c.post("/step", json={"action_type": "reject"}), 422, "SINGLE_SESSION")
    on = create_app(replace(settings, single_session=True))
    async with two_clients(on) as (c, other):
        eid = (await c.get("/reset")).json()["metadata"]["episode_id"]
        c.cookies.clear()
        # a client naming its own episodes never moves the session
        mine = (await other.post("/reset", json={"episode_id": "explicit-ep", "task_id": "medium"})).json()
        assert mine["metadata"]["episode_id"] == "explicit-ep"
        other.cookies.clear()
        for _ in range(core.TASKS[(await c.get("/state")).json()["task_id"]].max_steps):
            resp = await c.post("/step", json={"action_type": "request_info"})
            c.cookies.clear()
            assert resp.status_code == 200, resp.text
            assert resp.json()["observation"]["episode_id"] == eid
            if resp.json()["done"]:
                break
        else:
            resp = await c.post("/step", json={"action_type": "reject"})
            assert resp.json()["done"] is True
        grade = await c.get("/grader")
        assert grade.status_code == 200 and grade.json()["episode_id"] == eid
        # the chosen id was not moved by the session; and the session gives nobody else its token
        assert_problem(await c.get("/state", params={"episode_id": "explicit-ep"}), 401)
        owned = {"X-Episode-Token": mine["metadata"]["episode_token"]}
        assert (await other.get("/state", params={"episode_id": "explicit-ep"}, headers=owned)).json()[
            "step_count"
        ] == 0


def test_single_session_setting() -> None:
    assert Settings.from_env({}).single_session is False
    assert Settings.from_env({"SINGLE_SESSION": "1"}).single_session is True
    assert Settings.from_env({"DEFAULT_TASKS": "easy, medium,hard"}).default_tasks == ("easy", "medium", "hard")
    with pytest.raises(ValueError, match="WORKERS"):
        Settings.from_env({"SINGLE_SESSION": "1", "WORKERS": "2"})


async def test_default_tasks_limit_resets_that_name_no_task(settings: Settings) -> None:
    app = create_app(replace(settings, default_tasks=("easy", "medium", "hard")))
    async with AsyncTestClient(app=app) as c:
        chosen = {(await c.get("/reset", params={"seed": s})).json()["metadata"]["task_id"] for s in range(12)}
    assert chosen == set(DECISION_TASKS.values())
    with pytest.raises(ValueError, match="DEFAULT_TASKS"):
        create_app(replace(settings, default_tasks=("nope",)))


async def test_get_endpoints_refuse_unknown_query_parameters(client: Client) -> None:
    """GET /reset used to ignore what it did not know (`?task=hard` → a random task, 200); like POST
    /reset's closed body it names the unknown key and lists the accepted ones. /state and /grader too."""
    problem = assert_problem(
        await client.get("/reset", params={"task": "hard"}), 422, "'task'", "task_id", "difficulty"
    )
    assert problem["errors"][0]["field"] == "task" and problem["errors"][0]["type"] == "unknown_field"
    assert_problem(await client.get("/reset", params={"seed": 3, "bogus": "1"}), 422, "'bogus'")
    assert_problem(
        await client.get("/reset", params={"run_token": "t" * 43}), 400, "Authorization: Bearer"
    )  # never in a URL
    ok = await client.get("/reset", params={"task_id": "hard", "seed": 3, "split": "dev"})
    assert ok.status_code == 200 and ok.json()["metadata"]["task_id"] == "decision-hard"
    episode_id = ok.json()["metadata"]["episode_id"]
    assert_problem(
        await client.get("/state", params={"episode_id": episode_id, "verbose": "1"}), 422, "'verbose'", "episode_id"
    )
    assert_problem(
        await client.get("/grader", params={"episode": episode_id}), 422, "'episode'", "episode_id", "run_id"
    )
    assert (await client.get("/state", params={"episode_id": episode_id})).status_code == 200
    assert (await client.get("/state")).status_code == 200  # the stateless answer, no parameters at all
