"""Two workers on one database (issue 21, finding 8): a worker's episode cache is never the source of
truth for who owns an episode id. After retention deletes an episode and someone else resets the same
chosen id, the old token steps nothing through a worker that still caches the old episode, and the new
owner is served by that worker as by any other. Two apps on one database stand in for two workers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from service.app import create_app
from service.db import retention
from service.db.models import utcnow
from service.settings import Settings

Client = AsyncTestClient[Litestar]
OLD, NEW = "old-owner-token-" + "o" * 24, "new-owner-token-" + "n" * 24
EPISODE = "reused-id"
LOOKUP = {"lookup": "policy"}


def as_owner(token: str) -> dict[str, str]:
    return {"X-Episode-Token": token}


@asynccontextmanager
async def two_workers(settings: Settings) -> AsyncIterator[tuple[Client, Client]]:
    async with AsyncTestClient(app=create_app(settings)) as a, AsyncTestClient(app=create_app(settings)) as b:
        yield a, b


async def purge_everything_unfinished(settings: Settings) -> None:
    """What retention does to an episode idle past RETAIN_UNFINISHED_EPISODES_S (here: every unfinished one)."""
    db = settings.database()
    try:
        purged = await retention.purge(
            db,
            unfinished_before=utcnow() + timedelta(days=1),
            finished_before=None,
            expired_runs_before=utcnow() - timedelta(days=1),
        )
        assert purged.unfinished_episodes >= 1
    finally:
        await db.dispose()


async def reset(client: Client, token: str) -> None:
    resp = await client.post(
        "/reset", json={"episode_id": EPISODE, "episode_token": token, "task_id": "decision-easy", "seed": 4}
    )
    assert resp.status_code == 200, resp.text


async def step_count(client: Client, token: str) -> int:
    resp = await client.get("/state", params={"episode_id": EPISODE}, headers=as_owner(token))
    assert resp.status_code == 200, resp.text
    return int(resp.json()["step_count"])


@pytest.mark.parametrize("cached_steps", [0, 1], ids=["cache-at-the-new-rows-step-count", "cache-ahead"])
@pytest.mark.parametrize("request_id", [None, "r-1"], ids=["no-request-id", "request-id"])
async def test_an_old_token_never_steps_the_next_owner_of_a_reused_id(
    settings: Settings, cached_steps: int, request_id: str | None
) -> None:
    async with two_workers(settings) as (a, b):
        await reset(a, OLD)  # worker a caches the old owner's episode
        for i in range(cached_steps):
            body = {"episode_id": EPISODE, "action": LOOKUP, "request_id": f"old-{i}"}
            assert (await a.post("/step", json=body, headers=as_owner(OLD))).status_code == 200
        await purge_everything_unfinished(settings)
        await reset(b, NEW)  # the id is free again: someone else takes it through worker b

        body = {"episode_id": EPISODE, "action": LOOKUP, **({"request_id": request_id} if request_id else {})}
        stale = await a.post("/step", json=body, headers=as_owner(OLD))
        assert stale.status_code == 403, stale.text  # the id is the new owner's now
        assert await step_count(b, NEW) == 0  # nothing was applied to the new owner's episode

        # the new owner is served by the worker with the stale copy as by any other
        mine = await a.post("/step", json=body, headers=as_owner(NEW))
        assert mine.status_code == 200, mine.text
        assert mine.json()["metadata"]["step_index"] == 1
        assert await step_count(b, NEW) == 1
        assert (await a.post("/step", json=body, headers=as_owner(OLD))).status_code == 403


async def test_a_stale_cache_serves_the_new_owners_grade_and_refuses_the_old_token(settings: Settings) -> None:
    finish = {"decision": "reject", "reply": "Sorry, we cannot help with this one.", "close_ticket": True}
    async with two_workers(settings) as (a, b):
        await reset(a, OLD)
        assert (await a.post("/step", json={"episode_id": EPISODE, "action": LOOKUP}, headers=as_owner(OLD))).is_success
        await purge_everything_unfinished(settings)
        await reset(b, NEW)
        for _ in range(10):
            done = await b.post("/step", json={"episode_id": EPISODE, "action": finish}, headers=as_owner(NEW))
            assert done.status_code == 200, done.text
            if done.json()["done"]:
                break
        graded = await a.get("/grader", params={"episode_id": EPISODE}, headers=as_owner(NEW))
        assert graded.status_code == 200, graded.text
        assert (
            graded.json()["step_count"]
            == (await b.get("/grader", params={"episode_id": EPISODE}, headers=as_owner(NEW))).json()["step_count"]
        )
        assert (await a.get("/grader", params={"episode_id": EPISODE}, headers=as_owner(OLD))).status_code == 403
        late = await a.post("/step", json={"episode_id": EPISODE, "action": LOOKUP}, headers=as_owner(OLD))
        assert late.status_code == 403, late.text
