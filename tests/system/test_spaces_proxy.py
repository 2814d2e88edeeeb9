"""The image behind a Hugging Face Space's proxy counts visitors, not the proxy (issue 21, finding 11).

Every request to a Space arrives from the platform's proxy, which appends the visitor's address to
X-Forwarded-For. The image used to leave TRUSTED_PROXY_HOPS at 0, so every visitor was the proxy's one
address: one visitor's 64 resets answered everyone 429, 32 WebSockets everyone CAPACITY_REACHED. The
container settings come from the Dockerfile's ENV plus SPACE_ID (what the platform sets); the in-process
client plays the proxy (its TCP peer, "testclient", is the proxy's address) and writes the visitors'
addresses as the proxy does."""

from __future__ import annotations

import logging
from pathlib import Path

from litestar.testing import TestClient

from server.app import container_settings
from service.app import create_app
from tests.system.test_docker_start import ROOT, env_of, instructions

VISITOR_A, VISITOR_B = "203.0.113.10", "198.51.100.20"


def image_environment(tmp_path: Path, **more: str) -> dict[str, str]:
    env = env_of(instructions(ROOT / "Dockerfile"))
    env.update(
        DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'space.db'}",
        RATE_LIMIT_PER_S="0",
        RATE_LIMIT_EXEMPT="",
        MAX_ACTIVE_EPISODES_PER_CLIENT="2",
        WS_MAX_SESSIONS_PER_CLIENT="2",
        BASELINE_SEEDS_PER_TASK="1",
        **more,
    )
    return env


def through_the_proxy(visitor: str) -> dict[str, str]:
    return {"X-Forwarded-For": visitor}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_on_a_space_each_visitor_has_its_own_budget(tmp_path: Path) -> None:
    settings, _ = container_settings(image_environment(tmp_path, SPACE_ID="someone/ecomm-support-env"))
    assert settings.trusted_proxy_hops == 1
    with TestClient(create_app(settings)) as client:
        for _ in range(2):
            assert client.post("/reset", json={}, headers=through_the_proxy(VISITOR_A)).status_code == 200
        assert client.post("/reset", json={}, headers=through_the_proxy(VISITOR_A)).status_code == 429
        assert client.post("/reset", json={}, headers=through_the_proxy(VISITOR_B)).status_code == 200

        with (
            client.websocket_connect("/ws", headers=through_the_proxy(VISITOR_A)) as first,
            client.websocket_connect("/ws", headers=through_the_proxy(VISITOR_A)) as second,
        ):
            for ws in (first, second):
                ws.send_json({"type": "state"})
                assert ws.receive_json()["type"] == "state"
            with client.websocket_connect("/ws", headers=through_the_proxy(VISITOR_A)) as third:
                assert third.receive_json()["data"]["code"] == "CAPACITY_REACHED"
            with client.websocket_connect("/ws", headers=through_the_proxy(VISITOR_B)) as other:
                other.send_json({"type": "state"})
                assert other.receive_json()["type"] == "state"  # another visitor is served

        seen = client.get("/limits", headers=through_the_proxy(f"10.9.9.9, {VISITOR_B}")).json()
        assert seen["client_address"] == VISITOR_B
        assert seen["proxy"] == {
            "trusted_proxy_hops": 1,
            "forwarded_for_entries": 2,
            "counted": "X-Forwarded-For entry 1 from the right (written by the outermost proxy)",
        }
        said = Lines()
        logging.getLogger("service.limits").addHandler(said)
        try:
            client.get("/limits")  # a request that did not come through the proxy: said once in the log
            client.get("/limits")
        finally:
            logging.getLogger("service.limits").removeHandler(said)
        assert sum("TRUSTED_PROXY_HOPS=1 but a request" in line for line in said.lines) == 1


def test_off_a_space_the_image_counts_the_tcp_peer(tmp_path: Path) -> None:
    settings, _ = container_settings(image_environment(tmp_path))  # from_docker_image, docker run: no SPACE_ID
    assert settings.trusted_proxy_hops == 0
    chosen, _ = container_settings(image_environment(tmp_path, SPACE_ID="a/b", TRUSTED_PROXY_HOPS="2"))
    assert chosen.trusted_proxy_hops == 2  # an explicit setting wins
    with TestClient(create_app(settings)) as client:
        for visitor in (VISITOR_A, VISITOR_B):  # a header anyone can write changes nothing
            assert client.post("/reset", json={}, headers=through_the_proxy(visitor)).status_code == 200
        assert client.post("/reset", json={}, headers=through_the_proxy("192.0.2.77")).status_code == 429
