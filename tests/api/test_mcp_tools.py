"""MCP: one tool per action (issue 20.1). ``tools/list`` shows the session tools and the action tools of the
session's episode — the ticket tasks' six, or the store desk's eighteen; both sets before any reset — with
the schemas ``GET /tasks`` shows; ``tools/call`` plays an action tool as one step of the session's episode,
over ``POST /mcp`` and over the WebSocket (``mcp`` frames and openenv's list_tools / call_tool step frames)."""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from service import env as core
from service.domain.episodes.mcp import McpSession
from service.domain.episodes.services import EpisodeService
from service.domain.episodes.websocket import _handle
from service.settings import Settings

SESSION = ["reset", "step", "state", "grade"]
TICKET = ["decide", "reply", "route", "tag", "lookup", "close"]
STORE = [t.name for t in core.tools_for("store")]


def rpc(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


class Session:
    """An HTTP MCP session, as openenv 0.10's MCPToolClient drives one."""

    def __init__(self, client: AsyncTestClient[Litestar], session_id: str | None) -> None:
        self.client, self.id = client, session_id

    @classmethod
    async def open(cls, client: AsyncTestClient[Litestar]) -> Session:
        created = (await client.post("/mcp", json=rpc("openenv/session/create"))).json()
        return cls(client, created["result"]["session_id"])

    def _params(self, **params: Any) -> dict[str, Any]:
        return {**params, "session_id": self.id} if self.id else params

    async def tools(self) -> list[dict[str, Any]]:
        answer = (await self.client.post("/mcp", json=rpc("tools/list", self._params()))).json()
        return answer["result"]["tools"]

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        body = rpc("tools/call", self._params(name=name, arguments=arguments))
        answer = (await self.client.post("/mcp", json=body)).json()
        assert "result" in answer, answer
        return answer["result"]


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["name"] for t in tools]


async def test_tools_list_shows_the_episode_tasks_tools(client: AsyncTestClient[Litestar]) -> None:
    """Before a reset every tool (the names never overlap); then the session tools and the episode's own:
    a decision and a workflow episode list the six ticket tools, a store episode the store desk's."""
    session = await Session.open(client)
    assert names(await session.tools()) == SESSION + TICKET + STORE
    for task_id, expected in (("decision-easy", TICKET), ("workflow-triage", TICKET), ("store-easy", STORE)):
        started = await session.call("reset", task_id=task_id, seed=1, split="dev")
        assert started["isError"] is False
        assert names(await session.tools()) == SESSION + expected, task_id
    # without a session: stateless, so every tool
    assert names(await Session(client, None).tools()) == SESSION + TICKET + STORE


async def test_action_tool_schemas_are_the_tasks_tool_specs(client: AsyncTestClient[Litestar]) -> None:
    """One source: each action tool's inputSchema is the parameters GET /tasks gives the same tool."""
    specs = {spec["name"]: spec for task in (await client.get("/tasks")).json()["tasks"] for spec in task["tools"]}
    listed = await Session(client, None).tools()
    for tool in listed[len(SESSION) :]:
        assert tool["inputSchema"] == specs[tool["name"]]["parameters"], tool["name"]
        assert tool["description"] == specs[tool["name"]]["description"]
    decide = next(t for t in listed if t["name"] == "decide")["inputSchema"]
    assert decide["required"] == ["decision"] and decide["additionalProperties"] is False
    decisions = ["approve_refund", "approve_replacement", "reject", "request_info"]
    assert decide["properties"]["decision"]["enum"] == decisions


async def test_action_tools_play_steps_of_the_sessions_episode(client: AsyncTestClient[Litestar]) -> None:
    """A decision and a workflow episode played with action tools only: each call is one step (the same
    store as HTTP), its result a step's (observation, reward, done), and the last one ends the episode."""
    session = await Session.open(client)
    started = await session.call("reset", task_id="decision-medium", seed=0, split="dev")
    eid = started["data"]["metadata"]["episode_id"]
    looked = await session.call("lookup", target="order")
    assert looked["isError"] is False and looked["data"]["done"] is False
    assert looked["data"]["observation"]["tool_result"] is not None
    assert looked["data"]["observation"]["step_count"] == 1
    decided = await session.call("decide", decision="reject")
    assert decided["data"]["done"] is True and isinstance(decided["data"]["reward"], float)
    grade = (await client.get("/grader", params={"episode_id": eid})).json()
    assert decided["data"]["observation"]["score"] == grade["score"]
    assert (await client.get("/state", params={"episode_id": eid})).json()["step_count"] == 2

    started = await session.call("reset", task_id="workflow-resolution", seed=0, split="dev")
    eid = started["data"]["metadata"]["episode_id"]
    for name, arguments in (
        ("route", {"queue": "Returns"}),
        ("tag", {"tag": "Refund"}),
        ("reply", {"text": "Thank you for writing; we have looked into your order."}),
        ("close", {}),
    ):
        result = await session.call(name, **arguments)
        assert result["isError"] is False, result
    assert result["data"]["done"] is True
    state = (await client.get("/state", params={"episode_id": eid})).json()
    assert state["step_count"] == 4 and state["queue"] == "Returns" and state["tags"] == ["Refund"]


async def test_store_desk_tools_play_the_store_episode(client: AsyncTestClient[Litestar]) -> None:
    session = await Session.open(client)
    started = await session.call("reset", task_id="store-easy", seed=0, split="dev")
    eid = started["data"]["metadata"]["episode_id"]
    found = await session.call("search_policy", query="damaged item replacement")
    result = found["data"]["observation"]["tool_result"]
    assert found["isError"] is False and result["tool"] == "search_policy" and result["ok"] is True
    ended = await session.call("end_conversation")
    assert ended["data"]["done"] is True
    grade = (await client.get("/grader", params={"episode_id": eid})).json()
    assert ended["data"]["observation"]["score"] == grade["score"]


