"""Which episode an HTTP request means when it names none: for clients written for servers that
held one global episode (seed A's, the hackathon-era HTTP clients).

In this order: the ``episode_id`` the request names; else the episode in its ``ecomm_episode``
cookie, which every HTTP ``/reset`` sets — a client that keeps cookies (``requests.Session``,
``httpx.Client``, a browser) finds its own episode and never another client's; else, only when
the operator started the server with ``SINGLE_SESSION=1``, the episode of the latest ``/reset``
that named no episode (any client without a cookie lands there: one client per server); else
none, and the request gets the usual 422 asking for an ``episode_id``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from litestar import Request
from litestar.datastructures import Cookie

from service.api.episodes import ResetParams
from service.api.problems import InvalidInput

EPISODE_COOKIE = "ecomm_episode"
MAX_EPISODE_ID = 255

COOKIE_DOC = Cookie(
    key=EPISODE_COOKIE,
    description="The episode this reset started: a client that sends it back may leave episode_id out of "
    "/step, /state and /grader.",
    httponly=True,
    samesite="lax",
    documentation_only=True,
)


class ImplicitEpisode:
    """The fallback for requests without ``episode_id`` (one per app)."""

    def __init__(self, single_session: bool) -> None:
        self.single_session = single_session
        self._latest: str | None = None  # SINGLE_SESSION only: the latest reset that named no episode

    def resolve(self, request: Request[Any, Any, Any], episode_id: str | None) -> str | None:
        if episode_id:
            return episode_id
        raw = request.cookies.get(EPISODE_COOKIE)
        if raw:
            cookie = unquote(raw)
            if not 0 < len(cookie) <= MAX_EPISODE_ID or not cookie.isprintable():
                raise InvalidInput(
                    f"the {EPISODE_COOKIE} cookie is not an episode id; drop it and POST /reset, or pass episode_id",
                    errors=[{"field": f"cookie.{EPISODE_COOKIE}", "message": "not an episode id", "type": "invalid_cookie"}],
                )
            return cookie
        return self._latest if self.single_session else None

    def started(self, params: ResetParams, episode_id: str) -> Cookie:
        """Record a reset; the cookie that names its episode to the client."""
        if params.episode_id is None and params.run_id is None:
            self._latest = episode_id
        return Cookie(key=EPISODE_COOKIE, value=quote(episode_id, safe=""), httponly=True, samesite="lax", path="/")
