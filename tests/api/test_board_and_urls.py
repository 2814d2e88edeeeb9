"""Smaller findings of issue 21 (13): the ranked board is paged and cached (before: 5,001 rows came back
whole, 4.65 MB, its HTML rebuilt on every read); a secret seen in a URL is revoked (before: refused but
left valid); episode cookies are ``Secure`` when the client came over HTTPS. The access log is in
tests/system/test_connections.py's neighbour, test_access_log.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import insert

from service import env as core
from service.app import create_app
from service.db.models import runs as runs_table
from service.db.models import utcnow
from service.domain.runs.schemas import BOARD_PAGE_DEFAULT
from service.domain.runs.services import RunService
from service.settings import Settings
from tests.api.test_api_http import assert_problem
from tests.api.test_runs import ALICE_KEY, auth, create_run

Client = AsyncTestClient[Litestar]
RANKED = 600


def _summary(resolved: float) -> dict[str, Any]:
    return {
        "resolved": resolved,
        "resolved_ci95": [max(0.0, resolved - 0.05), min(1.0, resolved + 0.05)],
        "mean": resolved,
        "ci95": [max(0.0, resolved - 0.05), min(1.0, resolved + 0.05)],
        "pass_hat_k": {"1": resolved},
        "per_family": {},
        "per_difficulty": {},
        "per_task": {},
        "episodes": 1,
        "errors": 0,
    }


async def _many_ranked_runs(settings: Settings, n: int) -> None:
    now = utcnow()
    rows = [
        dict(
            id=f"run_{i:016x}",
            token_sha256="0" * 64,
            agent=f"agent {i}",
            model="m",
            split="dev",
            trials=1,
            task_ids=list(core.TASKS),
            full_split=True,
            limit_per_task=None,
            manifest=None,
            episodes_total=1,
            next_index=1,
            episodes_done=1,
            status="complete",
            dataset_version=core.DATASET_VERSION,
            grader_version=core.GRADER_VERSION,
            usage=None,
            summary=_summary(i / n),
            created_at=now,
            updated_at=now,
            finished_at=now,
            submitter=None,
            key_fingerprint=None,
            released=None,
            revision=1,
        )  # fmt: skip
        for i in range(n)
    ]
    db = settings.database()
    try:
        await db.write(lambda c: c.execute(insert(runs_table), rows))
    finally:
        await db.dispose()


async def test_the_board_is_paged_and_a_page_is_built_once_per_version(
    client: Client, settings: Settings, monkeypatch: Any
) -> None:
    await _many_ranked_runs(settings, RANKED)
    built: list[int] = []
    real = RunService.leaderboard_page

    async def counted(self: RunService, split: str, page: int, per_page: int, verified_only: bool = False) -> Any:
        built.append(page)
        return await real(self, split, page, per_page, verified_only)

    monkeypatch.setattr(RunService, "leaderboard_page", counted)
    first = await client.get("/leaderboard", params={"split": "dev"})
    body = first.json()
    assert len(body["rows"]) == BOARD_PAGE_DEFAULT and body["page"]["rows_total"] == RANKED
    assert body["rows"][0]["rank"] == 1 and body["page"]["next_url"].endswith(f"page=2&per_page={BOARD_PAGE_DEFAULT}")
    assert len(first.content) < 100_000, len(first.content)  # a page, not the board
    last = (await client.get("/leaderboard", params={"split": "dev", "page": 12})).json()
    assert len(last["rows"]) == RANKED - 11 * BOARD_PAGE_DEFAULT and last["page"]["next_url"] is None

    html = await client.get("/leaderboard", params={"split": "dev", "format": "html", "page": 2})
    assert html.status_code == 200 and html.text.count('class="run-row"') == BOARD_PAGE_DEFAULT
    assert "Page 2 of 12" in html.text
    again = await client.get("/leaderboard", params={"split": "dev", "format": "html", "page": 2})
    assert again.content == html.content
    assert built == [1, 12, 2], built  # the second read of page 2 was neither read nor rendered again
    cached = await client.get(
        "/leaderboard",
        params={"split": "dev", "format": "html", "page": 2},
        headers={"If-None-Match": html.headers["etag"]},
    )
    assert cached.status_code == 304


async def test_a_run_token_in_a_url_is_refused_and_revoked(client: Client) -> None:
    run = await create_run(client, split="dev", limit_per_task=1)
    leaked = await client.post(f"/runs/{run['run_id']}/next", params={"run_token": run["run_token"]})
    body = assert_problem(leaked, 400, "revoked")
    assert body["revoked"] == [f"the token of run {run['run_id']}"]
    after = await client.post(f"/runs/{run['run_id']}/next", headers=auth(run["run_token"]))
    assert_problem(after, 403, "not the token")  # it no longer works anywhere
    unknown = await client.get("/leaderboard", params={"token": "never-issued"})
    assert assert_problem(unknown, 400, "leaked")["revoked"] == []


async def test_a_submitter_key_and_an_episode_token_in_a_url_are_revoked(settings: Settings) -> None:
    app = create_app(replace(settings, submitter_keys=f"alice:{ALICE_KEY}"))
    async with AsyncTestClient(app=app) as client:
        assert_problem(await client.get("/leaderboard", params={"submitter_key": ALICE_KEY}), 400, "submitter key")
        test_run = await client.post("/runs", json={"agent": "a", "split": "test"}, headers=auth(ALICE_KEY))
        assert_problem(test_run, 403, "revoked")

        token = "t" * 40
        reset = await client.post("/reset", json={"episode_id": "mine", "episode_token": token, "seed": 1})
        assert reset.status_code == 200
        step = {"episode_id": "mine", "action": {"lookup": "policy"}}
        assert (await client.post("/step", json=step, headers={"X-Episode-Token": token})).status_code == 200
        leaked = await client.get("/state", params={"episode_id": "mine", "episode_token": token})
        assert assert_problem(leaked, 400, "revoked")["revoked"] == ["the token of episode 'mine'"]
        for _ in range(2):  # the step path (this worker caches the episode) and a read both refuse it now
            assert (await client.post("/step", json=step, headers={"X-Episode-Token": token})).status_code == 403
            assert (
                await client.get("/state", params={"episode_id": "mine"}, headers={"X-Episode-Token": token})
            ).status_code == 403


def _cookie_flags(resp: Any) -> list[str]:
    return [h for h in resp.headers.get_list("set-cookie") if h.startswith(("ecomm_episode=", "ecomm_episode_token="))]


async def test_episode_cookies_are_secure_over_https(settings: Settings) -> None:
    reset = {"episode_id": "c-1", "seed": 1}
    async with AsyncTestClient(app=create_app(settings), base_url="https://testserver.local") as tls:
        cookies = _cookie_flags(await tls.post("/reset", json=reset))
        assert len(cookies) == 2 and all("Secure" in c for c in cookies), cookies
    async with AsyncTestClient(app=create_app(settings)) as plain:
        cookies = _cookie_flags(await plain.post("/reset", json={**reset, "episode_id": "c-2"}))
        assert cookies and not any("Secure" in c for c in cookies), cookies
        forged = await plain.post("/reset", json={**reset, "episode_id": "c-3"}, headers={"X-Forwarded-Proto": "https"})
        assert not any("Secure" in c for c in _cookie_flags(forged))  # no trusted proxy: the header is anyone's
    proxied = replace(settings, trusted_proxy_hops=1)
    async with AsyncTestClient(app=create_app(proxied)) as behind:
        headers = {"X-Forwarded-For": "203.0.113.5", "X-Forwarded-Proto": "https"}
        cookies = _cookie_flags(await behind.post("/reset", json={**reset, "episode_id": "c-4"}, headers=headers))
        assert cookies and all("Secure" in c for c in cookies), cookies
