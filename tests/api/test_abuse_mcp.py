"""HTTP MCP sessions strangers share a server with (issue 13 audit, items 5 and 8): sessions live in
the database, so every worker serves every session; a client address holds a bounded share, and
nobody's recently used session is evicted to make room; idle ones are swept; the secrets a session
carries are not readable from the database; tool arguments are closed like HTTP bodies."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from bench.harness import STALLED_AFTER_S
from service.app import create_app
from service.db.models import mcp_sessions, utcnow
from service.domain.runs.services import RunService
from service.housekeeping import retention_pass
from service.settings import Settings
from tests.conftest import LiveServer

TASK = "decision-easy"


def rpc(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


def tool(session_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"session_id": session_id, "name": name, "arguments": arguments})


async def _create(client: AsyncTestClient, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return (await client.post("/mcp", json=rpc("openenv/session/create"), headers=headers or {})).json()


async def test_a_session_made_by_one_worker_is_served_by_another(settings: Settings) -> None:
    """Two apps on one database stand for two workers (deterministic; the live WORKERS=2 test is below)."""
    async with AsyncTestClient(app=create_app(settings)) as one, AsyncTestClient(app=create_app(settings)) as two:
        session_id = (await _create(one))["result"]["session_id"]
        reset = (
            await two.post("/mcp", json=tool(session_id, "reset", task_id=TASK, seed=3, episode_id="mcp-shared-1"))
        ).json()["result"]
        assert not reset["isError"], reset
        # the chosen id's token stays with the session: the other worker steps it without being sent it
        stepped = (await one.post("/mcp", json=tool(session_id, "step", action={"lookup": "order"}))).json()["result"]
        assert not stepped["isError"] and stepped["data"]["observation"]["episode_id"] == "mcp-shared-1", stepped
        state = (await two.post("/mcp", json=tool(session_id, "state"))).json()["result"]["data"]
        assert state["episode_id"] == "mcp-shared-1" and state["step_count"] == 1
        closed = (await two.post("/mcp", json=rpc("openenv/session/close", {"session_id": session_id}))).json()
        assert closed["result"]["closed"] is True
        gone = (await one.post("/mcp", json=tool(session_id, "state"))).json()
        assert gone["error"]["code"] == -32602 and "Unknown session_id" in gone["error"]["message"]


async def test_the_database_holds_neither_session_ids_nor_their_secrets(settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(settings)) as client:
        session_id = (await _create(client))["result"]["session_id"]
        token = "t" * 40
        reset = (
            await client.post(
                "/mcp",
                json=tool(session_id, "reset", task_id=TASK, seed=1, episode_id="mcp-secret-1", episode_token=token),
            )
        ).json()["result"]
        assert not reset["isError"], reset
    db = settings.database()
    try:
        rows = await db.read(lambda conn: conn.execute(select(mcp_sessions)).all())
    finally:
        await db.dispose()
    [row] = rows
    dumped = repr(tuple(row))
    assert session_id not in dumped and token not in dumped and token.encode().hex() not in dumped
    assert row.episode_id == "mcp-secret-1"


async def test_many_creates_never_evict_another_clients_session(settings: Settings) -> None:
    limited = replace(
        settings, trusted_proxy_hops=1, rate_limit_exempt="", rate_limit_per_s=0, rate_limit_run_token_per_s=0
    )
    async with AsyncTestClient(app=create_app(limited)) as client:
        victim = {"X-Forwarded-For": "192.0.2.10"}
        attacker = {"X-Forwarded-For": "198.51.100.66"}
        session_id = (await _create(client, victim))["result"]["session_id"]
        reset = (await client.post("/mcp", json=tool(session_id, "reset", task_id=TASK, seed=2), headers=victim)).json()
        assert not reset["result"]["isError"]
        created = refused = 0
        for _ in range(4100):  # past the old in-process pool of 4096
            answer = await _create(client, attacker)
            if "error" in answer:
                refused += 1
                assert answer["error"]["code"] == -32029 and "MCP_MAX_SESSIONS_PER_CLIENT" in answer["error"]["message"]
                break
            created += 1
        assert created == limited.mcp_max_sessions_per_client and refused == 1
        step = (
            await client.post(
                "/mcp", json=tool(session_id, "step", action={"decision": "request_info"}), headers=victim
            )
        ).json()
        assert not step["result"]["isError"], step


async def test_idle_sessions_are_swept(settings: Settings) -> None:
    from datetime import timedelta

    async with AsyncTestClient(app=create_app(settings)) as client:
        session_id = (await _create(client))["result"]["session_id"]
        db = settings.database()
        try:
            runs = RunService(db, ttl_s=settings.run_ttl_s)
            assert (await retention_pass(db, runs, settings)).mcp_sessions == 0  # used just now: kept
            later = utcnow() + timedelta(seconds=settings.mcp_session_idle_s + 60)
            assert (await retention_pass(db, runs, settings, now=later)).mcp_sessions == 1
        finally:
            await db.dispose()
        gone = (await client.post("/mcp", json=tool(session_id, "state"))).json()
        assert "Unknown session_id" in gone["error"]["message"]


async def test_mcp_tools_reject_unknown_arguments(client: AsyncTestClient) -> None:
    started = (
        await client.post("/mcp", json=rpc("tools/call", {"name": "reset", "arguments": {"task_id": TASK, "seed": 1}}))
    ).json()
    episode_id = started["result"]["data"]["metadata"]["episode_id"]
    for name, arguments in (
        ("step", {"episode_id": episode_id, "action": {"lookup": "order"}, "run_tokne": "x"}),
        ("state", {"episode_id": episode_id, "verbose": True}),
        ("grade", {"episode_id": episode_id, "episode_tokne": "x"}),
    ):
        result = (await client.post("/mcp", json=rpc("tools/call", {"name": name, "arguments": arguments}))).json()[
            "result"
        ]
        assert result["isError"], result
        detail = result["structuredContent"]["detail"]
        unknown = next(k for k in arguments if k not in ("episode_id", "action"))
        assert unknown in detail and "accepts" in detail, detail
    # nothing was applied by the refused step
    state = (
        await client.post("/mcp", json=rpc("tools/call", {"name": "state", "arguments": {"episode_id": episode_id}}))
    ).json()
    assert state["result"]["data"]["step_count"] == 0
    tools = (await client.post("/mcp", json=rpc("tools/list"))).json()["result"]["tools"]
    assert all(t["inputSchema"].get("additionalProperties") is False for t in tools)


def test_sessions_work_across_two_worker_processes(settings: Settings, tmp_path: Path) -> None:
    """``WORKERS=2``: each request on a new connection may reach either worker; every one is served."""
    server = LiveServer(
        settings,
        tmp_path / "workers.log",
        extra_env={"WORKERS": "2", "LOG_LEVEL": "INFO"},
        command=[sys.executable, "-m", "service.app"],
    )
    try:
        server.wait_for_log(") serving,", 2)  # both workers (service/workers.py logs each one's start)
        failures = []
        for i in range(10):
            session_id = httpx.post(
                server.url + "/mcp", json=rpc("openenv/session/create"), timeout=STALLED_AFTER_S
            ).json()["result"]["session_id"]
            for name, arguments in (
                ("reset", {"task_id": TASK, "seed": i}),
                ("step", {"action": {"lookup": "order"}}),
                ("state", {}),
            ):
                answer = httpx.post(
                    server.url + "/mcp", json=tool(session_id, name, **arguments), timeout=STALLED_AFTER_S
                ).json()
                if "error" in answer or answer["result"]["isError"]:
                    failures.append((i, name, answer))
        assert not failures, failures[:3]
    finally:
        server.stop()
