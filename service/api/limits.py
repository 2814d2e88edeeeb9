"""Rate limits (docs/security.md): Litestar's ``RateLimitMiddleware`` per client address and per run
token on HTTP, and a per-client frame budget on WebSocket frames (the middleware sees HTTP only).

Limits are per second, counted in fixed one-second windows in process memory (each worker counts
its own). Addresses in ``RATE_LIMIT_EXEMPT`` (loopback by default) are never limited.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from litestar import Request
from litestar.middleware.base import DefineMiddleware
from litestar.middleware.rate_limit import RateLimitConfig, RateLimitMiddleware, get_remote_address

from service.api.problems import bearer
from service.settings import Settings

# Liveness probes from the platform and the static docs page are never limited.
UNLIMITED_PATHS = ["^/health$", "^/docs"]


# The checks are coroutines on purpose: Litestar runs a plain function given as check_throttle_handler
# in a worker thread (ensure_async_callable), a thread hop per request and per limit.
def _client_is_limited(exempt: frozenset[str]) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        return get_remote_address(request) not in exempt

    return check


def _token_is_limited(exempt: frozenset[str]) -> Any:
    async def check(request: Request[Any, Any, Any]) -> bool:
        return bearer(request) is not None and get_remote_address(request) not in exempt

    return check


def _token_key(request: Request[Any, Any, Any]) -> str:
    # The store never holds the token itself.
    return "token:" + hashlib.sha256((bearer(request) or "").encode("utf-8", "replace")).hexdigest()[:32]


class RunTokenRateLimitMiddleware(RateLimitMiddleware):
    """The same middleware under its own cache-key prefix (keys are ``<class name>::<identifier>``)."""


def rate_limit_middleware(settings: Settings) -> list[DefineMiddleware]:
    """The HTTP rate limits these settings ask for (none when both are 0)."""
    exempt = settings.exempt_addresses
    configs = []
    if settings.rate_limit_per_s:
        configs.append(RateLimitConfig(
            rate_limit=("second", settings.rate_limit_per_s), exclude=UNLIMITED_PATHS,
            check_throttle_handler=_client_is_limited(exempt), set_rate_limit_headers=False,
        ))
    if settings.rate_limit_run_token_per_s:
        configs.append(RateLimitConfig(
            rate_limit=("second", settings.rate_limit_run_token_per_s), exclude=UNLIMITED_PATHS,
            identifier_for_request=_token_key, check_throttle_handler=_token_is_limited(exempt),
            middleware_class=RunTokenRateLimitMiddleware, set_rate_limit_headers=False,
        ))
    return [c.middleware for c in configs]


RATE_LIMIT_STORE = "rate_limit"  # RateLimitConfig's default store name


SWEEP_EVERY_S = 30.0


async def sweep_rate_limit_counters(app: Any) -> None:
    """Litestar's memory store drops an expired counter only when its key is read again; a client that
    never comes back (or one address of many) would stay in memory. Sweep expired ones periodically."""
    while True:
        await asyncio.sleep(SWEEP_EVERY_S)
        await app.stores.get(RATE_LIMIT_STORE).delete_expired()


class FrameRate:
    """WebSocket frames per second per client address, in fixed one-second windows."""

    def __init__(self, per_s: int, exempt: frozenset[str] = frozenset()) -> None:
        self.per_s = per_s
        self.exempt = exempt
        self._windows: dict[str, tuple[int, int]] = {}

    def spend(self, client: str) -> int | None:
        """Count one frame; None when allowed, else the seconds to wait (Retry-After)."""
        if not self.per_s or client in self.exempt:
            return None
        now = int(time.monotonic())
        window, used = self._windows.get(client, (now, 0))
        if window != now:
            window, used = now, 0
        if used >= self.per_s:
            return 1
        self._windows[client] = (window, used + 1)
        return None

    def forget(self, client: str) -> None:
        self._windows.pop(client, None)


__all__ = ["FrameRate", "rate_limit_middleware", "sweep_rate_limit_counters"]
