"""Quotas and rate limits (issue 13, finding 5 and the limits it asks for): 429 problems with
Retry-After per client address and per run token, a per-client WebSocket session cap, an idle timer
only reset/step keep alive, WS frame rates, and uvicorn refusing an oversized frame before reading it.

The in-process client's address is "testclient"; conftest exempts it like loopback, so every test
here clears ``rate_limit_exempt`` first.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient, TestClient

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app, uvicorn_options
from service.settings import Settings
from tests.conftest import LiveServer

TASK = next(t.id for t in core.TASKS.values() if t.family == "workflow")


def limited(settings: Settings, **changes: object) -> Settings:
    return replace(settings, rate_limit_exempt="", **changes)


def assert_429(resp) -> None:
    assert resp.status_code == 429, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert int(resp.headers["retry-after"]) >= 1
    body = resp.json()
    assert body["status"] == 429 and body["retry_after_s"] >= 1 and "Retry-After" in body["detail"], body


async def _burst(client: AsyncTestClient, n: int, **kwargs: object) -> list:
    return [await client.get("/tasks", **kwargs) for _ in range(n)]


def frozen(app, at: float = 1000.0) -> None:
    """Every budget's clock stops at ``at``: no token comes back until the test moves it."""
    budgets = app.state.budgets
    for buckets in (budgets.keyed, budgets.tokens, budgets.ceiling):
        buckets.clock = lambda: at


async def test_per_address_limit_answers_429_with_retry_after(settings: Settings) -> None:
    app = create_app(limited(settings, rate_limit_per_s=3, rate_limit_burst=3, rate_limit_run_token_per_s=0))
    frozen(app)
    async with AsyncTestClient(app=app) as client:
        codes = [r.status_code for r in await _burst(client, 5)]
        assert codes == [200, 200, 200, 429, 429], codes  # a burst of 3, and nothing comes back meanwhile
        refused = (await _burst(client, 1))[0]
        assert_429(refused)
        assert refused.json()["limit"] == "RATE_LIMIT_PER_S" and "this client address" in refused.json()["detail"]
        # liveness probes are never limited
        assert all(r.status_code == 200 for r in [await client.get("/health") for _ in range(10)])
        frozen(app, 1000.4)  # 0.4 s at 3 a second: one request's worth
        assert [r.status_code for r in await _burst(client, 2)] == [200, 429]


