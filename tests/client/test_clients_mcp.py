"""OpenEnv's own MCPToolClient against a live server, in both client versions.

- openenv 0.10 (the project's venv): ``openenv/session/create`` over ``POST /mcp``, then the
  WebSocket with ``?session_id=`` — reset over WS and tools over HTTP act on one episode —,
  ``tools/list`` and ``tools/call`` with the session id, ``openenv/session/close`` on exit.
- openenv-core 0.3.0 (a cached throwaway venv): its MCPToolClient sends ``list_tools`` and
  ``call_tool`` as WebSocket *step* frames (``{"type": "list_tools"}``); the server answers them
  as MCP requests (no action has a ``type`` field, so nothing is ambiguous). openenv 0.10 sends the
  same frames for ``env.step(ListToolsAction())`` / ``env.step(CallToolAction(...))``.

Every task's actions are tools of their own (decide, reply, route, tag, lookup, close; the store
desk's eighteen) beside reset/step/state/grade; tests/api/test_mcp_tools.py covers them in process.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from typing import Any

import httpx
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ListToolsAction
from openenv.core.mcp_client import MCPToolClient

from bench.harness import STALLED_AFTER_S
from service import env as core
from tests.client.test_clients_venvs import OPENENV_CORE_030, client_venv

SESSION_TOOLS = {"reset", "step", "state", "grade"}
TICKET_TOOLS = {"decide", "reply", "route", "tag", "lookup", "close"}
STORE_TOOLS = {t.name for t in core.tools_for("store")}
TOOLS = SESSION_TOOLS | TICKET_TOOLS | STORE_TOOLS  # what a session lists before its first reset


async def test_mcp_tool_client_0_10_lists_and_calls_tools(live_server: Any) -> None:
    async with MCPToolClient(base_url=live_server.url) as env:
        assert {t.name for t in await env.list_tools()} == TOOLS
        started = await env.call_tool("reset", task_id="decision-easy", seed=2, split="dev")
        episode_id = started["observation"]["episode_id"]
        stepped = await env.call_tool("step", action={"lookup": "order"})  # the session's episode
        assert stepped["done"] is False and stepped["observation"]["tool_result"] is not None
        state = await env.call_tool("state")
        assert state["episode_id"] == episode_id and state["step_count"] == 1

        # reset over the WebSocket the client attached with ?session_id=: the HTTP tools follow it
        result = await env.reset(task_id="workflow-triage", seed=1, split="dev", episode_id="mcp-ws-shared")
        assert result.done is False
        state = await env.call_tool("state")
        assert state["episode_id"] == "mcp-ws-shared" and state["step_count"] == 0
        await env.call_tool("step", action={"add_tag": "Refund"})
        ws_state = await env.state()
        assert ws_state.episode_id == "mcp-ws-shared" and ws_state.step_count == 1
        session_id = env._production_session_id
        assert session_id

        # the episode's own tools: a workflow episode lists the ticket tools, and they play its steps
        assert {t.name for t in await env.list_tools(use_cache=False)} == SESSION_TOOLS | TICKET_TOOLS
        routed = await env.call_tool("route", queue="Returns")
        assert routed["done"] is False and routed["observation"]["current_queue"] == "Returns"
        assert (await env.call_tool("state"))["step_count"] == 2
        refused = await env.call_tool("refund", order_id="ORD-1", amounts=[{"to": "store_credit", "amount": 1}])
        assert refused["isError"] is True and "store desk" in refused["structuredContent"]["detail"]
    # closed on exit: the session id is gone
    reply = httpx.post(
        live_server.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"session_id": session_id}},
        timeout=STALLED_AFTER_S,
    ).json()
    assert reply["error"]["code"] == -32602 and "Unknown session_id" in reply["error"]["message"]


async def test_mcp_tool_client_0_10_plays_a_store_episode_with_its_tools(live_server: Any) -> None:
    """The store desk's tools through openenv 0.10: listed once before the reset (every tool), called over
    HTTP MCP, and as ``env.step(CallToolAction(...))`` over the WebSocket, whose frame carries the step's
    reward and done; the final reward ends an episode /grader scores."""
    async with MCPToolClient(base_url=live_server.url) as env:
        assert {t.name for t in await env.list_tools()} == TOOLS
        started = await env.call_tool("reset", task_id="store-easy", seed=0, split="dev")
        episode_id = started["observation"]["episode_id"]
        listed = await env.step(ListToolsAction())
        assert {t.name for t in listed.observation.tools} == SESSION_TOOLS | STORE_TOOLS
        found = await env.call_tool("search_policy", query="damaged parcel")
        assert found["observation"]["tool_result"]["ok"] is True and found["done"] is False
        ended = await env.step(CallToolAction(tool_name="end_conversation", arguments={}))
        assert isinstance(ended.observation, CallToolObservation) and ended.observation.error is None
        assert ended.done is True and ended.reward == ended.observation.result["data"]["reward"]
    grade = httpx.get(live_server.url + "/grader", params={"episode_id": episode_id}).json()
    assert ended.observation.result["data"]["observation"]["score"] == grade["score"]


def test_mcp_session_methods_over_http(live_server: Any) -> None:
    def rpc(method: str, **params: Any) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        resp = httpx.post(live_server.url + "/mcp", json=body, timeout=STALLED_AFTER_S)
        assert resp.status_code == 200
        return resp.json()

    a = rpc("openenv/session/create")["result"]["session_id"]
    b = rpc("openenv/session/create")["result"]["session_id"]
    assert a != b
    rpc("tools/call", name="reset", arguments={"task_id": "decision-medium", "seed": 0, "split": "dev"}, session_id=a)
    rpc("tools/call", name="reset", arguments={"task_id": "decision-hard", "seed": 0, "split": "dev"}, session_id=b)
    state_a = rpc("tools/call", name="state", arguments={}, session_id=a)["result"]["data"]
    state_b = rpc("tools/call", name="state", arguments={}, session_id=b)["result"]["data"]
    assert state_a["episode_id"] != state_b["episode_id"]  # sessions are isolated
    assert rpc("openenv/session/close", session_id=a)["result"] == {"session_id": a, "closed": True}
    assert rpc("openenv/session/close", session_id=a)["error"]["code"] == -32602
    assert rpc("openenv/session/close")["error"]["code"] == -32602  # session_id is required
    # without a session, a tool call is still answered (stateless, as before)
    assert rpc("tools/list")["result"]["tools"]


CLIENT_030 = textwrap.dedent("""
    import asyncio, json, sys
    from openenv.core.mcp_client import MCPToolClient

    async def main(url):
        out = {}
        async with MCPToolClient(base_url=url) as env:
            out["tools"] = sorted(t.name for t in await env.list_tools())
            started = await env.call_tool("reset", task_id="decision-easy", seed=3, split="dev")
            out["episode_id"] = started["observation"]["episode_id"]
            out["step"] = await env.call_tool("step", action={"lookup": "customer"})
            out["state"] = await env.call_tool("state")
            try:
                await env.call_tool("no_such_tool")
            except RuntimeError as exc:
                out["unknown_tool"] = str(exc)
        print(json.dumps(out))

    asyncio.run(main(sys.argv[1]))
