"""Headers on every response, errors included (added as each response starts: ``before_send``, so
also to a 404 from the router, a 429 from a middleware, a 500 and the static files).

They matter for the HTML pages (landing page, leaderboard, runs, episodes, /docs) and are harmless
on JSON: scripts only from this origin (none inline), styles from this origin plus the pages' own
``<style>``, no MIME sniffing, no referrer leaving the site, and framing only by the origins of
``FRAME_ANCESTORS`` — by default Hugging Face's, which shows a Space inside an iframe on
huggingface.co (``'none'``: no framing at all, with ``X-Frame-Options: DENY`` for old browsers).
"""

from __future__ import annotations

from typing import Any

from service.settings import DEFAULT_FRAME_ANCESTORS, NO_FRAMING


def content_security_policy(frame_ancestors: str = DEFAULT_FRAME_ANCESTORS) -> str:
    return (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        f"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors {frame_ancestors}"
    )


def security_headers(frame_ancestors: str = DEFAULT_FRAME_ANCESTORS) -> list[tuple[str, str]]:
    headers = [
        ("Content-Security-Policy", content_security_policy(frame_ancestors)),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
    ]
    if frame_ancestors == NO_FRAMING:
        headers.append(("X-Frame-Options", "DENY"))  # it cannot name allowed origins: only when none are
    return headers


def add_security_headers(frame_ancestors: str = DEFAULT_FRAME_ANCESTORS) -> Any:
    """A ``before_send`` hook adding the headers to every HTTP response that does not set them itself."""
    encoded = [(name.lower().encode(), value.encode()) for name, value in security_headers(frame_ancestors)]
    names = {name for name, _ in encoded}

    async def before_send(message: Any, scope: Any) -> None:
        if message["type"] != "http.response.start":
            return
        headers = list(message.get("headers") or [])
        present = {bytes(name).lower() for name, _ in headers} & names
        message["headers"] = headers + [h for h in encoded if h[0] not in present]

    return before_send


__all__ = [
    "DEFAULT_FRAME_ANCESTORS",
    "add_security_headers",
    "content_security_policy",
    "security_headers",
]
