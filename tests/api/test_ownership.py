"""Who may act on an episode (issue 13, findings 1, 2, 7 and 8), on every configured backend.

The model: a client-chosen episode id is paired with a secret (``episode_token``) returned at reset
and required for step, resume, state, grade and the episode view; a server-made id (uuid4) is its
own capability; a WebSocket session owns what it reset; run episodes are guarded by their run's
token, live only while the run is, and live in a namespace (``run_…``) clients cannot use.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient, TestClient
from sqlalchemy import insert, update

from service.app import create_app
from service.db import clock
from service.db.models import episodes as ep_table
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.settings import Settings
from tests.api.test_api_http import assert_problem, two_clients
from tests.api.test_runs import auth, create_run

Client = AsyncTestClient[Litestar]
STEP = {"lookup": "policy"}


def token_header(token: str) -> dict[str, str]:
    return {"X-Episode-Token": token}


async def write(settings: Settings, fn) -> None:
    db = settings.database()
    try:
        await db.write(fn)
    finally:
        await db.dispose()


# ------------------------------------------------------------------ finding 1: run id namespace


async def test_a_client_cannot_create_an_episode_under_a_run_episode_id(client: Client, settings: Settings) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    squatted = f"{run['run_id']}-00000"
    assert_problem(await client.post("/reset", json={"episode_id": squatted}), 422, "run_", "reserved")
    assert_problem(await client.post("/reset", json={"episode_id": "RUN_anything"}), 422, "reserved")
    first = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
    assert first.status_code == 200 and first.json()["metadata"]["episode_id"] == squatted


async def test_a_run_episode_id_already_taken_answers_409_not_500(client: Client, settings: Settings) -> None:
    """A plain episode stored under a run's next id (a database from before the namespace existed)."""
    run = await create_run(client, split="dev", limit_per_task=1)
    squatted = f"{run['run_id']}-00000"
    now = utcnow()
    await write(
        settings,
        lambda conn: conn.execute(
            insert(ep_table).values(
                id=squatted,
                task_id="decision-easy",
                split="dev",
                seed=0,
                ticket_id="t",
                run_id=None,
                status="active",
                step_count=0,
                state={},
                version=1,
                created_at=now,
                updated_at=now,
            )
        ),
    )
    resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
    body = assert_problem(resp, 409, squatted)
    assert body["code"] == "run_episode_id_taken"


# ------------------------------------------------------------------ finding 2: ownership


async def test_a_client_chosen_episode_id_needs_the_token_returned_at_reset(client: Client) -> None:
    reset = await client.post(
        "/reset", json={"episode_id": "my-episode", "task_id": "decision-easy", "seed": 3, "split": "dev"}
    )
    assert reset.status_code == 200, reset.text
    token = reset.json()["metadata"]["episode_token"]
    assert isinstance(token, str) and len(token) >= 32
    step = {"episode_id": "my-episode", "action": STEP}
    client.cookies.clear()  # the reset's cookies stand in for the token (see the cookie test below); not here
    # a stranger who knows the id
    assert_problem(await client.post("/step", json=step), 401, "episode_token", "X-Episode-Token")
    assert_problem(await client.post("/step", json=step, headers=token_header("x" * 43)), 403)
    assert_problem(await client.get("/state", params={"episode_id": "my-episode"}), 401)
    assert_problem(await client.get("/grader", params={"episode_id": "my-episode"}), 401)
    assert_problem(await client.get("/episodes/my-episode"), 401)
    resume = {"episode_id": "my-episode", "resume": True}
    assert_problem(await client.post("/reset", json=resume), 401)
    assert_problem(await client.post("/reset", json={**resume, "episode_token": "y" * 43}), 403)
    # the owner, through each place a token may travel: header, body, Authorization
    assert (await client.post("/step", json=step, headers=token_header(token))).status_code == 200
    assert (await client.post("/step", json={**step, "episode_token": token})).status_code == 200
    assert (await client.post("/step", json=step, headers=auth(token))).status_code == 200
    state = await client.get("/state", params={"episode_id": "my-episode"}, headers=token_header(token))
    assert state.status_code == 200 and state.json()["step_count"] == 3  # the refused steps applied nothing
    assert (await client.post("/reset", json={**resume, "episode_token": token})).status_code == 200
    assert (await client.get("/episodes/my-episode", headers=token_header(token))).status_code == 200


