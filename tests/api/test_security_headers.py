"""Security headers on the HTML pages and ``/docs`` without a third-party CDN (issue 13, finding 9).
The browser check that the pages still work under this policy is ``test_e2e_pages.py``."""

from __future__ import annotations

import re

from litestar import Litestar
from litestar.testing import AsyncTestClient

from service.lib.security_headers import CONTENT_SECURITY_POLICY

Client = AsyncTestClient[Litestar]


async def test_html_pages_send_csp_nosniff_frame_and_referrer_headers(client: Client) -> None:
    for path in ("/leaderboard?format=html", "/docs"):
        resp = await client.get(path)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html"), (
            path,
            resp.status_code,
        )
        assert resp.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY and "script-src 'self'" in CONTENT_SECURITY_POLICY
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["x-frame-options"] == "DENY"
        assert resp.headers["referrer-policy"] == "no-referrer"


async def test_docs_load_everything_from_this_origin(client: Client) -> None:
    page = (await client.get("/docs")).text
    assert "cdn" not in page.lower() and "https://" not in page and "http://" not in page
    assert "<script>" not in page  # no inline script: the CSP forbids it
    assets = re.findall(r"(?:src|href)='(/[^']+)'", page)
    assert len(assets) >= 4, page
    for asset in assets:
        assert (await client.get(asset)).status_code == 200, asset
