"""Headers on every response (cheap: static, added by Litestar to each handler's response).

They matter for the HTML pages (leaderboard, runs, episodes, /docs) and are harmless on JSON: scripts
only from this origin (none inline), styles from this origin plus the pages' own ``<style>``,
no framing (clickjacking), no MIME sniffing, no referrer leaving the site.
"""

from __future__ import annotations

from litestar.datastructures import ResponseHeader

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

SECURITY_HEADERS = [
    ResponseHeader(name="Content-Security-Policy", value=CONTENT_SECURITY_POLICY),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    ResponseHeader(name="X-Frame-Options", value="DENY"),
    ResponseHeader(name="Referrer-Policy", value="no-referrer"),
]

__all__ = ["CONTENT_SECURITY_POLICY", "SECURITY_HEADERS"]
