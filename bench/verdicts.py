"""What the board says and what faults do to verdicts (issue #21), measured on the code on the path.

    .venv/bin/python -m bench.verdicts                          # this checkout, JSON on stdout
    (cd /path/to/a/checkout/of/main && /work/wt-board/.venv/bin/python -m bench.verdicts)   # before

In process (the app with a fresh SQLite file per scenario, nothing listens on a port), each scenario as
a submitter or an operator would meet it:

- ``revocation``: a test run is started, two episodes played, the submitter revoked, the rest played;
- ``key_change``: a test run under one TEST_SPLIT_KEY, an episode in progress, a restart with another key;
- ``crash``: runs A then B (both close every ticket at once); the process "dies" while A completes
  (A complete, unsummarised), then B completes; which of the two the Ladder released;
- ``step_counts``: a heuristic test run, then what an anonymous reader learns from per-episode step counts
  (decision tickets whose count says the agent had to ask the customer, against the truth);
- ``rounding``: 0.645 as the run page's published rounding and as the Ladder release it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from service import env as core
from service import stats
from service.app import create_app
from service.db import run_store
from service.env.agents import HeuristicAgent
from service.env.policy import evaluate
from service.settings import Settings

KEY = "sk_alice_" + "a" * 40
BEARER = {"Authorization": f"Bearer {KEY}"}


def _settings(folder: Path, key: str = "k" * 40) -> Settings:
    return Settings(
        database_url=f"sqlite+aiosqlite:///{folder / 'bench.db'}",
        submitter_keys=f"alice:{KEY}",
        test_run_quota=50,
        test_split_key=key,
        rate_limit_exempt="127.0.0.1,::1,testclient",
    )


class _Closer:
    def act(self, obs: core.Observation) -> core.Action:
        return core.Action(close_ticket=True)


async def _play(client: Any, run: dict, agent: type = _Closer, stop_after: int | None = None) -> list[int]:
    """Play the run's episodes; returns the status code of every step (stops at the first refusal)."""
    codes, played, auth = [], 0, {"Authorization": f"Bearer {run['run_token']}"}
    while stop_after is None or played < stop_after:
        resp = await client.post(f"/runs/{run['run_id']}/next", headers=auth)
        if resp.status_code != 200:
            codes.append(resp.status_code)
            return codes
        body, player = resp.json(), agent()
        while not body["done"]:
            fields = core.Observation.model_fields
            obs = core.Observation.model_validate({k: v for k, v in body["observation"].items() if k in fields})
            step = await client.post(
                "/step",
                json={
                    "episode_id": body["metadata"]["episode_id"],
                    "action": player.act(obs).model_dump(exclude_defaults=True),
                },
                headers=auth,
            )
            codes.append(step.status_code)
            if step.status_code != 200:
                return codes
            body = step.json()
        played += 1
    return codes


async def _run(client: Any, agent: str) -> dict:
    resp = await client.post("/runs", json={"agent": agent, "split": "test"}, headers=BEARER)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def _revoke(db: Any) -> None:
    await run_store.revoke_submitter(db, "alice")


async def revocation(folder: Path) -> dict[str, Any]:
    app = create_app(_settings(folder))
    async with AsyncTestClient(app=app) as client:
        run = await _run(client, "closer")
        await _play(client, run, stop_after=2)
        await _revoke(app.state.episodes.db)
        codes = await _play(client, run)
        view = (await client.get(f"/runs/{run['run_id']}")).json()
        board = (await client.get("/leaderboard", params={"split": "test"})).json()
    return {
        "after_revoke_first_code": codes[0] if codes else None,
        "steps_accepted_after_revoke": sum(c == 200 for c in codes),
        "status": view["status"],
        "released": (view.get("ladder") or {}).get("released"),
        "ranked_rows": len(board["rows"]),
    }


