"""Operational endpoints: readiness, the limits a client counts against, the OpenAPI document and
the index (``GET /health``, OpenEnv's liveness, is with the OpenEnv routes)."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency

from service.domain.system.schemas import LimitsResponse, ReadyResponse
from service.lib.decoding import close_openapi_bodies
from service.lib.problems import problem_responses
from service.settings import Settings

# What GET /limits shows: the settings that bound one client.
SHOWN_LIMITS = (
    "rate_limit_per_s",
    "rate_limit_run_token_per_s",
    "rate_limit_address_per_s",
    "rate_limit_burst",
    "rate_limit_heavy_reads_per_min",
    "rate_limit_trajectories_per_min",
    "rate_limit_runs_per_min",
    "ws_max_sessions_per_client",
    "mcp_max_sessions_per_client",
    "max_active_episodes_per_client",
    "max_episodes_per_client_per_day",
    "max_body_bytes",
)


@get("/openapi.json", include_in_schema=False, media_type=MediaType.JSON)
async def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return close_openapi_bodies(request.app.openapi_schema.to_schema())  # reset/step bodies are closed


@get("/", include_in_schema=False)
async def index() -> dict[str, str]:
    return {
        "name": "ecomm-support-env",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "start": "POST /reset, then POST /step with the episode_id it returns; or connect to WS /ws",
    }


@get("/limits", summary="The client address the limits count this request against, and the limits (docs/security.md)")
async def limits(request: Request[Any, Any, Any], settings: NamedDependency[Settings]) -> LimitsResponse:
    client = request.app.state.clients.of(request)
    return LimitsResponse(
        client_address=client.address,
        exempt=client.exempt,
        limits={name: getattr(settings, name) for name in SHOWN_LIMITS},
    )


@get(
    "/ready",
    summary="Readiness: the database answers, is not stalled and is migrated (GET /health is liveness only)",
    responses=problem_responses(),
)
async def ready(state: State) -> ReadyResponse:
    await state.readiness.check()  # a DatabaseFault answers 503 (or 507) through the problem handlers
    return ReadyResponse()


ROUTES = [openapi_json, index, limits, ready]
