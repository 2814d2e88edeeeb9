"""Who a request comes from, and the limits per client (docs/security.md): Litestar's
``RateLimitMiddleware`` per client address and per run token on HTTP, and a per-client budget of
WebSocket handshakes and frames (the middleware sees HTTP only).

Limits are counted in fixed windows in process memory (each worker counts its own).

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
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.middleware.base import DefineMiddleware
from litestar.middleware.rate_limit import RateLimitConfig, RateLimitMiddleware

from service.db import client_usage
from service.db.engine import Database
from service.db.models import utcnow
from service.lib.problems import QuotaExceeded, bearer
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
        scope: Any = connection.scope
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


class EpisodeQuotaExceeded(QuotaExceeded):
    slug = "episode-quota-exceeded"
    title = "Too many episodes from this client"


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
def _client_is_limited(clients: ClientAddresses) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        return not clients.of(request).exempt

    return check


def _token_is_limited(clients: ClientAddresses) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        return bearer(request) is not None and not clients.of(request).exempt

    return check


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


def _token_key(request: Request[Any, Any, Any]) -> str:
    # The store never holds the token itself.
    return "token:" + hashlib.sha256((bearer(request) or "").encode("utf-8", "replace")).hexdigest()[:32]


class RunTokenRateLimitMiddleware(RateLimitMiddleware):
    """The same middleware under its own cache-key prefix (keys are ``<class name>::<identifier>``)."""


class HeavyReadRateLimitMiddleware(RateLimitMiddleware):
    """Run pages, manifests and the leaderboard, per address, per minute (own key prefix)."""


class TrajectoriesRateLimitMiddleware(RateLimitMiddleware):
    """``GET /runs/{id}/trajectories.jsonl`` per address, per minute (own key prefix)."""


class RunCreationRateLimitMiddleware(RateLimitMiddleware):
    """``POST /runs`` per address, per minute (own key prefix)."""


def rate_limit_middleware(settings: Settings, clients: ClientAddresses | None = None) -> list[DefineMiddleware]:
    """The HTTP rate limits these settings ask for (a limit set to 0 is off)."""
    clients = clients or client_addresses(settings)
    configs = []
    if settings.rate_limit_per_s:
        configs.append(
            RateLimitConfig(
                rate_limit=("second", settings.rate_limit_per_s),
                exclude=UNLIMITED_PATHS,
                identifier_for_request=clients.address,
                check_throttle_handler=_client_is_limited(clients),
                set_rate_limit_headers=False,
            )
        )
    if settings.rate_limit_run_token_per_s:
        configs.append(
            RateLimitConfig(
                rate_limit=("second", settings.rate_limit_run_token_per_s),
                exclude=UNLIMITED_PATHS,
                identifier_for_request=_token_key,
                check_throttle_handler=_token_is_limited(clients),
                middleware_class=RunTokenRateLimitMiddleware,
                set_rate_limit_headers=False,
            )
        )
    if settings.rate_limit_heavy_reads_per_min:
        configs.append(
            RateLimitConfig(
                rate_limit=("minute", settings.rate_limit_heavy_reads_per_min),
                identifier_for_request=clients.address,
                check_throttle_handler=_heavy_read(clients),
                middleware_class=HeavyReadRateLimitMiddleware,
                set_rate_limit_headers=False,
            )
        )
    if settings.rate_limit_trajectories_per_min:
        configs.append(
            RateLimitConfig(
                rate_limit=("minute", settings.rate_limit_trajectories_per_min),
                identifier_for_request=clients.address,
                check_throttle_handler=_trajectories(clients),
                middleware_class=TrajectoriesRateLimitMiddleware,
                set_rate_limit_headers=False,
            )
        )
    if settings.rate_limit_runs_per_min:
        configs.append(
            RateLimitConfig(
                rate_limit=("minute", settings.rate_limit_runs_per_min),
                identifier_for_request=clients.address,
                check_throttle_handler=_run_creation(clients),
                middleware_class=RunCreationRateLimitMiddleware,
                set_rate_limit_headers=False,
            )
        )
    return [c.middleware for c in configs]


RATE_LIMIT_STORE = "rate_limit"  # RateLimitConfig's default store name


SWEEP_EVERY_S = 30.0


async def sweep_rate_limit_counters(app: Any) -> None:
    """Litestar's memory store drops an expired counter only when its key is read again; a client that
    never comes back (or one address of many) would stay in memory. Sweep expired ones periodically,
    the WebSocket budgets too."""
    while True:
        await asyncio.sleep(SWEEP_EVERY_S)
        await app.stores.get(RATE_LIMIT_STORE).delete_expired()
        app.state.ws_sessions.frame_rate.sweep()


class FrameRate:
    """WebSocket handshakes and frames per second per client address, in fixed one-second windows.

    The window belongs to the address, not to a connection: reconnecting does not refill it (the
    sweep drops windows that have passed)."""

    def __init__(self, per_s: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_s = per_s
        self.clock = clock
        self._windows: dict[str, tuple[int, int]] = {}

    def spend(self, client: Client) -> int | None:
        """Count one handshake or frame; None when allowed, else the seconds to wait (Retry-After)."""
        if not self.per_s or client.exempt:
            return None
        now = int(self.clock())
        window, used = self._windows.get(client.address, (now, 0))
        if window != now:
            window, used = now, 0
        if used >= self.per_s:
            return 1
        self._windows[client.address] = (window, used + 1)
        return None

    def sweep(self) -> int:
        """Drop the windows that have passed; returns how many are left."""
        now = int(self.clock())
        for address in [a for a, (window, _) in self._windows.items() if window != now]:
            del self._windows[address]
        return len(self._windows)


__all__ = [
    "Client",
    "ClientAddresses",
    "EpisodeQuota",
    "EpisodeQuotaExceeded",
    "counted_address",
    "FrameRate",
    "client_addresses",
    "normalised_address",
    "rate_limit_middleware",
    "sweep_rate_limit_counters",
]
