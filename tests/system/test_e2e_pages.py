"""The HTML pages in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).

Two full dev runs (heuristic and random) are played over HTTP against a live server; the
leaderboard, run and episode pages are then loaded in a real browser. Screenshots go to a
temporary folder (printed on failure).

Chromium is found on PATH (or at /usr/bin/chromium); when it is missing and this runs as root
with apt-get, it is installed the way .ci/run does (Debian's package, no browser download,
bounded in time); otherwise the test is skipped with the reason in pytest's summary — never a
failure for a missing browser. SKIP_BROWSER_TESTS=1 skips it outright.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.env.agents import HeuristicAgent, RandomAgent
from service.settings import Settings
from tests.conftest import LiveServer

pytestmark = pytest.mark.skipif(os.environ.get("SKIP_BROWSER_TESTS") == "1", reason="SKIP_BROWSER_TESTS=1")
APT_TIMEOUT_S = 600


def find_chromium() -> str | None:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    return found


def install_chromium() -> str:
    """Install Debian's chromium as .ci/run does; returns why not when it cannot."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root with apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
            done = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S, stdin=subprocess.DEVNULL
            )
            if done.returncode != 0:
                return f"`{' '.join(cmd)}` failed: {(done.stderr or done.stdout).strip()[-300:]}"
    except subprocess.TimeoutExpired as exc:
        return f"`{' '.join(exc.cmd)}` took over {APT_TIMEOUT_S}s"
    return "installed"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        outcome = install_chromium()
        found = find_chromium()
        if found is None:
            pytest.skip(
                f"no Chromium: not on PATH nor at /usr/bin/chromium, and installing Debian's chromium "
                f"failed ({outcome}); apt-get install chromium, or set SKIP_BROWSER_TESTS=1"
            )
    return found


async def _play_run(base: str, agent_name: str, workers: int = 8) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=STALLED_AFTER_S) as client:
        resp = await client.post("/runs", json={"agent": agent_name, "model": "", "split": "dev"})
        run = resp.json()
        headers = {"Authorization": f"Bearer {run['run_token']}"}

        async def worker(n: int) -> None:
            while True:
                resp = await client.post(f"/runs/{run['run_id']}/next", headers=headers)
                if resp.status_code == 409:
                    return
                body = resp.json()
                episode_id = body["metadata"]["episode_id"]
                agent = HeuristicAgent() if agent_name == "heuristic" else RandomAgent(body["metadata"]["index"])
                while not body["done"]:
                    obs = core.Observation.model_validate(
                        {k: v for k, v in body["observation"].items() if k != "episode_id"}
                    )
                    action = agent.act(obs).model_dump(exclude_defaults=True)
                    body = (
                        await client.post("/step", json={"episode_id": episode_id, "action": action}, headers=headers)
                    ).json()

        await asyncio.gather(*(worker(n) for n in range(workers)))
        return run["run_id"]


def test_pages_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'pages.db'}")
    server = LiveServer(settings, tmp_path / "server.log")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        heuristic_run = asyncio.run(_play_run(server.url, "heuristic"))
        random_run = asyncio.run(_play_run(server.url, "random"))
        board = httpx.get(server.url + "/leaderboard", params={"split": "dev"}, timeout=STALLED_AFTER_S).json()
        assert [r["run_id"] for r in board["rows"]] == [heuristic_run, random_run]

        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                ],
            )
            page = browser.new_page()
            page.set_default_timeout(STALLED_AFTER_S * 1000)  # a safety net: every wait is for something on the page
            # Security headers (issue 13): the pages work under their CSP, and nothing loads from elsewhere.
            csp_violations: list[str] = []
            foreign: list[str] = []
            page.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)
            page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith((server.url, "data:")) else None)
            page.goto(server.url + "/leaderboard?split=dev")  # a browser asks for text/html
            rows = page.locator("#leaderboard tr.run-row")
            assert rows.count() == 2
            assert "heuristic" in rows.nth(0).inner_text() and "random" in rows.nth(1).inner_text()
            assert rows.nth(0).locator("td").nth(0).inner_text() == "1"
            assert rows.nth(1).locator("td").nth(0).inner_text() == "2"  # CIs far apart: separate bands
            assert page.locator("#chart rect.bar").count() == 2 and page.locator("#chart line.ci").count() == 2
            page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)

            rows.nth(0).locator("a").first.click()
            page.wait_for_url(f"**/runs/{heuristic_run}**")
            assert page.locator("#run-status").inner_text() == "complete"
            assert page.locator("#per-task tbody tr").count() == len(core.TASKS)
            assert page.locator("#episodes tbody tr").count() == 200  # 400 episodes, 200 a page
            page.screenshot(path=str(shots / "run.png"))
            page.locator("#page-nav a[rel=next]").click()
            page.wait_for_url("**page=2**")
            assert page.locator("#episodes tbody tr").count() == 200
            assert page.locator("#episodes tbody tr td").first.inner_text() == "200"
            page.go_back()

            page.locator("#episodes tbody tr a").first.click()
            page.wait_for_url("**/episodes/**")
            assert page.locator("#steps tr.step").count() >= 1
            assert 0.0 <= float(page.locator("#score").inner_text()) <= 1.0
            assert page.locator("#grade tbody tr").count() >= 1
            assert "Order ORD-" in page.locator("#ticket").inner_text()
            page.screenshot(path=str(shots / "episode.png"), full_page=True)

            response = page.goto(server.url + "/docs")
            assert response is not None
            csp = response.headers["content-security-policy"]
            assert "frame-ancestors https://huggingface.co https://*.hf.space" in csp  # a Space is shown in a frame
            assert response.headers["x-content-type-options"] == "nosniff" and "x-frame-options" not in response.headers
            page.wait_for_selector(".swagger-ui .info .title")  # Swagger UI rendered from our own assets
            assert "ecomm-support-env" in page.locator(".swagger-ui .info .title").inner_text()
            assert page.locator(".opblock").count() > 10
            page.screenshot(path=str(shots / "docs.png"))
            browser.close()
        assert not csp_violations, csp_violations
        assert not foreign, foreign
        assert len(list(shots.glob("*.png"))) == 4
    finally:
        server.stop()
