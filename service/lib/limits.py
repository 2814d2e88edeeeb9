"""Who a request comes from, and the limits per client (docs/security.md): per-second budgets of
every HTTP request and WebSocket handshake and frame (:class:`RequestBudgets`: per credential where
the request carries one, per client address otherwise, under a ceiling per address), and Litestar's
``RateLimitMiddleware`` per address and minute on the costly routes.

Limits are counted in process memory (each worker counts its own): token buckets for the budgets,
fixed windows for the per-minute limits.

**The client address** (:class:`ClientAddresses`) is the TCP peer, unless ``TRUSTED_PROXY_HOPS=N``
says N reverse proxies stand in front of the app, each appending the address it saw to
``X-Forwarded-For``: then it is the N-th entry from the right, the one the outermost trusted proxy
wrote. Everything left of it is whatever the client sent, never used. IPv6 clients are counted per
/64 (one host's share of a network: rotating addresses inside it changes nothing). Addresses in
``RATE_LIMIT_EXEMPT`` (loopback by default) are never limited, but only as the TCP peer of a request
that carries no forwarded header: no header can make a request exempt.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import lru_cache
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.middleware.rate_limit import RateLimitConfig, RateLimitMiddleware

from service.db import client_usage
from service.db.engine import Database
from service.db.models import utcnow
from service.errors import QuotaSpent
from service.lib.problems import bearer
from service.settings import Settings

log = logging.getLogger("service.limits")

# Liveness probes from the platform and the static docs page are never limited.
UNLIMITED_PATHS = ["^/health$", "^/docs"]
# The reads that cost the server most per request (a run page, a run's trajectories, the leaderboard,
# a manifest page); they have their own, lower limit per address beside the general one.
HEAVY_READ_PATHS = ("/runs/", "/leaderboard")
# A run's trajectories read every step of every episode: per minute, not per second.
TRAJECTORIES = "/trajectories.jsonl"

_SCOPE_KEY = "ecomm_client"  # where a connection's resolved client is kept (worked out once per request)
_MAX_ADDRESS = 64


@dataclass(frozen=True)
class Client:
    """The client of one request or WebSocket: its address (the rate-limit key) and whether the
    limits skip it; ``forwarded``: how many X-Forwarded-For entries the request carried."""

    address: str
    exempt: bool
    forwarded: int = 0


@lru_cache(maxsize=4096)  # a pure function of the text, asked for on every request and connection
def normalised_address(raw: str) -> str:
    """An address as the limits count it: an IPv4 address, an IPv6 /64, or (not an IP) the text, cut short."""
    text = raw.strip().strip('"')
    if text.startswith("["):  # [v6]:port
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text[:_MAX_ADDRESS] or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


class ClientAddresses:
    """Resolves the :class:`Client` of a connection (see the module docstring)."""

    def __init__(self, trusted_proxy_hops: int = 0, exempt: frozenset[str] = frozenset()) -> None:
        self.hops = trusted_proxy_hops
        self.exempt = exempt
        self.unproxied_seen = False  # a request that did not come through the trusted proxies was logged

    def of(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Client:
        return self.of_scope(connection.scope)

    def of_scope(self, scope: Any) -> Client:
        """:meth:`of` from the ASGI scope itself (a middleware needs no request object for it)."""
        cached = scope.get(_SCOPE_KEY)
        if cached is None:
            cached = scope[_SCOPE_KEY] = self.resolve(scope.get("client"), scope.get("headers") or [])
            if self.hops and cached.forwarded < self.hops and not cached.exempt and not self.unproxied_seen:
                self._say_unproxied(cached)
        return cached

    def _say_unproxied(self, client: Client) -> None:
        """Once: TRUSTED_PROXY_HOPS says N proxies append to X-Forwarded-For, and a request came with fewer
        entries — the proxies do not forward as configured, or the app is reachable past them."""
        self.unproxied_seen = True
        log.warning(
            "TRUSTED_PROXY_HOPS=%d but a request from %s carried %d X-Forwarded-For entries: the proxies in front do "
            "not append the client's address as configured, or the app is reachable without them (such requests "
            "count as the entry or peer shown); check GET /limits from two networks",
            self.hops,
            client.address,
            client.forwarded,
        )

    def resolve(self, peer: tuple[str, int] | list[Any] | None, headers: list[tuple[bytes, bytes]]) -> Client:
        peer_host = str(peer[0]) if peer else ""
        forwarded: list[str] = []
        proxied = False
        for name, value in headers:
            if name == b"x-forwarded-for":
                proxied = True
                forwarded.extend(e for e in value.decode("latin-1").split(",") if e.strip())
            elif name in (b"forwarded", b"x-real-ip"):
                proxied = True
        if self.hops and forwarded:
            chosen = forwarded[-self.hops] if len(forwarded) >= self.hops else forwarded[0]
            return Client(normalised_address(chosen), exempt=False, forwarded=len(forwarded))
        # A request carrying a forwarded header came through a proxy, or claims to: never exempt (the
        # peer may be a proxy on loopback; or uvicorn already replaced the peer with a forwarded entry).
        return Client(
            normalised_address(peer_host) if peer_host else "unknown",
            exempt=not proxied and peer_host in self.exempt,
            forwarded=len(forwarded),
        )

    def address(self, request: Request[Any, Any, Any]) -> str:
        """``identifier_for_request`` of the rate limits."""
        return self.of(request).address


def client_addresses(settings: Settings) -> ClientAddresses:
    return ClientAddresses(settings.trusted_proxy_hops, settings.exempt_addresses)


def counted_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The address a connection's new plain episodes count against; None for an exempt client."""
    client = connection.scope["litestar_app"].state.clients.of(connection)
    return None if client.exempt else client.address