async def key_change(folder: Path) -> dict[str, Any]:
    async with AsyncTestClient(app=create_app(_settings(folder, "a" * 40))) as client:
        run = await _run(client, "closer")
        await _play(client, run, stop_after=2)
        auth = {"Authorization": f"Bearer {run['run_token']}"}
        started = (await client.post(f"/runs/{run['run_id']}/next", headers=auth)).json()["metadata"]["episode_id"]
    async with AsyncTestClient(app=create_app(_settings(folder, "b" * 40))) as client:
        step = await client.post("/step", json={"episode_id": started, "action": {"lookup": "order"}}, headers=auth)
        resume = await client.post("/reset", json={"episode_id": started, "resume": True}, headers=auth)
        rest = await _play(client, run)
        view = (await client.get(f"/runs/{run['run_id']}")).json()
    return {
        "step_in_progress": step.status_code,
        "resume_in_progress": resume.status_code,
        "next_under_new_key": rest[0] if rest else None,
        "steps_accepted_under_new_key": sum(c == 200 for c in rest),
        "status": view["status"],
        "released": (view.get("ladder") or {}).get("released"),
    }


async def crash(folder: Path, die: bool) -> dict[str, Any]:
    app = create_app(_settings(folder))
    runs_service = app.state.episodes.runs
    async with AsyncTestClient(app=app) as client:
        a = await _run(client, "closer-a")
        if die:
            real = type(runs_service).finish_if_complete

            async def died(self: Any, run_id: str) -> str:
                return "complete"

            type(runs_service).finish_if_complete = died
            try:
                await _play(client, a)
            finally:
                type(runs_service).finish_if_complete = real
        else:
            await _play(client, a)
        b = await _run(client, "closer-b")
        await _play(client, b)
        await runs_service.sweep()
        views = [(await client.get(f"/runs/{r['run_id']}")).json() for r in (a, b)]
    return {name: (v.get("ladder") or {}).get("released") for name, v in zip("AB", views, strict=True)}


async def step_counts(folder: Path) -> dict[str, Any]:
    app = create_app(_settings(folder))
    async with AsyncTestClient(app=app) as client:
        run = await _run(client, "heuristic")
        await _play(client, run, agent=HeuristicAgent)
        rows: list[dict] = []
        for page in (1, 2):
            body = (await client.get(f"/runs/{run['run_id']}", params={"page": page, "per_page": 200})).json()
            rows += body.get("episodes") or []
        dataset = app.state.episodes.dataset
    decision = [r for r in rows if core.TASKS[r["task_id"]].family == "decision"]
    # the heuristic looks up the order and the customer, then decides: a fourth step is a question
    said_asked = {(r["task_id"], r["seed"]) for r in decision if r["step_count"] >= 4}
    truth = set()
    for task_id, task in core.TASKS.items():
        if task.family == "decision":
            pool = dataset.pool("test", task.family, task.difficulty)
            truth |= {
                (task_id, k) for k, tid in enumerate(pool) if evaluate(dataset.ticket(tid)).gold == "request_info"
            }
    return {
        "decision_episodes_listed_to_anyone": len(decision),
        "needed_asking_per_the_labels": len(truth),
        "step_counts_that_say_so": len(truth & said_asked),
    }


def rounding() -> dict[str, Any]:
    page = stats.published({"resolved": 0.645})["resolved"] if hasattr(stats, "published") else stats.rounded(0.645, 2)
    return {"page": page, "ladder": stats.ladder(0.645, None)}


async def main_async() -> dict[str, Any]:
    out: dict[str, Any] = {"code": "branch" if "noise" in inspect.signature(stats.ladder).parameters else "before"}
    for name, scenario in (("revocation", revocation), ("key_change", key_change), ("step_counts", step_counts)):
        with tempfile.TemporaryDirectory() as folder:
            try:
                out[name] = await scenario(Path(folder))
            except Exception as exc:  # noqa: BLE001 - a scenario that breaks is itself the finding: report it
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    for die in (False, True):
        with tempfile.TemporaryDirectory() as folder:
            out[f"crash_{'died' if die else 'clean'}"] = await crash(Path(folder), die)
    out["rounding"] = rounding()
    return out


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(asyncio.run(main_async()), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
