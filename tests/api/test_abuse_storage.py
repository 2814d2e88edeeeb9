"""Storage per client address (issue 13 audit, item 8): one address cannot fill the database with
plain episodes — at most MAX_ACTIVE_EPISODES_PER_CLIENT unfinished at once and
MAX_EPISODES_PER_CLIENT_PER_DAY started in 24 hours, over HTTP, WebSocket and MCP alike; exempt
(local) clients are not counted. Agent names are compared after NFKC with format characters refused."""

from __future__ import annotations

from dataclasses import replace

from litestar.testing import AsyncTestClient, TestClient

from service.app import create_app
from service.db.names import name_key
from service.settings import Settings
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import ALICE_KEY, auth

TASK = "decision-easy"


def capped(settings: Settings, **changes: object) -> Settings:
    return replace(
        settings,
        **{
            "trusted_proxy_hops": 1,
            "rate_limit_exempt": "",
            "rate_limit_per_s": 0,
            "max_active_episodes_per_client": 3,
            "max_episodes_per_client_per_day": 5,
            **changes,
        },
    )


async def _reset(client: AsyncTestClient, address: str):
    return await client.post("/reset", json={"task_id": TASK, "seed": 1}, headers={"X-Forwarded-For": address})


async def test_a_client_address_holds_a_bounded_number_of_plain_episodes(settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(capped(settings))) as client:
        a = "198.51.100.1"
        ids = [(await _reset(client, a)).json()["metadata"]["episode_id"] for _ in range(3)]
        problem = assert_problem(await _reset(client, a), 429, "MAX_ACTIVE_EPISODES_PER_CLIENT")
        assert problem["active"] == 3
        assert (await _reset(client, "198.51.100.2")).status_code == 200  # another address has its own share
        done = await client.post("/step", json={"episode_id": ids[0], "action": {"decision": "reject"}})
        assert done.json()["done"] is True  # a finished episode frees an unfinished slot...
        assert (await _reset(client, a)).status_code == 200
        for episode_id in ids[1:]:
            await client.post("/step", json={"episode_id": episode_id, "action": {"decision": "reject"}})
        assert (await _reset(client, a)).status_code == 200  # 5 started today
        resp = await _reset(client, a)
        assert_problem(resp, 429, "MAX_EPISODES_PER_CLIENT_PER_DAY")  # ...but not the daily share
        assert int(resp.headers["retry-after"]) >= 1
        # MCP resets count against the same address
        mcp = await client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "reset", "arguments": {"task_id": TASK}},
            },
            headers={"X-Forwarded-For": a},
        )
        result = mcp.json()["result"]
        assert result["isError"] and "MAX_EPISODES_PER_CLIENT_PER_DAY" in result["structuredContent"]["detail"]


def test_websocket_resets_count_too_and_exempt_clients_are_not_counted(settings: Settings) -> None:
    app = create_app(capped(settings, max_active_episodes_per_client=2, rate_limit_exempt="testclient"))
    with TestClient(app) as client:
        with client.websocket_connect("/ws", headers={"X-Forwarded-For": "203.0.113.5"}) as ws:
            answers = []
            for _ in range(3):
                ws.send_json({"type": "reset", "data": {"task_id": TASK}})
                answers.append(ws.receive_json())
            assert [m["type"] for m in answers] == ["observation", "observation", "error"], answers
            assert (
                answers[2]["data"]["status"] == 429
                and "MAX_ACTIVE_EPISODES_PER_CLIENT" in answers[2]["data"]["message"]
            )
        for _ in range(4):  # the local, exempt peer (no forwarded header) is not capped
            assert client.post("/reset", json={"task_id": TASK}).status_code == 200


async def test_agent_names_are_compared_after_nfkc_and_refuse_format_characters(settings: Settings) -> None:
    app = create_app(replace(settings, submitter_keys=f"alice:{ALICE_KEY}"))
    async with AsyncTestClient(app=app) as client:
        body = {"split": "dev", "task_ids": [TASK], "limit_per_task": 1}
        assert (await client.post("/runs", json={**body, "agent": "Acme"}, headers=auth(ALICE_KEY))).status_code == 201
        for lookalike in ("Ａｃｍｅ", "ＡＣＭＥ", "ａcme "):
            assert_problem(
                await client.post("/runs", json={**body, "agent": lookalike}), 409, "belongs to submitter 'alice'"
            )
        for hidden in ("Acme\u200b", "\u202eemcA", "Ac\u00adme", "Acme\u2060", "Acme\n"):
            resp = await client.post("/runs", json={**body, "agent": hidden})
            assert_problem(resp, 422, "agent")
        resp = await client.post("/runs", json={**body, "agent": "ok", "model": "gpt\u200b"})
        assert_problem(resp, 422, "model")
        assert (
            await client.post("/runs", json={**body, "agent": "ｶﾀｶﾅ-agent"})
        ).status_code == 201  # NFKC text is fine
        assert_problem(
            await client.post("/runs", json={**body, "agent": "\u337f" * 40}), 422, "NFKC"
        )  # 160 once normalised


def test_revision_0007_rekeys_bound_agent_names_after_nfkc(tmp_path) -> None:
    """A name bound before 0007 under its old key ("ａｃｍｅ", casefolded only) is found under the new one."""
    from datetime import UTC, datetime

    from alembic import command
    from sqlalchemy import create_engine, text

    from service.db.migrate import alembic_config

    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0006")
            now = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
            for key, who, when in (
                ("ａｃｍｅ", "alice", now),
                ("acme\u200b", "mallory", "2026-02-01T00:00:00+00:00"),
                ("beta", "bob", now),
            ):
                conn.execute(
                    text("INSERT INTO agent_names (name_key, submitter, created_at) VALUES (:k, :s, :c)"),
                    {"k": key, "s": who, "c": when},
                )
            command.upgrade(cfg, "head")
            rows = dict(conn.execute(text("SELECT name_key, submitter FROM agent_names")).all())
    finally:
        engine.dispose()
    # the older binding wins; its look-alike is dropped (keys are Unicode skeletons since 0010)
    assert rows == {name_key("acme"): "alice", name_key("beta"): "bob"}