class EpisodeQuotaExceeded(QuotaSpent):
    slug = "episode-quota-exceeded"


class EpisodeQuota:
    """Storage per client address: before an episode is stored — a plain reset or a run's next episode —
    at most ``max_active`` unfinished and ``max_per_day`` started in the last 24 hours (0: no cap), runs'
    episodes and plain ones counted together. One indexed count per reset or /next (never per step)."""

    DAY = timedelta(days=1)

    def __init__(self, db: Database, max_active: int, max_per_day: int) -> None:
        self.db, self.max_active, self.max_per_day = db, max_active, max_per_day

    async def check(self, client_address: str) -> None:
        if not self.max_active and not self.max_per_day:
            return
        started, active = await client_usage.episodes_of(self.db, client_address, utcnow() - self.DAY)
        if self.max_active and active >= self.max_active:
            raise EpisodeQuotaExceeded(
                f"this client already has {active} unfinished episodes, plain or of runs "
                f"(MAX_ACTIVE_EPISODES_PER_CLIENT={self.max_active}); "
                "finish one (or resume it) before starting another",
                retry_after_s=60,
                active=active,
            )
        if self.max_per_day and started >= self.max_per_day:
            raise EpisodeQuotaExceeded(
                f"this client started {started} episodes in the last 24 hours (MAX_EPISODES_PER_CLIENT_PER_DAY="
                f"{self.max_per_day}); try again later",
                retry_after_s=3600,
                started=started,
            )


# The checks are coroutines on purpose: Litestar runs a plain function given as check_throttle_handler
# in a worker thread (ensure_async_callable), a thread hop per request and per limit.
def _heavy_read(clients: ClientAddresses) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        path = request.scope["path"]
        return (
            request.method == "GET"
            and path.startswith(HEAVY_READ_PATHS)
            and not path.endswith(TRAJECTORIES)
            and not clients.of(request).exempt
        )

    return check


def _trajectories(clients: ClientAddresses) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        return (
            request.method == "GET" and request.scope["path"].endswith(TRAJECTORIES) and not clients.of(request).exempt
        )

    return check


def _run_creation(clients: ClientAddresses) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        return request.method == "POST" and request.scope["path"] == "/runs" and not clients.of(request).exempt

    return check


