"""A stored final step is answered as stored, even if the run's summary cannot be written right then.

The step that finishes a run's last episode commits first; the run summary is computed after it. A
database fault in that second part must not turn the committed step into a 503/507: a WebSocket client
(no request_id to replay) would then get "episode finished" on its retry and lose its final
observation. The summary is left to the run sweep, which summarises complete runs that have none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from litestar.testing import AsyncTestClient, TestClient

from service import env as core
from service.app import create_app
from service.db import run_store
from service.db.errors import DatabaseFull
from service.domain.runs import services as runs_module
from service.settings import Settings
from tests.waiting import until_async

ONE_TASK = next(iter(core.TASKS))
CLOSE = {"close_ticket": True}  # ends the episode in one step


def _summary_fails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run's episodes cannot be read for its summary (the disk filled, say): a fault after the step committed."""
    calls: list[str] = []

    async def full(_db: Any, run_id: str, *_a: Any, **_k: Any) -> Any:
        calls.append(run_id)
        raise DatabaseFull("injected: the disk is full")

    monkeypatch.setattr(runs_module.run_store, "run_episodes", full)
    return calls


async def _summarised(db, run_id: str) -> bool:
    return (await run_store.get_run(db, run_id)).summary is not None


async def _summarised_by_the_sweep(settings: Settings, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the fault over, the app's run sweep (every 0.1 s here) stores the summary; checked through a
    Database of the test's own (the app's connections belong to its event loop)."""
    monkeypatch.undo()
    db = settings.database()
    try:
        await until_async(
            lambda: _summarised(db, run_id), "the run sweep summarised the run once the fault was over", poll_s=0.1
        )
    finally:
        await db.dispose()


async def test_an_http_final_step_is_answered_when_the_summary_fails(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(settings, run_sweep_interval_s=0.1)
    app = create_app(settings)
    async with AsyncTestClient(app=app) as client:
        resp = await client.post("/runs", json={"agent": "closer", "task_ids": [ONE_TASK], "limit_per_task": 1})
        assert resp.status_code == 201, resp.text
        run = resp.json()
        auth = {"Authorization": f"Bearer {run['run_token']}"}
        episode = (await client.post(f"/runs/{run['run_id']}/next", headers=auth)).json()["metadata"]["episode_id"]
        calls = _summary_fails(monkeypatch)
        step = await client.post("/step", json={"episode_id": episode, "action": CLOSE}, headers=auth)
        assert calls, "the fault was not injected: the run was not completed by this step"
        assert step.status_code == 200, f"the stored final step was answered {step.status_code}: {step.text[:300]}"
        assert step.json()["done"] is True and step.json()["metadata"]["step_index"] == 1
        await _summarised_by_the_sweep(settings, run["run_id"], monkeypatch)


def test_a_websocket_final_step_gets_its_observation_when_the_summary_fails(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(settings)
    with TestClient(app) as client:
        resp = client.post("/runs", json={"agent": "closer", "task_ids": [ONE_TASK], "limit_per_task": 1})
        assert resp.status_code == 201, resp.text
        run = resp.json()
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {"run_id": run["run_id"], "run_token": run["run_token"]}})
            assert ws.receive_json()["type"] == "observation"
            calls = _summary_fails(monkeypatch)
            ws.send_json({"type": "step", "data": CLOSE})
            frame = ws.receive_json()
            assert calls, "the fault was not injected"
            assert frame["type"] == "observation" and frame["data"]["done"] is True, (
                f"the final observation was lost: {frame}"
            )