async def test_expired_counters_are_swept(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that never returns does not stay in memory: refilled budgets and Litestar's expired
    per-minute counters (its store only expires keys it reads) are swept."""
    from service.lib import limits

    monkeypatch.setattr(limits, "SWEEP_EVERY_S", 0.3)
    app = create_app(limited(settings, rate_limit_per_s=5, rate_limit_burst=5))
    frozen(app)  # no token comes back until the clock moves, however slowly this runs
    budgets = app.state.budgets
    async with AsyncTestClient(app=app) as client:
        await client.get("/tasks")
        assert budgets.sweep() >= 1  # the address's own budget: not yet refilled
        await client.get("/leaderboard")  # a heavy read: counted per minute in Litestar's store too
        store = app.stores.get(limits.RATE_LIMIT_STORE)
        assert len(store._store) == 1
        frozen(app, 1060.0)  # a minute later: every budget has refilled
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the wait ends when the sweep has run
        while any(b._buckets for b in (budgets.keyed, budgets.tokens, budgets.ceiling)):
            assert time.monotonic() < deadline, "the background sweep (every 0.3 s here) never forgot the budgets"
            await asyncio.sleep(0.05)


async def test_exempt_addresses_are_not_limited(settings: Settings) -> None:
    app = create_app(replace(settings, rate_limit_per_s=2, rate_limit_burst=2, rate_limit_exempt="testclient"))
    async with AsyncTestClient(app=app) as client:
        assert all(r.status_code == 200 for r in await _burst(client, 10))


async def test_per_run_token_limit(settings: Settings) -> None:
    only_tokens = {"rate_limit_per_s": 0, "rate_limit_address_per_s": 0}
    app = create_app(limited(settings, rate_limit_run_token_per_s=3, rate_limit_burst=3, **only_tokens))
    frozen(app)
    async with AsyncTestClient(app=app) as client:
        codes = [r.status_code for r in await _burst(client, 5, headers={"Authorization": "Bearer tok-a"})]
        assert codes == [200, 200, 200, 429, 429], codes
        refused = (await _burst(client, 1, headers={"Authorization": "Bearer tok-a"}))[0]
        assert refused.json()["limit"] == "RATE_LIMIT_RUN_TOKEN_PER_S"
        # another token, and requests without one, have their own budget
        assert (await client.get("/tasks", headers={"Authorization": "Bearer tok-b"})).status_code == 200
        assert all(r.status_code == 200 for r in await _burst(client, 6))


async def test_requests_count_against_the_episode_they_act_on(settings: Settings) -> None:
    """A trainer's environments share one address: each episode has its own budget (named in the
    body, the query or the cookie), resets and reads without one count against the address."""
    app = create_app(limited(settings, rate_limit_per_s=2, rate_limit_burst=2, rate_limit_address_per_s=0))
    frozen(app)
    async with AsyncTestClient(app=app) as client:
        ids = []
        for seed in range(2):  # the address's own budget: two resets
            reset = await client.post("/reset", json={"task_id": TASK, "seed": seed, "split": "train"})
            assert reset.status_code == 200, reset.text
            ids.append(reset.json()["metadata"]["episode_id"])
        assert_429(await client.post("/reset", json={"task_id": TASK, "seed": 9, "split": "train"}))
        for episode_id in ids:  # each episode: two requests, however it is named
            step = await client.post("/step", json={"episode_id": episode_id, "action": {"lookup": "order"}})
            assert step.status_code == 200, step.text
            assert (await client.get("/state", params={"episode_id": episode_id})).status_code == 200
            refused = await client.post("/step", json={"episode_id": episode_id, "action": {"lookup": "policy"}})
            assert_429(refused)
            assert "this episode" in refused.json()["detail"]


async def test_the_address_ceiling_bounds_every_credential_it_holds(settings: Settings) -> None:
    app = create_app(
        limited(
            settings,
            rate_limit_per_s=100,
            rate_limit_run_token_per_s=100,
            rate_limit_address_per_s=4,
            rate_limit_burst=2,
        )
    )
    frozen(app)
    async with AsyncTestClient(app=app) as client:
        # the ceiling holds twice the burst: four requests, each with a fresh token of its own
        codes = [(await client.get("/tasks", headers={"Authorization": f"Bearer t{i}"})).status_code for i in range(5)]
        assert codes == [200, 200, 200, 200, 429], codes
        refused = await client.get("/tasks", headers={"Authorization": "Bearer t9"})
        assert_429(refused)
        assert refused.json()["limit"] == "RATE_LIMIT_ADDRESS_PER_S"


def test_token_buckets_refill_at_their_rate_up_to_their_burst() -> None:
    from service.lib.limits import TokenBuckets

    now = [0.0]
    buckets = TokenBuckets(rate=2, burst=3, clock=lambda: now[0])
    for _ in range(3):
        assert buckets.wait("k") == 0
        buckets.take("k")
    assert buckets.wait("k") == pytest.approx(0.5)  # one token comes back every half second
    now[0] = 10.0
    assert buckets.wait("k") == 0 and buckets.sweep() == 0  # refilled to the burst, and forgotten
    assert TokenBuckets(rate=0, burst=1).wait("k") == 0  # rate 0: no limit


def test_one_client_cannot_take_every_ws_slot(settings: Settings) -> None:
    app = create_app(limited(settings, max_concurrent_envs=8, ws_max_sessions_per_client=2, rate_limit_per_s=0))
    with TestClient(app) as client, client.websocket_connect("/ws") as a, client.websocket_connect("/ws") as b:
        for ws in (a, b):
            ws.send_json({"type": "state"})
            assert ws.receive_json()["type"] == "state"
        with client.websocket_connect("/ws") as c:
            msg = c.receive_json()
            assert msg["data"]["code"] == "CAPACITY_REACHED" and msg["data"]["max_sessions"] == 2, msg
            assert "WS_MAX_SESSIONS_PER_CLIENT" in msg["data"]["message"]
        assert app.state.ws_sessions.active == 2


IDLE_S = 3.0


def test_only_reset_and_step_keep_a_ws_session_alive(settings: Settings) -> None:
    """State frames sent every IDLE_S / 30 (far more often than IDLE_S) never keep a session
    alive: it is reaped all the same, saying why. Steps sent every IDLE_S / 6 do, for longer than
    IDLE_S. Neither half measures how long anything took: the first waits for the reaper's frame
    (were state frames activity, it would never come), the second fails only if a single step's
    round trip took over IDLE_S * 5 / 6."""
    app = create_app(limited(settings, ws_idle_timeout_s=IDLE_S, rate_limit_per_s=0, rate_limit_address_per_s=0))
    with TestClient(app) as client:
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
            assert ws.receive_json()["type"] == "observation"
            deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: only the reaper ends this loop
            while True:
                ws.send_json({"type": "state"})
                msg = ws.receive_json()
                if msg["type"] == "error":
                    break
                assert time.monotonic() < deadline, "state frames kept an idle session alive"
                time.sleep(IDLE_S / 30)  # ten times as often as the timeout
            assert msg["data"]["code"] == "SESSION_ERROR" and "no reset or step" in msg["data"]["message"], msg
        with client.websocket_connect("/ws") as ws:  # steps do keep it alive
            ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
            ws.receive_json()
            for _ in range(8):  # 8 * IDLE_S / 6 in all (a workflow episode takes 10 steps)
                time.sleep(IDLE_S / 6)
                ws.send_json({"type": "step", "data": {"lookup": "policy"}})
                assert ws.receive_json()["type"] == "observation"


def test_ws_frames_are_rate_limited_per_session(settings: Settings) -> None:
    app = create_app(limited(settings, rate_limit_per_s=3, rate_limit_burst=3, rate_limit_address_per_s=0))
    frozen(app)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        replies = []
        for _ in range(5):
            ws.send_json({"type": "state"})
            replies.append(ws.receive_json())
        assert [m["type"] for m in replies] == ["state"] * 3 + ["error"] * 2, replies
        limited_replies = replies[3:]
        assert all(m["data"]["status"] == 429 and m["data"]["retry_after_s"] >= 1 for m in limited_replies)
        assert limited_replies[0]["data"]["code"] == "EXECUTION_ERROR"  # non-fatal: the session stays
        with client.websocket_connect("/ws") as other:  # another session has a budget of its own
            other.send_json({"type": "state"})
            assert other.receive_json()["type"] == "state"
        frozen(app, 1001.0)
        ws.send_json({"type": "state"})
        assert ws.receive_json()["type"] == "state"


def test_uvicorn_refuses_a_frame_over_the_body_limit_before_reading_it(settings: Settings, tmp_path: Path) -> None:
    assert uvicorn_options(settings)["ws_max_size"] <= settings.max_body_bytes + 1024
    pytest.importorskip("websockets")
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    if settings.database_url.startswith("postgresql"):
        pytest.skip("transport-level check; one backend is enough")
    import sys

    server = LiveServer(settings, tmp_path / "server.log", command=[sys.executable, "-m", "service.app"])
    try:
        # (the timeouts are safety nets against a hang, not budgets)
        with connect(f"ws://127.0.0.1:{server.port}/ws", max_size=None, open_timeout=STALLED_AFTER_S) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                ws.send("x" * (15 * 1024 * 1024))
                ws.recv(timeout=STALLED_AFTER_S)
            # 1009 (message too big), or the TCP connection dropped while we were still writing: either way the
            # server refused it; without ws_max_size it would read all 15 MB and answer a VALIDATION_ERROR frame
            assert closed.value.rcvd is None or closed.value.rcvd.code == 1009, closed.value
        with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=STALLED_AFTER_S) as ws:  # the server is fine
            ws.send('{"type": "state"}')
            assert '"state"' in ws.recv(timeout=STALLED_AFTER_S)
    finally:
        server.stop()
