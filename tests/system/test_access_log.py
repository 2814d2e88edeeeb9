"""With ``ACCESS_LOG=true`` no log line holds a query string or an episode id (issue 21, finding 13):
before, a refused ``?run_token=…`` and server-made episode ids (each its own capability) were written to
the log as they came. Against a live ``python -m service.app`` (uvicorn's own log configuration)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from bench.harness import STALLED_AFTER_S
from service.settings import Settings
from tests.conftest import LiveServer


def test_the_access_log_keeps_paths_without_queries_or_episode_ids(settings: Settings, tmp_path: Path) -> None:
    server = LiveServer(
        settings,
        tmp_path / "server.log",
        extra_env={"ACCESS_LOG": "true", "LOG_LEVEL": "INFO"},
        command=[sys.executable, "-m", "service.app"],
    )
    try:
        with httpx.Client(base_url=server.url, timeout=STALLED_AFTER_S) as client:
            episode = client.post("/reset", json={"seed": 1}).json()["metadata"]["episode_id"]  # server-made
            assert client.get("/state", params={"episode_id": episode}).status_code == 200
            assert client.get(f"/episodes/{episode}").status_code == 200
            assert client.get("/reset", params={"run_token": "secret-in-a-url-" + "s" * 24}).status_code == 400
    finally:
        server.stop()
    log = (tmp_path / "server.log").read_text()
    assert '"GET /state HTTP/1.1" 200' in log and '"GET /episodes/… HTTP/1.1" 200' in log, log[-2000:]
    assert episode not in log and "secret-in-a-url" not in log and "?" not in log.split("Uvicorn running")[-1]
