"""The Space works embedded (issue 20, item 5): Hugging Face shows a Space inside an iframe on
another origin. In headless Chromium (Debian's, as ``test_e2e_pages.py`` finds or installs it;
skipped with the reason when there is none), a parent page served from a second local port frames
the landing page. With the parent's origin in ``FRAME_ANCESTORS`` (as Hugging Face's are by
default) the page shows, under its CSP, and its leaderboard link works inside the frame; a server
whose ``FRAME_ANCESTORS`` does not list the parent (the default) is refused by the browser."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench.harness import STALLED_AFTER_S
from service.settings import DEFAULT_FRAME_ANCESTORS, Settings
from tests.conftest import LiveServer
from tests.system.test_e2e_pages import chromium  # noqa: F401 - the fixture: finds, installs or skips

pytestmark = pytest.mark.slow
REFUSED_FRAME = "frame-ancestors"  # Chromium's console message names the directive that refused the frame


class ParentPage:
    """A page on another origin (its own port) whose content is one iframe of ``frame_url``."""

    def __init__(self) -> None:
        self.frame_url = "about:blank"
        parent = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                html = (
                    "<!doctype html><title>parent</title><h1>Another origin</h1>"
                    f'<iframe id="space" src="{parent.frame_url}" width="1000" height="700"></iframe>'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(html)))
                self.end_headers()
                self.wfile.write(html)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _until(check: Any, what: str, timeout_s: float = STALLED_AFTER_S) -> None:
    """Wait for an event the browser reports (polled), failing with ``what`` if it never comes (``timeout_s``:
    a safety net, not a budget)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_landing_page_works_inside_a_cross_origin_iframe(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import sync_playwright

    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'embedded.db'}")
    parent = ParentPage()
    allowed = LiveServer(
        settings, tmp_path / "allowed.log", extra_env={"FRAME_ANCESTORS": f"{DEFAULT_FRAME_ANCESTORS} {parent.origin}"}
    )
    default = LiveServer(settings, tmp_path / "default.log")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
            )
            page = browser.new_page()
            page.set_default_timeout(STALLED_AFTER_S * 1000)  # a safety net: every wait is for something on the page
            console: list[str] = []
            page.on("console", lambda m: console.append(m.text))

            parent.frame_url = allowed.url + "/"
            page.goto(parent.origin)
            frame = page.frame_locator("#space")
            assert frame.locator("h1").inner_text() == "ecomm-support-env"
            assert frame.locator('a[href="/docs"]').count() >= 1
            frame.locator('a[href="/leaderboard?split=dev&format=html"]').first.click()
            assert frame.locator("h1").filter(has_text="board").inner_text().startswith("Practice board")
            assert not [m for m in console if "Content Security Policy" in m], console

            parent.frame_url = default.url + "/"
            page.goto(parent.origin)
            _until(lambda: any(REFUSED_FRAME in m for m in console), f"Chromium did not refuse the frame: {console}")
            child = page.frames[1]
            assert "ecomm-support-env" not in child.content()
            browser.close()
    finally:
        allowed.stop()
        default.stop()
        parent.close()