class HeavyReadRateLimitMiddleware(RateLimitMiddleware):
    """Run pages, manifests and the leaderboard, per address, per minute (own key prefix)."""


class TrajectoriesRateLimitMiddleware(RateLimitMiddleware):
    """``GET /runs/{id}/trajectories.jsonl`` per address, per minute (own key prefix)."""


class RunCreationRateLimitMiddleware(RateLimitMiddleware):
    """``POST /runs`` per address, per minute (own key prefix)."""


def per_minute_route(scope: Any) -> bool:
    """Whether a per-minute limit may apply to this request: a GET of a run page, manifest, trajectories
    or the leaderboard, or ``POST /runs`` (each limit's own check then decides, exempt clients included).
    Every other request — the step path among them — skips Litestar's rate-limit middleware entirely."""
    if scope["type"] != "http":
        return False
    method, path = scope["method"], scope["path"]
    return (method == "GET" and path.startswith(HEAVY_READ_PATHS)) or (method == "POST" and path == "/runs")


def rate_limit_middleware(settings: Settings, clients: ClientAddresses | None = None) -> list[Any]:
    """The HTTP rate limits these settings ask for (a limit set to 0 is off), as one middleware: the
    per-second request budgets (:class:`RequestBudgetMiddleware`), then the per-minute limits of the
    costly routes (Litestar's ``RateLimitMiddleware``, run only for :func:`per_minute_route` requests)."""
    clients = clients or client_addresses(settings)
    per_minute = (
        (settings.rate_limit_heavy_reads_per_min, _heavy_read, HeavyReadRateLimitMiddleware),
        (settings.rate_limit_trajectories_per_min, _trajectories, TrajectoriesRateLimitMiddleware),
        (settings.rate_limit_runs_per_min, _run_creation, RunCreationRateLimitMiddleware),
    )
    configs = [
        RateLimitConfig(
            rate_limit=("minute", limit),
            identifier_for_request=clients.address,
            check_throttle_handler=check(clients),
            middleware_class=middleware_class,
            set_rate_limit_headers=True,  # RateLimit-Reset: the 429's Retry-After (service.lib.problems)
        )
        for limit, check, middleware_class in per_minute
        if limit
    ]
    return [RequestBudgetMiddleware(configs)]


RATE_LIMIT_STORE = "rate_limit"  # RateLimitConfig's default store name


SWEEP_EVERY_S = 30.0


async def sweep_rate_limit_counters(app: Any) -> None:
    """Litestar's memory store drops an expired counter only when its key is read again; a client that
    never comes back (or one address of many) would stay in memory. Sweep expired ones periodically,
    and the request budgets that have refilled (a full bucket is the same as none)."""
    while True:
        await asyncio.sleep(SWEEP_EVERY_S)
        await app.stores.get(RATE_LIMIT_STORE).delete_expired()
        app.state.budgets.sweep()


