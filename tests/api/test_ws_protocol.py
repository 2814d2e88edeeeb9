"""WebSocket /ws: OpenEnv frames, every error code, capacity, idle reaping, resume, persistence."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from litestar.exceptions import WebSocketDisconnect
from litestar.testing import TestClient

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app
from service.db.engine import Database
from service.domain.episodes.services import EpisodeService
from service.settings import Settings

TASK = list(core.TASKS)[0]


def expect_closed(ws) -> None:
    with pytest.raises(WebSocketDisconnect):
        ws.receive_json()


def error(ws, code: str) -> dict:
    frame = ws.receive_json()
    assert frame["type"] == "error", frame
    assert frame["data"]["code"] == code, frame
    assert frame["data"]["message"]
    return frame["data"]


def eventually(predicate, timeout: float = STALLED_AFTER_S) -> bool:
    """The server finishes a session's cleanup just after the client side closes: true as soon as it
    has (``timeout`` is a safety net against a hang, not a budget)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def still_open(ws) -> None:
    ws.send_json({"type": "state"})
    assert ws.receive_json()["type"] == "state"


async def test_full_episode_over_ws_is_persisted(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"episode_id": "ws-1", "seed": 2, "task_id": TASK}})
        first = ws.receive_json()
        assert first["type"] == "observation"
        assert first["data"]["reward"] is None and first["data"]["done"] is False
        assert first["data"]["observation"]["episode_id"] == "ws-1"
        ws.send_json({"type": "state"})
        state = ws.receive_json()["data"]
        assert state["episode_id"] == "ws-1" and state["step_count"] == 0
        steps = 0
        expected_state, _ = core.reset(TASK, 2, "train")
        for action in ({"lookup": "order"}, {"decision": "reject"}):
            ws.send_json({"type": "step", "data": action})
            frame = ws.receive_json()
            steps += 1
            result = core.step(expected_state, core.Action.model_validate(action))
            expected_state = result.state
            assert frame["type"] == "observation" and "reward" in frame["data"]
            assert isinstance(frame["data"]["done"], bool)
            assert frame["data"]["reward"] == result.reward and frame["data"]["done"] == result.done
            ws.send_json({"type": "state"})
            assert ws.receive_json()["data"] == {
                **ws_state_expectation(client, "ws-1", first["data"]["metadata"]["episode_token"]),
                "episode_id": "ws-1",
                "step_count": steps,
            }
            if result.done:
                break
        ws.send_json({"type": "close"})
        expect_closed(ws)
    # the HTTP side sees the same stored episode
    with TestClient(create_app(settings)) as client:
        assert ws_state_expectation(client, "ws-1", first["data"]["metadata"]["episode_token"])["step_count"] == steps
        owner = {"X-Episode-Token": first["data"]["metadata"]["episode_token"]}
        assert client.get("/grader", params={"episode_id": "ws-1"}, headers=owner).status_code == 200


def ws_state_expectation(client: TestClient, episode_id: str, token: str) -> dict:
    return client.get("/state", params={"episode_id": episode_id}, headers={"X-Episode-Token": token}).json()