async def test_bad_calls_are_tool_errors_and_play_nothing(client: AsyncTestClient[Litestar]) -> None:
    """Invalid arguments name the fields; a tool of the other desk says which tools the episode takes; a
    call without an episode says to reset first. None of them is a step (the store desk would count one)."""
    session = await Session.open(client)
    no_episode = await session.call("decide", decision="reject")
    assert no_episode["isError"] is True and no_episode["structuredContent"]["status"] == 409
    assert "reset" in no_episode["structuredContent"]["detail"]
    stateless = await Session(client, None).call("lookup", target="order")
    assert stateless["isError"] is True and "openenv/session/create" in stateless["structuredContent"]["detail"]

    started = await session.call("reset", task_id="store-medium", seed=2, split="dev")
    eid = started["data"]["metadata"]["episode_id"]
    refund = await session.call("refund", order_id="ORD-1", amounts=[{"to": "store_credit", "amount": -5}], x=1)
    problem = refund["structuredContent"]
    assert refund["isError"] is True and problem["status"] == 422
    fields = {e["field"] for e in problem["errors"]}
    assert {"arguments.amounts.0.amount", "arguments.x"} <= fields, problem
    other = await session.call("decide", decision="reject")
    assert other["isError"] is True and "refund" in other["structuredContent"]["detail"]
    assert "ticket tasks" in other["structuredContent"]["detail"]
    assert (await client.get("/state", params={"episode_id": eid})).json()["step_count"] == 0

    started = await session.call("reset", task_id="decision-easy", seed=2, split="dev")
    eid = started["data"]["metadata"]["episode_id"]
    wrong = await session.call("get_order", order_id="ORD-1")
    assert wrong["isError"] is True and "store desk" in wrong["structuredContent"]["detail"]
    queue = await session.call("route", queue="Nowhere")
    assert queue["isError"] is True and queue["structuredContent"]["errors"][0]["field"] == "arguments.queue"
    assert (await client.get("/state", params={"episode_id": eid})).json()["step_count"] == 0


def test_websocket_step_frames_list_and_call_the_episode_tools(app: Litestar) -> None:
    """openenv 0.10's ``env.step(ListToolsAction())`` / ``env.step(CallToolAction(...))`` frames: the list
    follows the session's episode, and a call that plays a step carries its reward and done on the frame."""
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "step", "data": {"type": "list_tools"}})
        assert names(ws.receive_json()["data"]["observation"]["tools"]) == SESSION + TICKET + STORE
        ws.send_json({"type": "reset", "data": {"task_id": "store-hard", "seed": 0, "split": "dev"}})
        ws.receive_json()
        ws.send_json({"type": "step", "data": {"type": "list_tools"}})
        assert names(ws.receive_json()["data"]["observation"]["tools"]) == SESSION + STORE
        ws.send_json({"type": "step", "data": {"type": "call_tool", "tool_name": "end_conversation", "arguments": {}}})
        frame = ws.receive_json()["data"]
        assert frame["observation"]["tool_name"] == "end_conversation" and frame["observation"]["error"] is None
        payload = frame["observation"]["result"]["data"]
        assert frame["done"] is True and payload["done"] is True and frame["reward"] == payload["reward"]
        ws.send_json({"type": "step", "data": {"type": "call_tool", "tool_name": "decide", "arguments": {}}})
        refused = ws.receive_json()["data"]
        assert refused["observation"]["result"]["isError"] is True and refused["done"] is False

        ws.send_json({"type": "reset", "data": {"task_id": "workflow-routing", "seed": 0, "split": "dev"}})
        ws.receive_json()
        ws.send_json(
            {
                "type": "mcp",
                "data": rpc("tools/call", {"name": "route", "arguments": {"queue": "Billing"}}),
            }
        )
        answer = ws.receive_json()["data"]["result"]
        assert answer["isError"] is False and answer["data"]["observation"]["current_queue"] == "Billing"
        ws.send_json({"type": "mcp", "data": rpc("tools/list")})
        assert names(ws.receive_json()["data"]["result"]["tools"]) == SESSION + TICKET


async def test_action_tools_are_websocket_activity(app: Litestar, settings: Settings) -> None:
    """A successful action tool call keeps a WebSocket session alive, as a step frame does (sent as an
    ``mcp`` frame or a call_tool step frame); a refused one, a listing and a state call do not."""
    async with AsyncTestClient(app=app):  # the app migrates the database; frames are handled on this loop
        pass
    db = settings.database()
    try:
        episodes = EpisodeService(db, default_split="dev")
        session = McpSession()
        _, active = await _handle({"type": "reset", "data": {"task_id": "decision-easy", "seed": 0}}, session, episodes)
        assert active
        call = {"type": "call_tool", "tool_name": "lookup", "arguments": {"target": "policy"}}
        assert (await _handle({"type": "step", "data": call}, session, episodes))[1] is True
        refused = {"type": "call_tool", "tool_name": "lookup", "arguments": {"target": "weather"}}
        assert (await _handle({"type": "step", "data": refused}, session, episodes))[1] is False
        listing = {"type": "step", "data": {"type": "list_tools"}}
        assert (await _handle(listing, session, episodes))[1] is False
        mcp_call = rpc("tools/call", {"name": "tag", "arguments": {"tag": "Refund"}})
        assert (await _handle({"type": "mcp", "data": mcp_call}, session, episodes))[1] is True
        state = rpc("tools/call", {"name": "state", "arguments": {}})
        assert (await _handle({"type": "mcp", "data": state}, session, episodes))[1] is False
        assert (await episodes.state(session.episode_id))["step_count"] == 2
    finally:
        await db.dispose()