async def test_the_reset_cookies_carry_a_chosen_ids_token_for_that_episode_only(app: Litestar) -> None:
    """Main's HTTP cookie fallback meets ownership: a client that only keeps cookies (seed A's sends
    neither episode ids nor tokens) acts on the chosen-id episode it reset, because that reset also
    set ``ecomm_episode_token``; it stands in for the token only for the episode of the
    ``ecomm_episode`` cookie. Whoever only knows the id, or copies the id cookie, still gets 401."""
    async with two_clients(app) as (owner, stranger):
        reset = await owner.post("/reset", json={"episode_id": "cookie-ep", "task_id": "decision-easy", "seed": 3})
        token = reset.json()["metadata"]["episode_token"]
        assert owner.cookies.get("ecomm_episode") == "cookie-ep" and owner.cookies.get("ecomm_episode_token") == token
        # the owner: cookies only, the action at the top level, no id, no token
        assert (await owner.post("/step", json={"lookup": "policy"})).status_code == 200
        assert (await owner.post("/step", json={"episode_id": "cookie-ep", "action": STEP})).status_code == 200
        assert (await owner.get("/state")).json()["step_count"] == 2
        assert (await owner.get("/state", params={"episode_id": "cookie-ep"})).json()["step_count"] == 2
        assert (await owner.get("/episodes/cookie-ep")).status_code == 200
        assert (await owner.post("/reset", json={"episode_id": "cookie-ep", "resume": True})).status_code == 200
        # a stranger who knows the id, or copies the id cookie alone
        assert_problem(await stranger.post("/step", json={"episode_id": "cookie-ep", "action": STEP}), 401)
        assert_problem(await stranger.get("/state", params={"episode_id": "cookie-ep"}), 401)
        stranger.cookies.set("ecomm_episode", "cookie-ep")
        assert_problem(await stranger.post("/step", json={"lookup": "policy"}), 401)
        assert_problem(await stranger.get("/grader"), 401)
        # the stranger's own chosen id: the owner's token cookie is not offered for it (401, not a wrong-token 403)
        stranger.cookies.clear()
        assert (
            await stranger.post("/reset", json={"episode_id": "their-ep", "task_id": "decision-easy"})
        ).status_code == 200
        assert_problem(await owner.post("/step", json={"episode_id": "their-ep", "action": STEP}), 401)
        assert (await stranger.post("/step", json={"action": STEP})).status_code == 200
        # an explicit token still wins over the cookie
        assert_problem(await owner.post("/step", json={"action": STEP}, headers=token_header("w" * 43)), 403)
        # a reset with a server-made id clears the token cookie: it never outlives its episode
        await owner.post("/reset", json={"task_id": "decision-easy"})
        assert owner.cookies.get("ecomm_episode") != "cookie-ep" and owner.cookies.get("ecomm_episode_token") is None
        assert (await owner.post("/step", json={"lookup": "policy"})).status_code == 200
        assert_problem(await owner.get("/state", params={"episode_id": "cookie-ep"}), 401)  # now the token is needed


async def test_a_taken_episode_id_answers_409_without_inviting_a_resume(client: Client) -> None:
    first = await client.post("/reset", json={"episode_id": "shared-name", "task_id": "decision-easy", "seed": 1})
    assert first.status_code == 200
    body = assert_problem(await client.post("/reset", json={"episode_id": "shared-name"}), 409, "omit episode_id")
    assert "resume" not in body["detail"].lower()
    assert "episode_token" not in body


async def test_a_server_made_episode_id_is_its_own_capability(client: Client) -> None:
    reset = (await client.post("/reset", json={"task_id": "decision-easy", "seed": 2})).json()
    episode_id = reset["metadata"]["episode_id"]
    assert len(episode_id) == 32 and "episode_token" not in reset["metadata"]  # 128 random bits
    assert (await client.post("/step", json={"episode_id": episode_id, "action": STEP})).status_code == 200
    assert (await client.get("/state", params={"episode_id": episode_id})).json()["step_count"] == 1


def test_a_websocket_session_owns_what_it_reset(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"episode_id": "ws-owned", "task_id": "decision-easy", "seed": 5}})
            reset = ws.receive_json()
            assert reset["type"] == "observation", reset
            token = reset["data"]["metadata"]["episode_token"]
            ws.send_json({"type": "step", "data": STEP})  # the session steps what it reset, no token sent
            assert ws.receive_json()["type"] == "observation"
            ws.send_json({"type": "state"})
            assert ws.receive_json()["data"]["step_count"] == 1
        with client.websocket_connect("/ws") as ws:  # someone else, knowing the id
            ws.send_json({"type": "reset", "data": {"episode_id": "ws-owned", "resume": True}})
            refused = ws.receive_json()
            assert refused["type"] == "error" and refused["data"]["status"] == 401, refused
            ws.send_json({"type": "step", "data": STEP})
            assert ws.receive_json()["type"] == "error"  # still no episode in this session
            ws.send_json({"type": "reset", "data": {"episode_id": "ws-owned", "resume": True, "episode_token": token}})
            assert ws.receive_json()["type"] == "observation"
            ws.send_json({"type": "step", "data": STEP})
            assert ws.receive_json()["data"]["metadata"]["step_count"] == 2
        assert client.post("/step", json={"episode_id": "ws-owned", "action": STEP}).status_code == 401
        mcp = client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "step", "arguments": {"episode_id": "ws-owned", "action": STEP}},
            },
        )
        assert mcp.json()["result"]["isError"] is True and mcp.json()["result"]["structuredContent"]["status"] == 401
        mcp = client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "step",
                    "arguments": {"episode_id": "ws-owned", "action": STEP, "episode_token": token},
                },
            },
        )
        assert mcp.json()["result"]["isError"] is False


