"""Which episode an HTTP request means when it names none: for clients written for servers that
held one global episode (seed A's, the hackathon-era HTTP clients).

In this order: the ``episode_id`` the request names; else the episode in its ``ecomm_episode``
cookie, which every HTTP ``/reset`` sets — a client that keeps cookies (``requests.Session``,
``httpx.Client``, a browser) finds its own episode and never another client's; else, only when
the operator started the server with ``SINGLE_SESSION=1``, the episode of the latest ``/reset``
that named no episode (any client without a cookie lands there: one client per server); else
none, and the request gets the usual 422 asking for an ``episode_id``.

A client-chosen episode id is guessable, so acting on it needs its episode token
(:mod:`service.domain.episodes.credentials`). For a client that keeps cookies but never sends tokens (seed A's
client never sends an episode id either), the reset that created such an episode also sets the
``ecomm_episode_token`` cookie (HttpOnly) with its token; it stands in for ``X-Episode-Token`` only
on requests for the episode the ``ecomm_episode`` cookie names. Whoever merely knows the id has
neither cookie, and still gets the 401 of a missing token.
"""

from __future__ import annotations

import re
from dataclasses import fields
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote

from litestar import Request
from litestar.datastructures import Cookie

from service.domain.episodes.schemas import ResetParams
from service.errors import InvalidRequest

EPISODE_COOKIE = "ecomm_episode"
EPISODE_TOKEN_COOKIE = "ecomm_episode_token"
MAX_EPISODE_ID = 255
MAX_EPISODE_TOKEN = 128

COOKIE_DOC = Cookie(
    key=EPISODE_COOKIE,
    description="The episode this reset started: a client that sends it back may leave episode_id out of "
    "/step, /state and /grader.",
    httponly=True,
    samesite="lax",
    documentation_only=True,
)
TOKEN_COOKIE_DOC = Cookie(
    key=EPISODE_TOKEN_COOKIE,
    description="Set with a client-chosen episode_id: that episode's token (as metadata.episode_token), sent back "
    "in place of X-Episode-Token on requests for the episode of the ecomm_episode cookie; cleared otherwise.",
    httponly=True,
    samesite="lax",
    documentation_only=True,
)


# A value SimpleCookie writes as it is (no quoting): what quote(..., safe="") makes of any id or token.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9%._~-]+")
_PLACEHOLDER = "ecommcookievalue"
_ATTRIBUTES = tuple(f.name for f in fields(Cookie) if f.name not in ("value", "description", "documentation_only"))


@lru_cache(maxsize=64)
def _header_around_value(attributes: tuple[tuple[str, Any], ...]) -> tuple[bytes, bytes]:
    """The ``Set-Cookie`` value Litestar writes for a cookie with these attributes, split where the value goes."""
    _, header = Cookie(**dict(attributes), value=_PLACEHOLDER).to_encoded_header()
    before, _, after = header.partition(_PLACEHOLDER.encode())
    return before, after


class _Cookie(Cookie):
    """A cookie whose header is its attributes' header, rendered once per set of attributes, around its
    value: Litestar renders every cookie through ``dataclasses.asdict`` and ``SimpleCookie`` (two per
    reset, more than the rest of the response). Same bytes (``tests/api/test_step_path.py``)."""

    def to_encoded_header(self) -> tuple[bytes, bytes]:
        value = self.value or ""
        attributes = tuple((name, getattr(self, name)) for name in _ATTRIBUTES)
        if not value:  # a cleared cookie: the whole header is its attributes'
            return _cleared_header(attributes)
        if not _PLAIN_VALUE.fullmatch(value):
            return super().to_encoded_header()
        before, after = _header_around_value(attributes)
        return b"set-cookie", before + value.encode("latin-1") + after


@lru_cache(maxsize=64)
def _cleared_header(attributes: tuple[tuple[str, Any], ...]) -> tuple[bytes, bytes]:
    return Cookie(**dict(attributes), value="").to_encoded_header()


def _cookie(key: str, value: str, max_age: int | None = None, secure: bool = False) -> Cookie:
    return _Cookie(key=key, value=value, httponly=True, samesite="lax", path="/", max_age=max_age, secure=secure)


def served_over_https(request: Request[Any, Any, Any]) -> bool:
    """Whether the client reached us over HTTPS: TLS to this server, or — behind trusted proxies
    (``TRUSTED_PROXY_HOPS``) — the ``X-Forwarded-Proto`` the outermost one wrote. The cookies are then
    ``Secure`` (never sent back over plain HTTP)."""
    if request.scope.get("scheme") in ("https", "wss"):
        return True
    hops = request.app.state.clients.hops
    if not hops:
        return False
    protos = [p.strip().lower() for v in request.headers.getall("x-forwarded-proto", []) for p in v.split(",")]
    protos = [p for p in protos if p]
    return bool(protos) and protos[-hops if len(protos) >= hops else 0] == "https"


def cookie_episode(request: Request[Any, Any, Any]) -> str | None:
    """The episode id of the request's ``ecomm_episode`` cookie (None without one; 422 if it is not an id)."""
    raw = request.cookies.get(EPISODE_COOKIE)
    if not raw:
        return None
    cookie = unquote(raw)
    if not 0 < len(cookie) <= MAX_EPISODE_ID or not cookie.isprintable():
        raise InvalidRequest(
            f"the {EPISODE_COOKIE} cookie is not an episode id; drop it and POST /reset, or pass episode_id",
            errors=[{"field": f"cookie.{EPISODE_COOKIE}", "message": "not an episode id", "type": "invalid_cookie"}],
        )
    return cookie


def cookie_token(request: Request[Any, Any, Any], episode_id: str | None) -> str | None:
    """The ``ecomm_episode_token`` cookie's token, only for the episode the ``ecomm_episode`` cookie names."""
    if not episode_id:
        return None
    raw = request.cookies.get(EPISODE_TOKEN_COOKIE)
    if not raw or episode_id != cookie_episode(request):
        return None
    token = unquote(raw)
    return token if 0 < len(token) <= MAX_EPISODE_TOKEN else None


class ImplicitEpisode:
    """The fallback for requests without ``episode_id`` (one per app)."""

    def __init__(self, single_session: bool) -> None:
        self.single_session = single_session
        self._latest: str | None = None  # SINGLE_SESSION only: the latest reset that named no episode

    def resolve(self, request: Request[Any, Any, Any], episode_id: str | None) -> str | None:
        if episode_id:
            return episode_id
        cookie = cookie_episode(request)
        if cookie is not None:
            return cookie
        return self._latest if self.single_session else None

    def started(
        self, params: ResetParams, episode_id: str, episode_token: str | None = None, secure: bool = False
    ) -> list[Cookie]:
        """Record a reset; the cookies that name its episode to the client, and its token (for a
        client-chosen id; otherwise the token cookie is cleared, so it never outlives its episode);
        ``Secure`` when the client came over HTTPS (:func:`served_over_https`)."""
        if params.episode_id is None and params.run_id is None:
            self._latest = episode_id
        token = (
            _cookie(EPISODE_TOKEN_COOKIE, quote(episode_token, safe=""), secure=secure)
            if episode_token
            else _cookie(EPISODE_TOKEN_COOKIE, "", max_age=0, secure=secure)
        )
        return [_cookie(EPISODE_COOKIE, quote(episode_id, safe=""), secure=secure), token]
