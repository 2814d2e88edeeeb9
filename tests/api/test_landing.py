"""``GET /`` (issue 20, item 5): a landing page for browsers — what this is, the leaderboard, the
docs, how to connect — and the same pointers as JSON for API clients; ``HEAD`` answers wherever a
safe ``GET`` does. The page inside a cross-origin iframe in Chromium: ``test_e2e_embedded.py``."""

from __future__ import annotations

from litestar import Litestar
from litestar.testing import AsyncTestClient

from service import env as core

Client = AsyncTestClient[Litestar]
BROWSER = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


async def test_a_browser_gets_a_landing_page(client: Client) -> None:
    resp = await client.get("/", headers=BROWSER)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html"), resp.text[:300]
    page = resp.text
    for link in ("/leaderboard?split=dev&amp;format=html", "/leaderboard?split=test&amp;format=html", "/docs"):
        assert f'href="{link}"' in page, link
    assert "OpenEnv" in page and "GenericEnvClient" in page and "/reset" in page and "POST /mcp" in page
    assert all(f"<code>{task}</code>" in page for task in core.TASKS)  # every task listed
    assert "<script" not in page  # the CSP forbids inline scripts; the page needs none
    assert resp.headers["vary"] == "Accept"


async def test_api_clients_keep_getting_json(client: Client) -> None:
    for headers in ({}, {"accept": "application/json"}, {"accept": "*/*"}):
        resp = await client.get("/", headers=headers)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json"), headers
        body = resp.json()
        assert body["name"] == "ecomm-support-env" and body["docs"] == "/docs" and body["leaderboard"] == "/leaderboard"


async def test_head_answers_wherever_get_does(client: Client) -> None:
    for path, headers in (
        ("/", BROWSER),
        ("/", {}),
        ("/health", {}),
        ("/tasks", {}),
        ("/leaderboard?format=html", {}),
        ("/docs", {}),
        ("/openapi.json", {}),
        ("/metadata", {}),
    ):
        get = await client.get(path, headers=headers)
        head = await client.head(path, headers=headers)
        assert head.status_code == get.status_code == 200, (path, head.status_code, get.status_code)
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"], path
        assert "content-security-policy" in head.headers, path
    # a GET that starts an episode is not run for a HEAD
    assert (await client.head("/reset")).status_code == 405
    assert (await client.get("/state", params={"episode_id": "x"})).status_code == 404
    assert (await client.head("/state", params={"episode_id": "x"})).status_code == 404
