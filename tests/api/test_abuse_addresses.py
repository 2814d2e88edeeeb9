"""Who a request comes from, and the WebSocket limits per address (issue 13 audit, items 1, 3 and 7):
no forwarded header makes a request exempt or changes its budget unless the app was told how many
proxies wrote it (TRUSTED_PROXY_HOPS); a WebSocket budget survives reconnects and counts handshakes;
only successful resets and steps keep a socket alive; the last slots are kept for newcomers.

The in-process client's TCP peer is "testclient". With ``trusted_proxy_hops=1`` a test plays a proxy
that appended the client's address to X-Forwarded-For, so each test can speak for several clients.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace

import pytest
from litestar.testing import AsyncTestClient, TestClient

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.app import create_app, uvicorn_options
from service.settings import Settings

TASK = next(t.id for t in core.TASKS.values() if t.family == "workflow")


def behind_proxy(settings: Settings, **changes: object) -> Settings:
    """One trusted proxy in front; no address exempt unless the test says so."""
    return replace(settings, **{"trusted_proxy_hops": 1, "rate_limit_exempt": "", **changes})


def xff(value: str) -> dict[str, str]:
    return {"X-Forwarded-For": value}


async def _codes(client: AsyncTestClient, n: int, headers) -> list[int]:
    return [(await client.get("/tasks", headers=headers(i))).status_code for i in range(n)]


# ------------------------------------------------------------------------------------ item 1


async def test_a_forwarded_header_never_makes_a_request_exempt(settings: Settings) -> None:
    """The peer (a proxy on loopback, or uvicorn having put a forwarded entry in its place) is exempt,
    but a request that carries X-Forwarded-For is someone else's: limited under that address."""
    app = create_app(
        replace(settings, rate_limit_per_s=3, rate_limit_burst=3, rate_limit_exempt="testclient,127.0.0.1")
    )
    _frozen(app)  # no token comes back during the test, however slowly it runs
    async with AsyncTestClient(app=app) as client:
        assert all(c == 200 for c in await _codes(client, 8, lambda i: {}))  # the exempt peer itself
        codes = await _codes(client, 8, lambda i: xff("127.0.0.1, 127.0.0.2"))
        assert 429 in codes and codes.count(200) <= 6, codes  # a burst of 3, then 3 a second


async def test_trusted_hops_take_the_entry_the_proxy_wrote(settings: Settings) -> None:
    app = create_app(behind_proxy(settings, rate_limit_per_s=3, rate_limit_burst=3))
    _frozen(app)  # no token comes back during the test, however slowly it runs
    async with AsyncTestClient(app=app) as client:
        # whatever the client writes left of the proxy's entry changes nothing: one client, one budget
        codes = await _codes(client, 8, lambda i: xff(f"10.0.{i}.1, 198.51.100.7"))
        assert 429 in codes and codes.count(200) <= 6, codes
        # ...nor does claiming loopback (exempt as a peer, never through a header)
        app2 = create_app(behind_proxy(settings, rate_limit_per_s=3, rate_limit_burst=3, rate_limit_exempt="127.0.0.1"))
        _frozen(app2)
        async with AsyncTestClient(app=app2) as client2:
            codes = await _codes(client2, 8, lambda i: xff("127.0.0.1, 127.0.0.1"))
            assert 429 in codes, codes
        # different clients (different entries written by the proxy) have their own budgets
        codes = await _codes(client, 12, lambda i: xff(f"203.0.113.{i}"))
        assert codes == [200] * 12, codes


async def test_get_limits_says_which_address_a_request_counts_against(settings: Settings) -> None:
    app = create_app(behind_proxy(settings, rate_limit_per_s=0))
    async with AsyncTestClient(app=app) as client:
        seen = (await client.get("/limits", headers=xff("127.0.0.1, 2001:db8:5:6::1"))).json()
        assert seen["client_address"] == "2001:db8:5:6::/64" and seen["exempt"] is False
        assert seen["limits"]["rate_limit_heavy_reads_per_min"] == settings.rate_limit_heavy_reads_per_min


def test_client_addresses_resolve_the_right_entry() -> None:
    from service.lib.limits import ClientAddresses

    one = ClientAddresses(1, frozenset({"127.0.0.1"}))
    peer = ("127.0.0.1", 5000)
    assert one.resolve(peer, []).address == "127.0.0.1" and one.resolve(peer, []).exempt
    forged = one.resolve(peer, [(b"x-forwarded-for", b"127.0.0.1")])
    assert forged.address == "127.0.0.1" and not forged.exempt
    assert (
        one.resolve(peer, [(b"x-forwarded-for", b"1.1.1.1, 2.2.2.2"), (b"x-forwarded-for", b"3.3.3.3")]).address
        == "3.3.3.3"
    )
    two = ClientAddresses(2)
    assert two.resolve(peer, [(b"x-forwarded-for", b"6.6.6.6, 5.5.5.5, 4.4.4.4")]).address == "5.5.5.5"
    assert two.resolve(peer, [(b"x-forwarded-for", b"4.4.4.4")]).address == "4.4.4.4"  # fewer entries than hops
    # IPv6 clients count per /64; ports are dropped; hops 0 ignores the header (the peer counts)
    assert one.resolve(peer, [(b"x-forwarded-for", b"2001:db8:1:2::17")]).address == "2001:db8:1:2::/64"
    assert one.resolve(peer, [(b"x-forwarded-for", b"[2001:db8:1:2:ffff::1]:443")]).address == "2001:db8:1:2::/64"
    assert one.resolve(peer, [(b"x-forwarded-for", b"192.0.2.9:8080")]).address == "192.0.2.9"
    zero = ClientAddresses(0, frozenset({"127.0.0.1"}))
    rotated = zero.resolve(("192.0.2.1", 1), [(b"x-forwarded-for", b"10.0.0.1")])
    assert rotated.address == "192.0.2.1" and not rotated.exempt