""")


def test_mcp_tool_client_0_3_0_lists_and_calls_tools(live_server: Any) -> None:
    python = client_venv(OPENENV_CORE_030)
    proc = subprocess.run(
        [str(python), "-c", CLIENT_030, live_server.url], capture_output=True, text=True, timeout=STALLED_AFTER_S
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert set(out["tools"]) == TOOLS  # listed before the reset: every tool
    assert out["step"]["done"] is False and out["step"]["observation"]["tool_result"] is not None
    assert out["state"]["episode_id"] == out["episode_id"] and out["state"]["step_count"] == 1
    assert "no_such_tool" in out["unknown_tool"] and "tool_not_found" in out["unknown_tool"]


async def test_tool_schemas_are_the_bodies_models(client: Any) -> None:
    """One contract per input: every tool's inputSchema is the JSON schema of the model that validates
    its arguments (reset's is POST /reset's body), so a field added to a body reaches the tools too."""
    from service.domain.episodes.mcp import TOOL_MODELS
    from service.domain.episodes.schemas import ResetParams

    listed = (await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).json()["result"][
        "tools"
    ]
    assert {t["name"] for t in listed} == TOOLS and set(TOOL_MODELS) == SESSION_TOOLS
    for tool in listed:
        if tool["name"] in TOOL_MODELS:
            assert tool["inputSchema"] == TOOL_MODELS[tool["name"]][1].model_json_schema()
        else:  # an action tool: its model's schema (tests/api/test_mcp_tools.py compares them with GET /tasks)
            family = "store" if tool["name"] in STORE_TOOLS else "decision"
            model = next(t.args for t in core.tools_for(family) if t.name == tool["name"])
            assert tool["inputSchema"] == model.model_json_schema()
    reset = next(t for t in listed if t["name"] == "reset")["inputSchema"]
    assert (
        set(reset["properties"]) == set(ResetParams.model_fields) >= {"run_id", "run_token", "resume", "episode_token"}
    )
    step = next(t for t in listed if t["name"] == "step")["inputSchema"]
    assert step["required"] == ["action"] and step["additionalProperties"] is False
