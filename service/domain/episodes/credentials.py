"""Where the secrets of a request travel: headers or the JSON body, never the URL.

Run tokens and submitter keys go in ``Authorization: Bearer …`` (or ``run_token`` in a body); the
episode token of a client-chosen episode id goes in ``X-Episode-Token`` (or ``Authorization:
Bearer``, or ``episode_token`` in a body; over HTTP, a client that keeps cookies also sends the
``ecomm_episode_token`` cookie its reset set, see :mod:`service.domain.episodes.cookies`). A URL
ends up in access logs, proxy logs and browser history, so a token in the query string is refused
before anything else happens.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request

from service.db import leaks
from service.domain.episodes.cookies import cookie_token
from service.errors import TokenInUrl
from service.lib.decoding import unstorable
from service.lib.problems import bearer
from service.lib.secrets import hash_secret

log = logging.getLogger("service.credentials")

EPISODE_TOKEN_HEADER = "x-episode-token"
SECRET_QUERY_KEYS = ("run_token", "episode_token", "token", "submitter_key", "api_key", "access_token")


def episode_token(
    request: Request[Any, Any, Any], in_body: str | None = None, episode_id: str | None = None
) -> str | None:
    """The episode token a request carries for ``episode_id``: header, then body, then ``Authorization:
    Bearer``, then — only when ``episode_id`` is the episode of the request's ``ecomm_episode`` cookie —
    the ``ecomm_episode_token`` cookie the reset of that episode set."""
    return request.headers.get(EPISODE_TOKEN_HEADER) or in_body or bearer(request) or cookie_token(request, episode_id)


def explicit_episode_token(request: Request[Any, Any, Any], in_body: str | None = None) -> str | None:
    """An episode token the request sends as such (header or body field), never a bearer token."""
    return request.headers.get(EPISODE_TOKEN_HEADER) or in_body


async def refuse_tokens_in_url(request: Request[Any, Any, Any]) -> None:
    """``before_request`` hook of the app: a secret in the query string is a 400, never used — and revoked,
    since it has been seen where it may be logged (:mod:`service.db.leaks`)."""
    if not request.scope.get("query_string"):  # no query string (the step path): nothing to look for
        return
    found = [key for key in SECRET_QUERY_KEYS if key in request.query_params]
    if not found:
        return
    revoked = await _revoke(request, found)
    said = (
        f" It was revoked: {'; '.join(revoked)} can no longer be used — start a new run, or ask the operator for a "
        "new key."
        if revoked
        else " Treat it as leaked if it was real."
    )
    raise TokenInUrl(
        f"{', '.join(found)} in the query string: secrets go in a header or the body, never in the URL (URLs are "
        "logged). Send a run token or submitter key as "
        "`Authorization: Bearer <token>`, an episode token as `X-Episode-Token: <token>`, or either in the "
        f"JSON body of a POST.{said}",
        errors=[{"field": key, "message": "not allowed in the query string"} for key in found],
        revoked=revoked,
    )


async def _revoke(request: Request[Any, Any, Any], keys: list[str]) -> list[str]:
    episode_id = request.query_params.get("episode_id") or request.path_params.get("episode_id")
    if episode_id is not None and unstorable(episode_id):
        episode_id = None
    database = request.app.state.database
    revoked: list[str] = []
    for key in keys:
        for value in request.query_params.getall(key)[:4]:
            if value and not unstorable(value):  # (text no token can be is refused as such right after)
                revoked += await leaks.revoke_leaked(database, hash_secret(value), episode_id)
    if revoked:
        log.warning("secrets seen in a URL were revoked: %s", "; ".join(revoked))
    return revoked