# ------------------------------------------------------------------ finding 7: run TTL on step


async def test_an_idle_run_past_its_ttl_can_neither_step_nor_resume(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service's clock moves only when the test moves it: the run is idle past its TTL exactly when the
    # test says, never sooner on a slow machine.
    now = [time.monotonic()]
    monkeypatch.setattr(clock, "PROCESS_CLOCK", clock.SteadyClock(monotonic=lambda: now[0]))
    short = replace(settings, run_ttl_s=1.0)
    async with AsyncTestClient(app=create_app(short)) as client:
        run = await create_run(client, split="dev", limit_per_task=1)
        first = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
        episode_id = first["metadata"]["episode_id"]
        step = {"episode_id": episode_id, "action": STEP}
        assert (await client.post("/step", json=step, headers=auth(run["run_token"]))).status_code == 200
        now[0] += 1.2  # idle past the TTL; nobody reads the run meanwhile
        body = assert_problem(
            await client.post("/step", json=step, headers=auth(run["run_token"])), 409, "expired", "POST /runs"
        )
        assert body["run_status"] == "expired"
        resume = {"episode_id": episode_id, "resume": True, "run_token": run["run_token"]}
        assert_problem(await client.post("/reset", json=resume), 409, "expired")
        assert (await client.get(f"/runs/{run['run_id']}")).json()["episodes_done"] == 0  # never finished
    async with AsyncTestClient(app=create_app(short)) as fresh:  # another worker, which never cached it
        assert_problem(await fresh.post("/step", json=step, headers=auth(run["run_token"])), 409, "expired")


async def test_an_active_run_within_its_ttl_still_steps(client: Client, settings: Settings) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    first = (await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))).json()
    step = {"episode_id": first["metadata"]["episode_id"], "action": STEP}
    # the run row itself is old, but its episode moved a moment ago: still live
    long_ago = utcnow() - timedelta(seconds=settings.run_ttl_s * 2)
    await write(
        settings,
        lambda conn: conn.execute(
            update(runs_table).where(runs_table.c.id == run["run_id"]).values(updated_at=long_ago)
        ),
    )
    assert (await client.post("/step", json=step, headers=auth(run["run_token"]))).status_code == 200


# ------------------------------------------------------------------ finding 8: no tokens in URLs


async def test_tokens_in_the_query_string_are_refused(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    resp = await client.get("/reset", params={"run_id": run["run_id"], "run_token": run["run_token"]})
    assert_problem(resp, 400, "Authorization", "never in the URL")
    resp = await client.get("/state", params={"episode_id": "x", "episode_token": "secret"})
    assert_problem(resp, 400, "X-Episode-Token")
    resp = await client.post(f"/runs/{run['run_id']}/next", params={"run_token": run["run_token"]})
    assert_problem(resp, 400, "never in the URL")
    # the token was seen in a URL: it is revoked (test_board_and_urls.py); another run's, in its header, works
    refused = await client.get("/reset", params={"run_id": run["run_id"]}, headers=auth(run["run_token"]))
    assert refused.status_code == 403, refused.text
    other = await create_run(client, split="dev", limit_per_task=1)
    ok = await client.get("/reset", params={"run_id": other["run_id"]}, headers=auth(other["run_token"]))
    assert ok.status_code == 200, ok.text


async def test_a_client_may_bring_its_own_episode_token_to_resume_after_a_lost_response(client: Client) -> None:
    mine = "my-own-secret-".ljust(40, "z")
    args = {"episode_id": "lost-response", "episode_token": mine, "task_id": "decision-easy", "seed": 4}
    assert_problem(await client.post("/reset", json={**args, "episode_token": "short"}), 422, "at least 32")
    assert (await client.post("/reset", json=args)).status_code == 200  # say its response never arrived
    client.cookies.clear()  # nor the cookies it set
    resumed = await client.post("/reset", json={"episode_id": "lost-response", "resume": True, "episode_token": mine})
    assert resumed.status_code == 200 and resumed.json()["metadata"]["resumed"] is True
    assert resumed.cookies.get("ecomm_episode_token") == mine  # a cookie-keeping client may go on without it
    client.cookies.clear()  # one that keeps no cookies sends the token every time
    assert_problem(await client.post("/step", json={"episode_id": "lost-response", "action": STEP}), 401)
