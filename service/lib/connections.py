"""Connections that hold the server without using it: the protocol classes uvicorn serves with
(``uvicorn_options`` names them), so the limits hold before any request reaches the app.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``, but a connection that never
finishes a request — a few header bytes and then silence, or a body that trickles in — was kept for
ever: 2,000 of them from one address, none closed after 70 s, and about 1,005 locked everyone out at a
1,024 open-files limit. Here:

- **a request must arrive whole** (its headers, and its body) within ``CONNECTION_REQUEST_TIMEOUT_S``
  of the connection opening or of the previous response; past that the connection is answered 408 and
  closed (a WebSocket handshake is such a request too);
- **the process may open as many files as its hard limit allows** (the soft limit is raised at start);
- **one address holds at most** ``MAX_CONNECTIONS_PER_CLIENT`` open connections (HTTP and WebSocket
  together); one more is answered 503 and closed at once. The address is the TCP peer, counted as the
  limits count addresses (IPv6 per /64); addresses in ``RATE_LIMIT_EXEMPT`` (loopback) are not capped,
  and behind trusted proxies (``TRUSTED_PROXY_HOPS`` > 0) every peer is a proxy holding many clients'
  connections, so there the cap is off and the proxy's own limits apply.

One :data:`GUARD` per process (uvicorn builds a protocol object per connection from the class, in each
worker): :func:`configure` sets it from the settings — ``serve``, the container's entry point and every
worker's app factory call it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from service.lib.limits import normalised_address
from service.lib.security_headers import security_headers
from service.settings import DEFAULT_FRAME_ANCESTORS, Settings

log = logging.getLogger("service.connections")

HTTP_PROTOCOL = "service.lib.connections:GuardedHttpProtocol"
WS_PROTOCOL = "service.lib.connections:GuardedWebSocketProtocol"


def _plain_answer(status: str, text: str, *headers: str) -> bytes:
    body = (text + "\n").encode()
    head = [f"HTTP/1.1 {status}", "content-type: text/plain; charset=utf-8", "connection: close", *headers]
    return ("\r\n".join([*head, f"content-length: {len(body)}", "", ""])).encode() + body


def _request_timeout_answer(*headers: str) -> bytes:
    return _plain_answer(
        "408 Request Timeout",
        "the request did not arrive whole in time (CONNECTION_REQUEST_TIMEOUT_S); send it again",
        *headers,
    )


def _too_many_answer(*headers: str) -> bytes:
    return _plain_answer(
        "503 Service Unavailable",
        "this client address holds too many open connections (MAX_CONNECTIONS_PER_CLIENT); close some and retry",
        "retry-after: 5",
        *headers,
    )


def _peer_key(peer: Any) -> str:
    """The peer as the limits count addresses (an IPv6 address per /64)."""
    return normalised_address(str(peer[0])) if peer else "unknown"


def _admitted(peer: Any, transport: asyncio.Transport) -> str | None:
    """The connection's address when the per-address cap admits it; otherwise it is answered and closed."""
    address = _peer_key(peer)
    if GUARD.admit(address):
        return address
    transport.write(GUARD.too_many_answer)
    transport.close()
    return None


class ConnectionGuard:
    """Open connections per peer address, and the request deadline, for one process."""

    def __init__(self, request_timeout_s: float = 10.0, per_client: int = 64, exempt: frozenset[str] = frozenset()):
        self.request_timeout_s = request_timeout_s
        self.per_client = per_client
        self.exempt = exempt
        self.open: dict[str, int] = {}
        self.refused = 0  # connections refused past the cap (diagnostics, tests)
        self.timed_out = 0  # connections closed for a request that did not arrive in time
        self.answers_for(DEFAULT_FRAME_ANCESTORS)

    def answers_for(self, frame_ancestors: str) -> None:
        """The guard's own answers (written before any request reaches the app, so no ``before_send`` adds
        anything) carry the security headers every other response does."""
        headers = [f"{name.lower()}: {value}" for name, value in security_headers(frame_ancestors)]
        self.request_timeout_answer = _request_timeout_answer(*headers)
        self.too_many_answer = _too_many_answer(*headers)

    def admit(self, address: str) -> bool:
        held = self.open.get(address, 0)
        if self.per_client and held >= self.per_client and address not in self.exempt:
            self.refused += 1
            return False
        self.open[address] = held + 1
        return True

    def release(self, address: str) -> None:
        left = self.open.get(address, 0) - 1
        if left > 0:
            self.open[address] = left
        else:
            self.open.pop(address, None)


GUARD = ConnectionGuard()


def configure(settings: Settings) -> ConnectionGuard:
    """Set this process's guard from ``settings`` (no per-address cap behind trusted proxies). The open-files
    limit every connection counts against is raised by ``service.app.raise_open_file_limit``."""
    GUARD.request_timeout_s = settings.connection_request_timeout_s
    GUARD.per_client = 0 if settings.trusted_proxy_hops else settings.max_connections_per_client
    GUARD.exempt = settings.exempt_addresses
    GUARD.answers_for(settings.frame_ancestors)
    return GUARD


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the request deadline and the per-address cap."""

    _address: str | None = None
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._address = _admitted(self.client, transport)
        if self._address is not None:
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        if GUARD.request_timeout_s:
            self._deadline = self.loop.call_later(GUARD.request_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None  # (disarmed once a request is in: the app is answering it)
        if self.transport.is_closing():
            return
        GUARD.timed_out += 1
        self.transport.write(GUARD.request_timeout_answer)
        self.transport.close()

    def _let_go(self) -> None:
        if self._address is not None:
            GUARD.release(self._address)
            self._address = None

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self.parser.should_upgrade() and self._should_upgrade():
            self._disarm()  # a WebSocket handshake: the socket becomes the WebSocket protocol's
            self._let_go()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request has the same deadline (keep-alive closes an idle one sooner)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._let_go()
        super().connection_lost(exc)


class GuardedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, counted against the per-address cap while it is open."""

    _address: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._address = _admitted(self.client, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is not None:
            GUARD.release(self._address)
            self._address = None
        super().connection_lost(exc)
