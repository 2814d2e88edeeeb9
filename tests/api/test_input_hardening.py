"""Hostile input (issue 13, findings 6 and 9): every surface decodes JSON the same way, text with NUL or a
lone surrogate never reaches the database (a 422 problem, or the protocol's own error shape), unknown
fields on reset/step are named, integers are strict, and internal errors never show class names.

Runs on every configured backend: PostgreSQL rejects NUL in text columns, SQLite stores it, so a
SQLite-only run would miss half of these.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from service import env as core
from service.app import create_app
from service.domain.episodes.schemas import ResetParams, StepRequest
from service.lib.decoding import OPENENV_TOLERATED_STEP_FIELDS
from service.settings import Settings

Client = AsyncTestClient[Litestar]
PROBLEM = "application/problem+json"
TASK = next(t.id for t in core.TASKS.values() if t.family == "workflow")
NUL = "a\u0000b"
# A lone surrogate cannot be written by json.dumps(ensure_ascii=False); as an escape it is valid JSON text.
SURROGATE_ESCAPE = "\\ud800"


def raw(body: str) -> bytes:
    return body.encode()


def assert_422_naming(resp: Any, field: str) -> dict[str, Any]:
    assert resp.status_code == 422, (resp.status_code, resp.text[:400])
    assert resp.headers["content-type"].startswith(PROBLEM)
    body = resp.json()
    assert body["status"] == 422 and field in body["detail"], body
    return body


HTTP_BAD_TEXT = [
    ("/reset", '{"episode_id": "%s"}', "episode_id"),
    ("/reset", '{"task_id": "%s"}', "task_id"),
    ("/step", '{"episode_id": "ok-1", "action": {"reply": "%s"}}', "action.reply"),
    ("/step", '{"episode_id": "ok-1", "action": {"lookup": "policy"}, "request_id": "%s"}', "request_id"),
    ("/step", '{"episode_id": "ok-1", "action": {"lookup": "policy"}, "run_token": "%s"}', "run_token"),
    ("/runs", '{"agent": "%s", "split": "dev", "limit_per_task": 1}', "agent"),
    ("/runs", '{"agent": "a", "model": "%s", "split": "dev", "limit_per_task": 1}', "model"),
]


@pytest.mark.parametrize(
    "bad", ["\\u0000", "x\\u0000", SURROGATE_ESCAPE, "\\udfff tail"], ids=["nul", "nul-tail", "high", "low"]
)
@pytest.mark.parametrize(("path", "template", "field"), HTTP_BAD_TEXT, ids=[f"{p}:{f}" for p, _, f in HTTP_BAD_TEXT])
async def test_http_text_with_nul_or_lone_surrogate_is_a_422_naming_the_field(
    client: Client, path: str, template: str, field: str, bad: str
) -> None:
    assert (await client.post("/reset", json={"episode_id": "ok-1", "task_id": TASK, "seed": 1})).status_code == 200
    resp = await client.post(path, content=raw(template % bad), headers={"content-type": "application/json"})
    body = assert_422_naming(resp, field)
    assert body["errors"][0]["field"] == field, body
    # nothing was stored under the bad text, and the service still works
    assert (await client.post("/step", json={"episode_id": "ok-1", "action": {"lookup": "policy"}})).status_code == 200


async def test_a_bad_object_key_is_rejected_too(client: Client) -> None:
    resp = await client.post("/reset", content=raw('{"x\\u0000": 1}'), headers={"content-type": "application/json"})
    assert_422_naming(resp, "x\\u0000")


@pytest.mark.parametrize("query", ["episode_id=%00", "episode_id=a%00b", "episode_id=%ED%A0%80"])
async def test_query_and_path_text_is_checked(client: Client, query: str) -> None:
    for path in ("/state", "/grader"):
        resp = await client.get(f"{path}?{query}")
        assert resp.status_code in (404, 422), (path, resp.status_code, resp.text)
        if "%00" in query:
            assert_422_naming(resp, "episode_id")
    assert (await client.get("/episodes/a%00b")).status_code == 422
    assert (await client.get("/runs/a%00b")).status_code == 422
    assert (await client.get("/reset?episode_id=a%00b")).status_code == 422


@pytest.mark.parametrize("bad", ["\\u0000", SURROGATE_ESCAPE])
@pytest.mark.parametrize("where", ["episode_id", "request_id", "run_token", "reply"])
async def test_mcp_bad_text_is_a_jsonrpc_error_never_a_500(client: Client, where: str, bad: str) -> None:
    args = {
        "episode_id": '{"episode_id": "%s", "action": {"lookup": "policy"}}',
        "request_id": '{"episode_id": "m-1", "action": {"lookup": "policy"}, "request_id": "%s"}',
        "run_token": '{"episode_id": "m-1", "action": {"lookup": "policy"}, "run_token": "%s"}',
        "reply": '{"episode_id": "m-1", "action": {"reply": "%s"}}',
    }[where] % bad
    assert (await client.post("/reset", json={"episode_id": "m-1", "task_id": TASK, "seed": 1})).status_code == 200
    body = f'{{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {{"name": "step", "arguments": {args}}}}}'
    resp = await client.post("/mcp", content=raw(body), headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
    assert where in json.dumps(answer["error"]["data"]), answer


async def test_mcp_surrogate_in_reset_episode_id(client: Client) -> None:
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        '"params": {"name": "reset", "arguments": {"episode_id": "\\ud800"}}}'
    )
    resp = await client.post("/mcp", content=raw(body), headers={"content-type": "application/json"})
    assert resp.status_code == 200 and resp.json()["error"]["code"] == -32602, resp.text


@pytest.mark.parametrize("bad", ["\\u0000", SURROGATE_ESCAPE])
async def test_ws_bad_text_is_a_validation_error_and_the_session_survives(settings: Settings, bad: str) -> None:
    frames = [
        f'{{"type": "reset", "data": {{"episode_id": "w{bad}"}}}}',
        f'{{"type": "step", "data": {{"reply": "{bad}"}}}}',
        '{"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
        f'{{"name": "state", "arguments": {{"episode_id": "{bad}"}}}}}}}}',
    ]
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"episode_id": "ws-ok", "task_id": TASK, "seed": 2}})
        assert ws.receive_json()["type"] == "observation"
        for frame in frames:
            ws.send_text(frame)
            msg = ws.receive_json()  # the frame's decoder refuses it, whatever its type
            assert msg["type"] == "error" and msg["data"]["code"] == "VALIDATION_ERROR", msg
            assert msg["data"]["errors"][0]["field"].startswith("data."), msg
        ws.send_json({"type": "step", "data": {"lookup": "policy"}})
        assert ws.receive_json()["type"] == "observation"


# ---- unknown fields, strict types ----


async def test_unknown_reset_and_step_fields_are_named(client: Client) -> None:
    resp = await client.post("/reset", json={"episode_id": "u-1", "run_tokne": "x"})
    body = assert_422_naming(resp, "run_tokne")
    assert "run_token" in body["detail"]  # says what is accepted
    assert (await client.post("/reset", json={"episode_id": "u-1", "task_id": TASK, "seed": 1})).status_code == 200
    resp = await client.post("/step", json={"episode_id": "u-1", "action": {"lookup": "policy"}, "reqest_id": "r"})
    assert_422_naming(resp, "reqest_id")


async def test_fields_openenv_clients_send_are_accepted(client: Client) -> None:
    assert (await client.post("/reset", json={"episode_id": "c-1", "seed": 1, "task_id": TASK})).status_code == 200
    body = {
        "episode_id": "c-1",
        "action": {"lookup": "policy"},
        "timeout_s": 30.0,
        "request_id": "r-1",
        **{k: False for k in OPENENV_TOLERATED_STEP_FIELDS},
    }
    resp = await client.post("/step", json=body)
    assert resp.status_code == 200, resp.text


async def test_top_level_action_fields_are_accepted_and_typos_still_named(client: Client) -> None:
    """Main's seed A form (the action's fields at the top level of the step body, no episode_id: the reset
    cookie names the episode) passes the closed-body check; an unknown field beside them is still named."""
    assert (await client.post("/reset", json={"task_id": "decision-easy", "seed": 1})).status_code == 200
    resp = await client.post("/step", json={"action_type": "request_info", "reply": "Could you send a photo?"})
    assert resp.status_code == 200, resp.text
    resp = await client.post("/step", json={"lookup": "order", "render": False})
    assert resp.status_code == 200, resp.text
    body = assert_422_naming(await client.post("/step", json={"action_type": "reject", "run_tokne": "x"}), "run_tokne")
    assert [e["key"] for e in body["errors"]] == ["run_tokne"] and "unknown field 'run_tokne'" in body["detail"]
    assert "action_type" in body["detail"]  # the accepted fields are listed
    assert_422_naming(await client.post("/step", json={"decison": "reject"}), "decison")
    # top-level action fields are validated as the action is
    assert_422_naming(await client.post("/step", json={"action_type": "refund_please"}), "action_type")
    assert (await client.post("/step", json={"action_type": "reject"})).json()["done"] is True


def test_the_allowlists_are_written_down_once() -> None:
    assert {"render", "verbose"} <= OPENENV_TOLERATED_STEP_FIELDS
    assert set(StepRequest.accepted_fields()) >= {
        "action",
        "episode_id",
        "request_id",
        "timeout_s",
        "run_token",
        "render",
    }
    assert set(StepRequest.accepted_fields()) >= {"action_type", *core.ACTION_FIELDS}  # seed A's top-level action
    assert set(ResetParams.accepted_fields()) >= {"seed", "episode_id", "task_id", "run_token", "resume"}


@pytest.mark.parametrize("seed", [True, False, "5", 5.0, 1.5])
async def test_seed_must_be_a_json_integer(client: Client, seed: Any) -> None:
    assert_422_naming(await client.post("/reset", json={"seed": seed}), "seed")


async def test_ws_reset_rejects_unknown_kwargs_and_bool_seed(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        for data in ({"seed": True}, {"sed": 1}):
            ws.send_json({"type": "reset", "data": data})
            msg = ws.receive_json()
            assert msg["data"]["code"] == "VALIDATION_ERROR", msg
            assert any(next(iter(data)) in e["field"] for e in msg["data"]["errors"]), msg


async def test_ws_internal_error_does_not_show_the_exception_class(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(settings)

    async def broken(*_: Any, **__: Any) -> Any:
        raise ZeroDivisionError("secret internals")

    monkeypatch.setattr(app.state.episodes, "state", broken)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
        ws.receive_json()
        ws.send_json({"type": "state"})
        msg = ws.receive_json()
        assert msg["data"]["code"] == "EXECUTION_ERROR", msg
        assert "ZeroDivision" not in msg["data"]["message"] and "secret" not in msg["data"]["message"], msg
        ws.send_json({"type": "step", "data": {"lookup": "policy"}})
        assert ws.receive_json()["type"] == "observation"
