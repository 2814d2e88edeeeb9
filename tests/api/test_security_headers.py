"""Security headers on the HTML pages and ``/docs`` without a third-party CDN (issue 13, finding 9).
The browser check that the pages still work under this policy is ``test_e2e_pages.py``."""

from __future__ import annotations

import re

from litestar import Litestar
from litestar.testing import AsyncTestClient

from service.lib.security_headers import content_security_policy

Client = AsyncTestClient[Litestar]


async def test_html_pages_send_csp_nosniff_frame_and_referrer_headers(client: Client) -> None:
    for path in ("/leaderboard?format=html", "/docs"):
        resp = await client.get(path)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html"), (
            path,
            resp.status_code,
        )
        assert resp.headers["content-security-policy"] == content_security_policy()
        assert "script-src 'self'" in content_security_policy()
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["referrer-policy"] == "no-referrer"


async def test_docs_load_everything_from_this_origin(client: Client) -> None:
    page = (await client.get("/docs")).text
    assert "cdn" not in page.lower() and "https://" not in page and "http://" not in page
    assert "<script>" not in page  # no inline script: the CSP forbids it
    assets = re.findall(r"(?:src|href)='(/[^']+)'", page)
    assert len(assets) >= 4, page
    for asset in assets:
        assert (await client.get(asset)).status_code == 200, asset


SECURITY = ("content-security-policy", "x-content-type-options", "referrer-policy")


async def test_every_response_carries_the_security_headers_errors_included(settings) -> None:  # type: ignore[no-untyped-def]
    """Issue 21 finding 13: an error is a response too — a 404 from the router, a 405, a 422, a 429 made
    by the rate-limit middleware, a 500, a static asset — each carries every header a page does."""
    from dataclasses import replace

    from service.app import create_app

    app = create_app(replace(settings, rate_limit_exempt="", rate_limit_per_s=1, rate_limit_burst=1))
    budgets = app.state.budgets
    for buckets in (budgets.keyed, budgets.tokens, budgets.ceiling):
        buckets.clock = lambda: 1000.0  # no token comes back between the two requests, however slow they are
    async with AsyncTestClient(app=app) as client:
        answers = {
            "200": await client.get("/tasks"),
            "429": await client.get("/tasks"),
            "health": await client.get("/health"),
        }
    async with AsyncTestClient(app=create_app(settings)) as client:
        answers |= {
            "404 route": await client.get("/no/such/route"),
            "405": await client.delete("/tasks"),
            "422": await client.post("/step", json={"action": {"decision": "maybe"}}),
            "400": await client.post("/reset", content=b"{not json", headers={"content-type": "application/json"}),
            "404 episode": await client.get("/state", params={"episode_id": "nope"}),
            "static": await client.get(
                next(a for a in re.findall(r"(?:src|href)='(/[^']+)'", (await client.get("/docs")).text))
            ),
        }
    assert answers["429"].status_code == 429 and answers["404 route"].status_code == 404
    for name, resp in answers.items():
        missing = [h for h in SECURITY if h not in resp.headers]
        assert not missing, (name, resp.status_code, missing)
        assert "frame-ancestors" in resp.headers["content-security-policy"], name


async def test_framing_is_allowed_for_the_hugging_face_origins_only(settings) -> None:  # type: ignore[no-untyped-def]
    """A Space is shown inside an iframe on huggingface.co: the default FRAME_ANCESTORS allows exactly
    the Hugging Face origins (no X-Frame-Options: DENY, which would forbid every frame); 'none' restores it."""
    from dataclasses import replace

    from service.app import create_app
    from service.settings import Settings

    assert Settings.from_env({}).frame_ancestors == "https://huggingface.co https://*.hf.space"
    async with AsyncTestClient(app=create_app(settings)) as client:
        resp = await client.get("/leaderboard?format=html")
    csp = resp.headers["content-security-policy"]
    assert "frame-ancestors https://huggingface.co https://*.hf.space" in csp and "x-frame-options" not in resp.headers
    assert "script-src 'self'" in csp and resp.headers["x-content-type-options"] == "nosniff"
    async with AsyncTestClient(app=create_app(replace(settings, frame_ancestors="'none'"))) as client:
        resp = await client.get("/leaderboard?format=html")
    assert "frame-ancestors 'none'" in resp.headers["content-security-policy"]
    assert resp.headers["x-frame-options"] == "DENY"
    import pytest

    for bad in ("https://a.example; script-src *", "javascript:alert(1)", "https://a.example,https://b.example"):
        with pytest.raises(ValueError, match="FRAME_ANCESTORS"):
            Settings.from_env({"FRAME_ANCESTORS": bad})


async def test_a_500_carries_the_security_headers(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An unexpected error in a handler is answered 500 by the framework's last resort: it is a response too."""
    from service.app import create_app
    from service.domain.runs.services import RunService

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(RunService, "leaderboard_page", broken)
    async with AsyncTestClient(app=create_app(settings)) as client:
        resp = await client.get("/leaderboard")
    assert resp.status_code == 500
    assert [h for h in SECURITY if h not in resp.headers] == []
    assert "a bug" not in resp.text  # and it says nothing of the error


def test_the_connection_guards_own_answers_carry_the_security_headers(settings) -> None:  # type: ignore[no-untyped-def]
    """The 408 (a request that did not arrive whole in time) and the 503 (too many connections from one
    address) are written by the connection guard before any request reaches the app — no ``before_send``
    runs — so it writes the headers itself, with the deployment's FRAME_ANCESTORS."""
    from dataclasses import replace

    from service.lib import connections

    for ancestors in (settings.frame_ancestors, "'none'"):
        guard = connections.configure(replace(settings, frame_ancestors=ancestors))
        for answer in (guard.request_timeout_answer, guard.too_many_answer):
            head = answer.split(b"\r\n\r\n", 1)[0].decode()
            lines = dict(line.split(": ", 1) for line in head.splitlines()[1:])
            assert lines["content-security-policy"] == content_security_policy(ancestors), head
            assert lines["x-content-type-options"] == "nosniff" and lines["referrer-policy"] == "no-referrer"
            assert ("x-frame-options" in lines) == (ancestors == "'none'")
            assert int(lines["content-length"]) == len(answer.split(b"\r\n\r\n", 1)[1])
    connections.configure(settings)
