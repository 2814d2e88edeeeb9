"""Response bodies of the operational endpoints."""

from __future__ import annotations

from pydantic import BaseModel


class LimitsResponse(BaseModel):
    client_address: str  # the address this request counts against (TRUSTED_PROXY_HOPS, docs/security.md)
    exempt: bool
    limits: dict[str, int]


class ReadyResponse(BaseModel):
    status: str = "ready"