async def test_error_codes_keep_the_connection_open(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_text("{not json")
        error(ws, "INVALID_JSON")
        ws.send_json({"type": "dance"})
        error(ws, "UNKNOWN_TYPE")
        ws.send_json({"data": {}})
        error(ws, "UNKNOWN_TYPE")
        ws.send_json({"type": "state", "extra": 1})
        assert error(ws, "VALIDATION_ERROR")["errors"]
        ws.send_json({"type": "step"})
        error(ws, "VALIDATION_ERROR")
        ws.send_json([1, 2])
        error(ws, "VALIDATION_ERROR")
        ws.send_json({"type": "step", "data": {"reply": "x" * 100_000}})
        assert "limit" in error(ws, "VALIDATION_ERROR")["message"]
        ws.send_json({"type": "step", "data": {"decision": "reject"}})
        assert "reset" in error(ws, "EXECUTION_ERROR")["message"]
        ws.send_json({"type": "reset", "data": {"seed": -1}})
        error(ws, "VALIDATION_ERROR")
        ws.send_json({"type": "reset", "data": {"seed": 1, "task_id": TASK, "episode_id": "dup"}})
        assert ws.receive_json()["type"] == "observation"
        ws.send_json({"type": "step", "data": {"decision": "sometimes"}})
        errs = error(ws, "VALIDATION_ERROR")["errors"]
        assert any(e["field"] == "action.decision" for e in errs)
        ws.send_json({"type": "reset", "data": {"episode_id": "dup"}})
        assert "is taken" in error(ws, "EXECUTION_ERROR")["message"]
        ws.send_json({"type": "reset", "data": {"episode_id": "never-made", "resume": True}})
        assert error(ws, "EXECUTION_ERROR")["status"] == 404
        # still attached to "dup": finish it, then a step after done is an execution error
        ws.send_json({"type": "reset", "data": {"episode_id": "dup", "resume": True}})
        assert ws.receive_json()["data"]["observation"]["episode_id"] == "dup"
        ws.send_json({"type": "step", "data": {"decision": "reject"}})
        assert ws.receive_json()["data"]["done"] is True
        ws.send_json({"type": "step", "data": {"decision": "reject"}})
        assert "finished" in error(ws, "EXECUTION_ERROR")["message"]
        still_open(ws)


async def test_mcp_frames_act_on_the_session_episode(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}})
        frame = ws.receive_json()
        # no episode yet: the session tools and every task's action tools (tests/api/test_mcp_tools.py)
        assert frame["type"] == "mcp" and len(frame["data"]["result"]["tools"]) == 4 + 6 + 18
        ws.send_json(
            {
                "type": "mcp",
                "data": {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "reset", "arguments": {"task_id": TASK, "seed": 5}},
                },
            }
        )
        eid = ws.receive_json()["data"]["result"]["structuredContent"]["metadata"]["episode_id"]
        ws.send_json(
            {
                "type": "mcp",
                "data": {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "step", "arguments": {"action": {"lookup": "policy"}}},
                },
            }
        )
        assert ws.receive_json()["data"]["result"]["isError"] is False
        ws.send_json({"type": "state"})
        assert ws.receive_json()["data"] == {**client.get("/state", params={"episode_id": eid}).json(), "step_count": 1}
        ws.send_json({"type": "mcp", "data": {}})
        assert ws.receive_json()["data"]["error"]["code"] == -32600


async def test_capacity_reached_then_released(settings: Settings) -> None:
    app = create_app(replace(settings, max_concurrent_envs=2))
    with TestClient(app) as client:
        with client.websocket_connect("/ws") as a, client.websocket_connect("/ws") as b:
            still_open(a)
            still_open(b)
            with client.websocket_connect("/ws") as c:
                data = error(c, "CAPACITY_REACHED")
                assert data["active_sessions"] == 2 and data["max_sessions"] == 2
                expect_closed(c)
        assert eventually(lambda: app.state.ws_sessions.active == 0)
        with client.websocket_connect("/ws") as d:  # a and b are gone: room again
            still_open(d)
        assert eventually(lambda: app.state.ws_sessions.active == 0)


async def test_idle_session_is_reaped(settings: Settings) -> None:
    app = create_app(replace(settings, ws_idle_timeout_s=0.3))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"episode_id": "idle-ep", "task_id": TASK, "seed": 1}})
        ws.receive_json()
        data = error(ws, "SESSION_ERROR")  # sent by the reaper: nothing else ends a session the client keeps open
        assert "idle for 0.3s" in data["message"] and "resume" in data["message"], data  # this setting's timeout
        expect_closed(ws)
        assert eventually(lambda: app.state.ws_sessions.active == 0)


async def test_resume_after_a_dropped_connection(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"episode_id": "resume-me", "task_id": TASK, "seed": 7}})
            token = ws.receive_json()["data"]["metadata"]["episode_token"]
            ws.send_json({"type": "step", "data": {"lookup": "customer"}})
            before = ws.receive_json()["data"]
        # dropped without a close frame; a new connection re-attaches
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"episode_id": "resume-me", "resume": True, "episode_token": token}})
            frame = ws.receive_json()["data"]
            assert frame["observation"] == before["observation"] and frame["reward"] == before["reward"]
            assert frame["metadata"]["resumed"] is True
            ws.send_json({"type": "state"})
            state = ws.receive_json()["data"]
            assert state["episode_id"] == "resume-me" and state["step_count"] == 1
            ws.send_json({"type": "step", "data": {"decision": "reject"}})
            assert ws.receive_json()["type"] == "observation"
            ws.send_json({"type": "state"})
            assert ws.receive_json()["data"]["step_count"] == 2


async def test_factory_error_when_the_store_is_unreachable(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(settings)
    with TestClient(app) as client:
        unreachable = Database("postgresql+asyncpg://nobody@127.0.0.1:1/none")
        monkeypatch.setattr(app.state.ws_sessions, "episodes", EpisodeService(unreachable))
        with client.websocket_connect("/ws") as ws:
            data = error(ws, "FACTORY_ERROR")
            assert "unavailable" in data["message"]
            expect_closed(ws)
        assert eventually(lambda: app.state.ws_sessions.active == 0)
