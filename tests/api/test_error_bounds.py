"""Errors stay small (issue 21, finding 10): a request with thousands of mistakes gets a few of them by
name, "and N more", and the accepted fields once — never an answer that grows with the request. Before
the fix a 59 kB body of unknown fields got 1.3 MB back from /reset, 2.0 MB from /step and 3.2 MB from
/mcp (every field named, each with the whole accepted list)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient

from service.app import create_app
from service.lib.problems import MAX_LISTED_ERRORS
from service.settings import Settings

Client = AsyncTestClient[Litestar]
BOUND = 4096  # bytes: the largest answer any of these requests may get
JSON = {"content-type": "application/json"}


def invented(n: int, width: int = 5) -> dict[str, int]:
    return {f"k{i:0{width}d}": 0 for i in range(n)}


def assert_bounded(raw: bytes, what: str) -> Any:
    assert len(raw) <= BOUND, f"{what}: {len(raw)} bytes"
    return json.loads(raw)


def assert_counts_the_rest(errors: list[dict[str, Any]], key: str = "field") -> None:
    assert len(errors) == MAX_LISTED_ERRORS + 1, errors
    assert errors[-1][key] == "…" and "more" in errors[-1]["message"], errors


async def test_unknown_fields_by_the_thousand_get_a_small_answer(client: Client) -> None:
    body = json.dumps(invented(4500))  # 58.5 kB, under MAX_BODY_BYTES
    reset = assert_bounded((await client.post("/reset", content=body, headers=JSON)).content, "/reset")
    assert reset["status"] == 422
    assert_counts_the_rest(reset["errors"], key="key")
    assert "k00000" in reset["detail"] and "4495 more" in reset["detail"]
    assert reset["detail"].count("run_token") == 1  # the accepted fields, once

    step = assert_bounded((await client.post("/step", content=body, headers=JSON)).content, "/step")
    assert step["status"] == 422 and "4495 more" in step["detail"]

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reset", "arguments": invented(4500)}}
    mcp = assert_bounded((await client.post("/mcp", json=call)).content, "/mcp")
    result = mcp["result"]
    assert result["isError"] is True and "4495 more" in result["structuredContent"]["detail"]


async def test_every_surface_bounds_its_errors(client: Client, settings: Settings) -> None:
    episode = (await client.post("/reset", json={"task_id": "decision-easy", "seed": 1})).json()["metadata"]
    action = {"episode_id": episode["episode_id"], "action": invented(4400)}
    answer = assert_bounded((await client.post("/step", json=action)).content, "action fields")
    assert answer["status"] == 422 and "more" in answer["detail"]

    query = "&".join(f"k{i:04d}=1" for i in range(3000))
    for path in ("/reset", "/state"):
        answer = assert_bounded((await client.get(f"{path}?{query}")).content, f"{path} query")
        assert answer["status"] == 422 and "2995 more" in answer["detail"]

    run = {"agent": "a", "model": "m", "split": "dev", **invented(4400)}
    answer = assert_bounded((await client.post("/runs", json=run)).content, "/runs")
    assert answer["status"] == 422 and "more" in answer["detail"]

    long_keys = {"episode_id": "e", **{"y" * 200 + f"{i:04d}": 0 for i in range(250)}}
    answer = assert_bounded((await client.post("/reset", json=long_keys)).content, "long keys")
    assert all(len(e["key"]) <= 64 for e in answer["errors"])

    mcp = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x" * 50_000, "arguments": {}}}
    assert_bounded((await client.post("/mcp", json=mcp)).content, "unknown tool name")


@pytest.mark.parametrize("frame", [{"type": "reset", "data": invented(4000)}, {"type": "x" * 50_000}])
def test_websocket_errors_are_bounded(settings: Settings, frame: dict[str, Any]) -> None:
    with TestClient(create_app(settings)) as client, client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps(frame))
        raw = ws.receive_text()
        assert len(raw) <= BOUND, len(raw)
        assert json.loads(raw)["type"] == "error"


async def test_a_few_mistakes_are_still_all_named(client: Client) -> None:
    answer = (await client.post("/reset", json={"sed": 1, "taks_id": "x"})).json()
    assert [e["key"] for e in answer["errors"]] == ["sed", "taks_id"]
    assert "unknown field 'sed'" in answer["detail"] and "this body accepts" in answer["detail"]