class TokenBuckets:
    """Token buckets per key, in process memory: each holds at most ``burst`` tokens and refills at
    ``rate`` a second; a request takes one. A key never seen is a full bucket (so a full bucket is
    forgotten by :meth:`sweep`). ``rate`` 0: unlimited."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = float(rate), float(max(burst, 1))
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - at) * self.rate)

    def wait(self, key: str) -> float:
        """Seconds until ``key`` has a token (0: now)."""
        if not self.rate:
            return 0.0
        tokens = self._tokens(key, self.clock())
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> None:
        if self.rate:
            now = self.clock()
            self._buckets[key] = (self._tokens(key, now) - 1, now)

    def sweep(self) -> int:
        """Forget the buckets that have refilled; returns how many are left."""
        now = self.clock()
        for key in [k for k in self._buckets if self._tokens(k, now) >= self.burst]:
            del self._buckets[key]
        return len(self._buckets)


@dataclass(frozen=True)
class Refusal:
    """A request over a budget: whose budget, its setting, and how long to wait."""

    budget: str
    setting: str
    per_s: int
    retry_after_s: int

    def detail(self) -> str:
        return (
            f"{self.budget} sent more than {self.per_s} requests a second ({self.setting}, in bursts of up to "
            f"RATE_LIMIT_BURST); wait Retry-After ({self.retry_after_s} s) and retry; GET /limits shows the limits"
        )


ADDRESS, BEARER, EPISODE = "this client address", "this bearer token (a run token or key)", "this episode (or session)"


class RequestBudgets:
    """The per-second budgets of every HTTP request and WebSocket handshake and frame (docs/security.md):

    - the **key** budget. A request that carries a credential counts against that credential: a
      bearer token (run token, submitter key, or an episode token sent so) at
      ``RATE_LIMIT_RUN_TOKEN_PER_S``; an ``X-Episode-Token``, the episode it acts on, or a WebSocket
      session at ``RATE_LIMIT_PER_S`` each. One without (a reset, a read, a handshake) counts against
      its client address, at ``RATE_LIMIT_PER_S``.
    - the **address ceiling**: every request and frame of one client address, whatever it carries,
      at ``RATE_LIMIT_ADDRESS_PER_S``, so the credentials one address holds (its episodes: at most
      ``MAX_ACTIVE_EPISODES_PER_CLIENT`` unfinished) do not multiply its share of the server.

    Each is a token bucket of ``RATE_LIMIT_BURST`` requests (the ceiling's holds twice that), so a
    trainer's environments may all act at once. Exempt clients spend nothing."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        burst = settings.rate_limit_burst
        self.settings = settings
        self.keyed = TokenBuckets(settings.rate_limit_per_s, burst, clock)
        self.tokens = TokenBuckets(settings.rate_limit_run_token_per_s, burst, clock)
        self.ceiling = TokenBuckets(settings.rate_limit_address_per_s, 2 * burst, clock)

    def _budget(self, client: Client, credential: str | None, bearer: bool) -> tuple[TokenBuckets, str, Refusal]:
        s = self.settings
        if credential is None:
            return self.keyed, "address:" + client.address, Refusal(ADDRESS, "RATE_LIMIT_PER_S", s.rate_limit_per_s, 1)
        if bearer:
            token = Refusal(BEARER, "RATE_LIMIT_RUN_TOKEN_PER_S", s.rate_limit_run_token_per_s, 1)
            return self.tokens, credential, token
        return self.keyed, credential, Refusal(EPISODE, "RATE_LIMIT_PER_S", s.rate_limit_per_s, 1)

    def spend(self, client: Client, credential: str | None = None, bearer: bool = False) -> Refusal | None:
        """Count one request (or frame) of ``client`` carrying ``credential`` (a bearer token when
        ``bearer``): None when allowed; else the refusal, and nothing is counted."""
        if client.exempt:
            return None
        keyed, key, refusal = self._budget(client, credential, bearer)
        own, shared = keyed.wait(key), self.ceiling.wait(client.address)
        if own or shared:
            if shared > own:
                refusal = Refusal(ADDRESS, "RATE_LIMIT_ADDRESS_PER_S", self.settings.rate_limit_address_per_s, 1)
            return replace(refusal, retry_after_s=max(1, math.ceil(max(own, shared))))
        keyed.take(key)
        self.ceiling.take(client.address)
        return None

    def sweep(self) -> int:
        return self.keyed.sweep() + self.tokens.sweep() + self.ceiling.sweep()


def _digest(kind: str, secret: str) -> str:
    # The budgets never hold a credential itself.
    return kind + ":" + hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()[:32]


# The routes whose requests act on one episode (or MCP session), and where they name it.
_EPISODE_QUERY_PATHS = ("/state", "/grader")
_BODY_ID = {
    "/step": (b'"episode_id"', re.compile(rb'"episode_id"\s*:\s*"([^"\\]{1,255})"')),
    "/mcp": (b'"session_id"', re.compile(rb'"session_id"\s*:\s*"([^"\\]{1,255})"')),
}


async def request_credential(request: Request[Any, Any, Any]) -> tuple[str | None, bool]:
    """The credential a request acts with, as a budget key (hashed), and whether it is a bearer
    token: ``Authorization: Bearer``, else ``X-Episode-Token``, else the episode (or MCP session)
    it names in its query, body or ``ecomm_episode`` cookie. None: it carries none (a reset, a read)."""
    token = bearer(request)
    if token:
        return _digest("bearer", token), True
    if episode_token := request.headers.get("x-episode-token"):
        return _digest("episode-token", episode_token), False
    path = request.scope["path"]
    if path in _EPISODE_QUERY_PATHS and (named := request.query_params.get("episode_id")):
        return _digest("episode", named), False
    if request.method == "POST" and path in _BODY_ID:
        marker, pattern = _BODY_ID[path]
        body = await request.body()  # cached on the request's scope: the handler does not read the socket again
        found = pattern.search(body) if marker in body else None
        if found:
            return _digest("episode" if path == "/step" else "mcp-session", found.group(1).decode("latin-1")), False
    if path in ("/step", *_EPISODE_QUERY_PATHS) and (cookie := request.cookies.get("ecomm_episode")):
        return _digest("episode", cookie), False
    return None, False


class RateLimited(QuotaSpent):
    slug = "rate-limited"

    def __init__(self, refused: Refusal) -> None:
        super().__init__(refused.detail(), retry_after_s=refused.retry_after_s, limit=refused.setting)


def _unlimited(scope: Any) -> bool:
    return bool(_UNLIMITED.search(scope["path"]))


_UNLIMITED = re.compile("|".join(UNLIMITED_PATHS))


class RequestBudgetMiddleware(ASGIMiddleware):
    """Spends one request of :class:`RequestBudgets` (``app.state.budgets``) per HTTP request; over
    budget, a 429 problem (:class:`RateLimited`) with ``Retry-After``. Liveness and the docs page
    are never limited. Then, for the few routes they may apply to (:func:`per_minute_route`), the
    per-minute limits (``per_minute``: Litestar's rate-limit middleware, one per config, in order).

    One middleware, not one per limit: Litestar wraps every route in each app middleware, and each
    rate-limit middleware built a request and awaited its check on every request, the step path's
    included, to find that it did not apply."""

    scopes = (ScopeType.HTTP,)
    # by the request's path (a path pattern is matched against the route's, which Litestar 3 changes)
    should_bypass_for_scope = staticmethod(_unlimited)

    def __init__(self, per_minute: Sequence[RateLimitConfig] = ()) -> None:
        self.per_minute = tuple(per_minute)

    def __call__(self, app: Any) -> Any:
        """The middleware around one route's ``app`` (Litestar wraps each route once, at start)."""
        if not self.per_minute:
            return super().__call__(app)
        limited = app
        for config in reversed(self.per_minute):
            limited = config.middleware_class(app=limited, config=config)

        async def route(scope: Any, receive: Any, send: Any) -> None:
            await (limited if per_minute_route(scope) else app)(scope, receive, send)

        return super().__call__(route)

    async def handle(self, scope: Any, receive: Any, send: Any, next_app: Any) -> None:
        state = scope["litestar_app"].state
        client = state.clients.of_scope(scope)
        if not client.exempt:
            request: Request[Any, Any, Any] = scope["litestar_app"].request_class(scope, receive)
            credential, is_bearer = await request_credential(request)
            refused = state.budgets.spend(client, credential, is_bearer)
            if refused is not None:
                raise RateLimited(refused)
        await next_app(scope, receive, send)


__all__ = [
    "Client",
    "ClientAddresses",
    "EpisodeQuota",
    "EpisodeQuotaExceeded",
    "counted_address",
    "RateLimited",
    "Refusal",
    "RequestBudgets",
    "TokenBuckets",
    "client_addresses",
    "normalised_address",
    "per_minute_route",
    "rate_limit_middleware",
    "sweep_rate_limit_counters",
]
