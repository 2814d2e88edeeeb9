"""Response bodies of the operational endpoints."""

from __future__ import annotations

from pydantic import BaseModel


class ProxyView(BaseModel):
    """How the client address of this request was worked out: check a deployment behind a proxy with it."""

    trusted_proxy_hops: int  # TRUSTED_PROXY_HOPS: proxies in front that append to X-Forwarded-For
    forwarded_for_entries: int  # X-Forwarded-For entries this request carried
    counted: str  # which of them (or the TCP peer) is the client address


class LimitsResponse(BaseModel):
    client_address: str  # the address this request counts against (TRUSTED_PROXY_HOPS, docs/security.md)
    exempt: bool
    limits: dict[str, int]
    proxy: ProxyView


class ReadyResponse(BaseModel):
    status: str = "ready"
