"""Run pages strangers can ask for (issue 13 audit, item 4): a conditional read, or a read of a page
already sent unchanged, builds nothing (the ETag comes from a cheap version read first); any change
to the page moves it; pages are at most 200 entries; the heavy reads have their own, lower limit."""

from __future__ import annotations

from dataclasses import replace

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from service.app import create_app
from service.domain.runs.services import RunService
from service.settings import Settings
from tests.api.test_runs import auth, create_run

Client = AsyncTestClient[Litestar]
TASK = "decision-easy"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every time a run page is built from the database (RunService.detail)."""
    calls: list[tuple[str, int, int]] = []
    original = RunService.detail

    async def counted(self: RunService, run_id: str, page: int = 1, per_page: int = 200, token: str | None = None):
        calls.append((run_id, page, per_page))
        return await original(self, run_id, page, per_page, token)

    monkeypatch.setattr(RunService, "detail", counted)
    return calls


async def test_unchanged_pages_are_not_built_again(client: Client, builds: list) -> None:
    run = await create_run(client, split="dev", task_ids=[TASK], trials=2)
    url = f"/runs/{run['run_id']}"
    started = await client.post(f"{url}/next", headers=auth(run["run_token"]))
    episode_id = started.json()["metadata"]["episode_id"]
    first = await client.get(url)
    etag = first.headers["etag"]
    assert len(builds) == 1
    for _ in range(3):
        assert (await client.get(url, headers={"If-None-Match": etag})).status_code == 304
        again = await client.get(url)
        assert again.content == first.content and again.headers["etag"] == etag
    assert len(builds) == 1, builds  # neither 304s nor repeated reads built the page again
    html = await client.get(url, params={"format": "html"})
    assert html.headers["etag"] != etag and html.headers["content-type"].startswith("text/html")
    assert (
        await client.get(url, params={"format": "html"}, headers={"If-None-Match": html.headers["etag"]})
    ).status_code == 304
    assert len(builds) == 2  # one build per representation

    # a step on one of the page's episodes changes the page: a new ETag, built once
    await client.post(
        "/step", json={"episode_id": episode_id, "action": {"lookup": "order"}}, headers=auth(run["run_token"])
    )
    moved = await client.get(url, headers={"If-None-Match": etag})
    assert moved.status_code == 200 and moved.headers["etag"] != etag
    assert next(e for e in moved.json()["episodes"] if e["episode_id"] == episode_id)["step_count"] == 1
    # so does handing out an episode, and reported usage
    etag = moved.headers["etag"]
    await client.post(f"{url}/next", headers=auth(run["run_token"]))
    assert (await client.get(url, headers={"If-None-Match": etag})).status_code == 200
    etag = (await client.get(url)).headers["etag"]
    await client.post(f"{url}/usage", json={"prompt_tokens": 1, "completion_tokens": 1}, headers=auth(run["run_token"]))
    after_usage = await client.get(url, headers={"If-None-Match": etag})
    assert after_usage.status_code == 200 and after_usage.json()["usage"]["prompt_tokens"] == 1
    # another page of the same run has its own ETag; an unknown run is still a 404 problem
    assert (await client.get(url, params={"page": 2, "per_page": 1})).headers["etag"] != after_usage.headers["etag"]
    assert (await client.get("/runs/run_0000000000000000")).status_code == 404


async def test_a_run_page_holds_at_most_200_entries(client: Client) -> None:
    run = await create_run(client, split="dev", trials=1)
    assert run["episodes_total"] > 200
    for asked in (201, 1000):  # what older clients (inference.py) ask for: served as 200, the page says so
        page = (await client.get(f"/runs/{run['run_id']}", params={"per_page": asked})).json()
        assert len(page["episodes"]) == 200 and page["page"]["per_page"] == 200
        assert page["page"]["pages"] == -(-run["episodes_total"] // 200) and "per_page=200" in page["page"]["next_url"]
    assert (await client.get(f"/runs/{run['run_id']}", params={"per_page": 1001})).status_code == 422


async def test_heavy_reads_have_their_own_lower_limit(settings: Settings) -> None:
    app = create_app(
        replace(
            settings,
            rate_limit_exempt="",
            rate_limit_per_s=0,
            rate_limit_run_token_per_s=0,
            rate_limit_heavy_reads_per_min=3,
            rate_limit_trajectories_per_min=1,
        )
    )
    async with AsyncTestClient(app=app) as client:
        for _ in range(2):  # a minute's window may end mid-burst: then the next burst falls inside one
            codes = []
            for _ in range(5):
                codes.append((await client.get("/leaderboard")).status_code)
            if 429 in codes and codes.count(200) <= 3:
                break
        assert 429 in codes and codes.count(200) <= 3, codes
        for _ in range(6):  # light reads: not this limit
            assert (await client.get("/tasks")).status_code == 200
        run = await create_run(client, split="dev", task_ids=[TASK], limit_per_task=1)
        url = f"/runs/{run['run_id']}/trajectories.jsonl"
        first = await client.get(url, headers=auth(run["run_token"]))
        second = await client.get(url, headers=auth(run["run_token"]))
        # the first read passes the limit (and is refused only because the run is still in progress: 409); the
        # second, inside the same minute, is over it
        assert first.status_code == 409 and second.status_code == 429, (first.status_code, second.status_code)
        assert int(second.headers["retry-after"]) >= 1