def test_forwarded_allow_ips_is_refused_and_uvicorn_never_rewrites_the_peer() -> None:
    with pytest.raises(ValueError, match="TRUSTED_PROXY_HOPS"):
        Settings.from_env({"FORWARDED_ALLOW_IPS": "*"})
    assert Settings.from_env({"TRUSTED_PROXY_HOPS": "1"}).trusted_proxy_hops == 1
    assert uvicorn_options(Settings())["proxy_headers"] is False


# ------------------------------------------------------------------------------------ item 3


def _frozen(app, at: float = 1000.0) -> None:
    """Every budget's clock stops at ``at`` (no token comes back during the test)."""
    budgets = app.state.budgets
    for buckets in (budgets.keyed, budgets.tokens, budgets.ceiling):
        buckets.clock = lambda: at


def test_the_ws_budget_survives_reconnects_and_counts_handshakes(settings: Settings) -> None:
    """Each session has its own frame budget, but the address's ceiling counts every handshake and
    frame of all of them: reconnecting refills nothing."""
    app = create_app(behind_proxy(settings, rate_limit_per_s=0, rate_limit_address_per_s=6, rate_limit_burst=3))
    _frozen(app)
    headers = xff("198.51.100.9")
    served = refused = 0
    with TestClient(app) as client:
        for _ in range(6):  # reconnect after every two frames: 3 of the budget per connection
            with client.websocket_connect("/ws", headers=headers) as ws:
                first = None
                for _ in range(2):
                    ws.send_json({"type": "state"})
                    msg = ws.receive_json() if first is None else ws.receive_json()
                    if msg["type"] == "state":
                        served += 1
                    else:
                        refused += 1
                        first = msg
                        break
        # the ceiling holds 6 (twice the burst): the first connection (1 + 2) and the second (1 + 2); then refused
        assert served == 4, (served, refused)
        with client.websocket_connect("/ws", headers=headers) as ws:
            msg = ws.receive_json()  # refused at the handshake, then closed
            assert msg["data"]["code"] == "CAPACITY_REACHED" and msg["data"]["status"] == 429, msg
            assert msg["data"]["retry_after_s"] >= 1
        with client.websocket_connect("/ws", headers=xff("198.51.100.10")) as ws:  # another client is served
            ws.send_json({"type": "state"})
            assert ws.receive_json()["type"] == "state"
        assert app.state.budgets.sweep() == 2  # both addresses' ceilings are spent
        _frozen(app, 1002.0)
        assert app.state.budgets.sweep() == 0  # refilled buckets are forgotten by the sweep


# ------------------------------------------------------------------------------------ item 7


def test_invalid_step_frames_do_not_keep_a_ws_session_alive(settings: Settings) -> None:
    app = create_app(replace(settings, ws_idle_timeout_s=1.0, rate_limit_per_s=0))
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
        assert ws.receive_json()["type"] == "observation"
        reaped = None
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: only the idle reaper ends this loop
        while reaped is None:  # invalid frames, over and over: were they activity, the session would never go
            for junk in (
                {"type": "step"},
                {"type": "step", "data": {"decision": "no-such-decision"}},
                {"type": "reset", "data": {"bogus": 1}},
            ):
                ws.send_json(junk)
                msg = ws.receive_json()
                assert msg["type"] == "error"
                if msg["data"]["code"] == "SESSION_ERROR":
                    reaped = msg
                    break
            assert time.monotonic() < deadline, "invalid frames kept an idle session alive"
            time.sleep(0.1)
        assert "idle" in reaped["data"]["message"], reaped


def test_the_last_slots_are_kept_for_clients_that_hold_none(settings: Settings) -> None:
    # 16 slots: the last 2 (16 // 8) only for newcomers
    app = create_app(
        behind_proxy(
            settings, max_concurrent_envs=16, ws_max_sessions_per_client=8, ws_reserved_sessions=32, rate_limit_per_s=0
        )
    )
    with TestClient(app) as client, contextlib.ExitStack() as stack:

        def open_ws(address: str) -> dict:
            ws = stack.enter_context(client.websocket_connect("/ws", headers=xff(address)))
            ws.send_json({"type": "state"})
            return ws.receive_json()

        assert all(open_ws("192.0.2.1")["type"] == "state" for _ in range(8))
        assert all(open_ws("192.0.2.2")["type"] == "state" for _ in range(6))  # 14 of 16 held
        refused = open_ws("192.0.2.2")
        assert refused["data"]["code"] == "CAPACITY_REACHED" and "WS_RESERVED_SESSIONS" in refused["data"]["message"]
        assert open_ws("192.0.2.3")["type"] == "state"  # a newcomer still gets a slot
        assert open_ws("192.0.2.4")["type"] == "state"
        full = open_ws("192.0.2.5")
        assert full["data"]["code"] == "CAPACITY_REACHED" and "at capacity" in full["data"]["message"]
        assert app.state.ws_sessions.active == 16
