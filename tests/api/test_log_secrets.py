"""Logs at INFO carry no capability (issue 21, finding 13 and its follow-up): a server-made episode id is
what lets its holder read an episode, an episode token or a run token what lets it act. The WebSocket
reaper logged the reaped session's episode id at INFO; no line of an ordinary session — HTTP resets and
steps, a WebSocket session reaped for idling, a run and its episodes — names one now."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from litestar.testing import TestClient

from service.app import create_app
from service.settings import Settings
from tests.api.test_ws_protocol import TASK, error


def test_no_episode_id_or_token_reaches_an_info_log(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    secrets: list[str] = []
    app = create_app(replace(settings, ws_idle_timeout_s=0.3))
    service = logging.getLogger("service")
    service.addHandler(caplog.handler)  # Litestar's logging config replaces the root's handlers
    level = service.level
    service.setLevel(logging.INFO)
    try:
        _session(app, secrets)
    finally:
        service.removeHandler(caplog.handler)
        service.setLevel(level)
    assert any("reaped" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    leaked = [(r.levelname, r.getMessage()) for r in caplog.records for s in secrets if s in r.getMessage()]
    assert not leaked, leaked


def _session(app, secrets: list[str]) -> None:  # type: ignore[no-untyped-def]
    """What an ordinary client does; every capability it is handed goes into ``secrets``."""
    with TestClient(app) as client:
        meta = client.post("/reset", json={"task_id": TASK, "seed": 3}).json()["metadata"]  # a server-made id
        secrets.append(meta["episode_id"])
        client.post("/step", json={"episode_id": meta["episode_id"], "action": {"lookup": "order"}})
        chosen = client.post("/reset", json={"episode_id": "my-own-id-1", "task_id": TASK}).json()["metadata"]
        secrets.append(chosen["episode_token"])  # a client-chosen id's token
        run = client.post("/runs", json={"agent": "a", "model": "", "split": "dev", "limit_per_task": 1}).json()
        secrets.append(run["run_token"])
        handed = client.post(f"/runs/{run['run_id']}/next", headers={"Authorization": f"Bearer {run['run_token']}"})
        assert handed.status_code == 200
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"task_id": TASK, "seed": 1}})
            started = ws.receive_json()["data"]["metadata"]
            secrets.append(started["episode_id"])
            error(ws, "SESSION_ERROR")  # reaped for idling: the line that named the episode
